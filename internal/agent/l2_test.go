package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/pointer"
)

// fakeL2 is an agent's record on an L2, where hermesd writes it by
// compare-and-set, and what L1 resolution shows of it through a gateway
// that can lag: frozen at what the L2 held when it began to lag.
type fakeL2 struct {
	mu      sync.Mutex
	where   map[string]string
	shown   map[string]string
	lag     bool
	readErr error
	writes  int
}

func newFakeL2() *fakeL2 { return &fakeL2{where: map[string]string{}, shown: map[string]string{}} }

// lagging freezes what L1 shows; caughtUp lets it follow the L2 again.
func (c *fakeL2) lagging() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lag = true
	for k, v := range c.where {
		c.shown[k] = v
	}
}

func (c *fakeL2) caughtUp() {
	c.mu.Lock()
	c.lag = false
	c.mu.Unlock()
}

func (c *fakeL2) l1(name string) (string, bool) {
	m := c.where
	if c.lag {
		m = c.shown
	}
	v, ok := m[name]
	return v, ok
}

// Read is what L1 resolution shows.
func (c *fakeL2) Read(_ context.Context, name string) (string, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.readErr != nil {
		return "", false, c.readErr
	}
	v, ok := c.l1(name)
	return v, ok, nil
}

// l2tx is the transaction every L2 write of the fake is mined in.
var l2tx = common.HexToHash("0x12")

// WriteBatches writes on the L2 by compare-and-set (pointer.Chain);
// nothing of it is read through L1 here: the head confirms.
func (c *fakeL2) WriteBatches(_ context.Context, ups []ens.Update, each func(ens.UpdateResult)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, u := range ups {
		r := ens.UpdateResult{Index: i, Update: u, ChainID: 1338}
		switch cur := c.where[u.Name]; {
		case cur == u.Value:
			r.Outcome = ens.Unchanged
		case cur != u.Expected:
			r.Outcome, r.Actual, r.Err = ens.Conflict, cur, errors.New("conflict")
		default:
			c.where[u.Name] = u.Value
			c.writes++
			r.Outcome, r.TxHash, r.BlockNumber, r.BatchSize = ens.Published, l2tx, uint64(c.writes), 1
		}
		each(r)
	}
	return nil
}

func (c *fakeL2) ResyncNonce() {}

func (c *fakeL2) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

// where reads the record where it lives (Deps.Record).
type where struct{ c *fakeL2 }

func (w where) Read(_ context.Context, name string) (string, bool, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	v, ok := w.c.where[name]
	return v, ok, nil
}

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func l2Rig(t *testing.T) (*rig, *fakeL2, *clock) {
	r := newRig(t)
	l2 := newFakeL2()
	clk := &clock{t: time.Now()}
	r.records, r.visibility, r.pointer, r.now = "l2", time.Hour, l2, clk.now
	return r, l2, clk
}

func publishOne(t *testing.T, a *Agent, c pointer.Chain) pointer.Result {
	t.Helper()
	out := publishOnce(t, a, c)
	if len(out) != 1 {
		t.Fatalf("%d results", len(out))
	}
	return out[0]
}

// A record on an L2 whose gateway lags: written once, then waited for —
// not written again, not a rollback, not another writer — until L1 shows
// it; past the visibility timeout an error that keeps the pointer
// pending, never a hold.
func TestL2PointerLag(t *testing.T) {
	r, l2, clk := l2Rig(t)
	a, _ := snapshotFirst(t, r)
	first := publishOne(t, a, l2)
	if first.Outcome != pointer.Published || l2.count() != 1 {
		t.Fatalf("first publish: %+v, %d writes", first, l2.count())
	}

	l2.lagging()
	r.write("system.md", "v2\n")
	res, err := a.SyncOnce(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	second := res.Snapshot.BlobID
	p := publishOne(t, a, l2)
	if p.Outcome != pointer.Lagging || p.Err != nil || l2.count() != 2 {
		t.Fatalf("publish while lagging: %s %v, %d writes", p.Outcome, p.Err, l2.count())
	}
	s := a.Status()
	if s.Pending == nil || s.Pending.Value != second || s.Pending.Written == nil || s.Pending.Written.TxHash != l2tx.Hex() ||
		s.Pending.Written.ChainID != 1338 || s.Pending.Target != "l2" {
		t.Fatalf("pending: %+v", s.Pending)
	}
	if !strings.Contains(s.PointerNote, "not yet visible from L1") || !strings.Contains(s.PointerNote, l2tx.Hex()) {
		t.Errorf("status note: %q", s.PointerNote)
	}

	// Neither the publisher's next round nor the read-back writes again,
	// calls it a rollback or holds.
	clk.add(10 * time.Minute)
	if p := publishOne(t, a, l2); p.Outcome != pointer.Lagging || l2.count() != 2 {
		t.Fatalf("publish again while lagging: %s, %d writes", p.Outcome, l2.count())
	}
	if out, err := a.Head().Check(t.Context()); out != pointer.Lagging || err != nil {
		t.Fatalf("read-back while lagging: %s %v", out, err)
	}
	if s := a.Status(); s.Hold != nil || s.Pending == nil || s.Pending.Value != second || s.Pending.Expected != first.Update.Value {
		t.Fatalf("after the read-back: hold %+v, pending %+v", s.Hold, s.Pending)
	}

	// Past the bound: an error, the pointer still pending, no hold, no
	// write.
	clk.add(time.Hour)
	p = publishOne(t, a, l2)
	if p.Outcome != pointer.NotVisible || p.Err == nil || !strings.Contains(p.Err.Error(), "not visible from L1 after 1h0m0s") ||
		!strings.Contains(p.Err.Error(), "an older snapshot of this agent") {
		t.Fatalf("past the bound: %s %v", p.Outcome, p.Err)
	}
	if out, err := a.Head().Check(t.Context()); out != pointer.NotVisible || err == nil {
		t.Fatalf("read-back past the bound: %s %v", out, err)
	}
	if s := a.Status(); s.Hold != nil || s.Pending == nil || s.Pending.LastErr == "" || !strings.Contains(s.PointerNote, "past visibility_timeout") || l2.count() != 2 {
		t.Fatalf("past the bound: %+v, %d writes", s, l2.count())
	}

	// The gateway catches up: published, with no write.
	l2.caughtUp()
	if p := publishOne(t, a, l2); p.Outcome != pointer.Published || l2.count() != 2 {
		t.Fatalf("caught up: %s %v, %d writes", p.Outcome, p.Err, l2.count())
	}
	if s := a.Status(); s.Pending != nil || s.Published != second || s.PointerNote != "" {
		t.Fatalf("after catching up: %+v", s)
	}
}

// A newer snapshot while the previous one waits to be visible replaces
// it on the L2 (the compare-and-set expects the written value); a
// restart keeps the written pointer and writes nothing again; a gateway
// that cannot be read is waited for like one that lags.
func TestL2PointerLagAcrossSnapshotsAndRestarts(t *testing.T) {
	r, l2, clk := l2Rig(t)
	l2.lagging()
	a, _ := snapshotFirst(t, r)
	if p := publishOne(t, a, l2); p.Outcome != pointer.Lagging || l2.count() != 1 {
		t.Fatalf("first: %s %v", p.Outcome, p.Err)
	}
	written, _ := a.Head().Pending()

	r.write("system.md", "v2\n")
	res, err := a.SyncOnce(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := a.Head().Pending(); p.Expected != written.Value || p.Written != nil || p.AwaitingVisibility() {
		t.Fatalf("the new pending pointer: %+v (want it to replace %s)", p, written.Value)
	}
	if p := publishOne(t, a, l2); p.Outcome != pointer.Lagging || l2.count() != 2 {
		t.Fatalf("second: %s %v, %d writes", p.Outcome, p.Err, l2.count())
	}

	// A restart: the written pointer is in the state file.
	clk.add(time.Minute)
	a = r.reopen(a)
	if err := a.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	p, ok := a.Head().Pending()
	if !ok || !p.AwaitingVisibility() || p.Value != res.Snapshot.BlobID {
		t.Fatalf("after a restart: %+v", p)
	}
	l2.mu.Lock()
	l2.readErr = errors.New("gateway unreachable")
	l2.mu.Unlock()
	if p := publishOne(t, a, l2); p.Outcome != pointer.Lagging || l2.count() != 2 {
		t.Fatalf("gateway down: %s %v, %d writes", p.Outcome, p.Err, l2.count())
	}
	if s := a.Status(); !strings.Contains(s.PointerNote, "could not be read: gateway unreachable") {
		t.Errorf("note: %q", s.PointerNote)
	}
	l2.mu.Lock()
	l2.readErr = nil
	l2.mu.Unlock()
	l2.caughtUp()
	if p := publishOne(t, a, l2); p.Outcome != pointer.Published || l2.count() != 2 {
		t.Fatalf("caught up: %s %v", p.Outcome, p.Err)
	}

	// The record moves back to L1 (configuration): a pending pointer
	// written on the L2 is not taken for written there.
	r.write("system.md", "v3\n")
	if _, err := a.SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	l2.lagging()
	publishOne(t, a, l2)
	r.records = ""
	a = r.reopen(a)
	if p, ok := a.Head().Pending(); !ok || p.Target != "" || p.Written != nil {
		t.Fatalf("after moving the record to L1: %+v", p)
	}
}

// A gateway that falls behind a value already confirmed shows an older
// one (or none): the read-back sees that the record where it lives still
// holds what was published — a lag, not a rollback to repair.
func TestL2ReadBackLagIsNotRollback(t *testing.T) {
	r, l2, _ := l2Rig(t)
	r.record = where{l2}
	a, _ := snapshotFirst(t, r)
	if p := publishOne(t, a, l2); p.Outcome != pointer.Published {
		t.Fatalf("publish: %s", p.Outcome)
	}
	l2.mu.Lock()
	l2.lag, l2.shown = true, map[string]string{} // L1 shows the record as it was before
	l2.mu.Unlock()
	if out, err := a.Head().Check(t.Context()); out != pointer.Lagging || err != nil {
		t.Fatalf("read-back: %s %v, want lagging", out, err)
	}
	if _, ok := a.Head().Pending(); ok || l2.count() != 1 {
		t.Fatalf("a lagging gateway made the published snapshot pending again (%d writes)", l2.count())
	}
	// Without the record where it lives, the same read is a rollback.
	r.record = nil
	a = r.reopen(a)
	if out, _ := a.Head().Check(t.Context()); out != pointer.Rollback {
		t.Fatalf("without the L2 reader: %s, want rollback", out)
	}
}
