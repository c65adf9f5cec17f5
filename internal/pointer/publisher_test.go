package pointer

import (
	"context"
	"errors"
	"math/big"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/ens"
)

// The publisher's decisions, driven by Step with a fake clock: pacing,
// backoff, batching, confirmation, read-backs, the probe and the head
// watch; and, with Run, the lanes' independence.

// stepUntil steps p, moving the clock to each next round, until cond
// holds; at most n rounds.
func stepUntil(t *testing.T, r *rig, p *Publisher, n int, what string, cond func() bool) {
	t.Helper()
	for range n {
		next := p.Step(t.Context())
		if cond() {
			return
		}
		if next.IsZero() {
			break
		}
		r.clk.set(next)
	}
	t.Fatalf("%s: not after %d rounds", what, n)
}

// At most one write per pointer_interval; a newer snapshot waits for it.
func TestPacing(t *testing.T) {
	r := newRig(t)
	a := r.head("alpha", "alpha.eth", false, 10*time.Minute)
	p := r.publisher(0, a)
	first := a.snapshot(t)
	p.Step(t.Context())
	if r.w.get("alpha.eth") != first {
		t.Fatal("the first pointer was not written at once")
	}
	start := r.clk.now()
	second := a.snapshot(t)
	next := p.Step(t.Context())
	if r.w.get("alpha.eth") != first || !next.Equal(start.Add(10*time.Minute)) {
		t.Fatalf("written within pointer_interval (next %v)", next.Sub(start))
	}
	r.clk.set(next)
	p.Step(t.Context())
	if r.w.get("alpha.eth") != second {
		t.Fatal("not written once pointer_interval passed")
	}
	if calls, _ := r.l1.counts(); calls != 2 {
		t.Errorf("%d writes for two snapshots", calls)
	}
}

// A failed write is retried on the head's own backoff, not before.
func TestRetryBackoff(t *testing.T) {
	r := newRig(t)
	a := r.head("alpha", "alpha.eth", false, 0)
	p := r.publisher(0, a)
	r.l1.setHook(func(ens.Update) (ens.UpdateResult, bool) {
		return ens.UpdateResult{Outcome: ens.Retry, Err: errors.New("base fee above the cap")}, true
	})
	a.snapshot(t)
	next := p.Step(t.Context())
	if calls, _ := r.l1.counts(); calls != 1 || !next.After(r.clk.now()) {
		t.Fatalf("%d calls, next in %v", calls, next.Sub(r.clk.now()))
	}
	p.Step(t.Context())
	if calls, _ := r.l1.counts(); calls != 1 {
		t.Fatal("retried before its backoff")
	}
	if r.obs.n(r.obs.failures, "alpha/publish") != 1 || r.obs.n(r.obs.outcomes, "alpha/failed") != 1 {
		t.Errorf("failures %v outcomes %v", r.obs.failures, r.obs.outcomes)
	}
	r.l1.setHook(nil)
	r.clk.set(next)
	p.Step(t.Context())
	if _, ok := a.h.Pending(); ok {
		t.Fatal("not published after the backoff")
	}
}

// A gateway that lags costs exactly one L2 transaction: the pointer is
// confirmed by reads, on a backoff of its own, until L1 shows it.
func TestLaggingGatewayCostsOneTransaction(t *testing.T) {
	r := newRig(t)
	a := r.head("scout", "scout.l2.eth", true, 10*time.Minute)
	p := r.publisher(0, a)
	r.w.lagging(true)
	v := a.snapshot(t)
	var rounds []time.Time
	for range 20 {
		next := p.Step(t.Context())
		rounds = append(rounds, next)
		r.clk.set(next)
	}
	calls, txs := r.l2.counts()
	if calls != 1 || txs != 1 {
		t.Fatalf("%d calls and %d L2 transactions while the gateway lagged, want 1 and 1", calls, txs)
	}
	if got := r.obs.n(r.obs.outcomes, "scout/lagging"); got != 20 {
		t.Errorf("%d confirmations judged lagging, want 20", got)
	}
	// The confirmations back off (reads every ConfirmPoll, doubling).
	if d1, d2 := rounds[1].Sub(rounds[0]), rounds[10].Sub(rounds[9]); d2 <= d1 {
		t.Errorf("confirmations do not back off: %v then %v", d1, d2)
	}
	r.w.lagging(false)
	p.Step(t.Context())
	if st := a.st.get(); st.Pending != nil || st.Published != v {
		t.Fatalf("not published once visible: %+v", st.Pending)
	}
	if calls, txs := r.l2.counts(); calls != 1 || txs != 1 {
		t.Fatalf("%d calls, %d transactions in all", calls, txs)
	}
}

// Heads due together go out in one multicall; its gas is split among them
// once, and each share is paid to its agent.
func TestBatchAndAccount(t *testing.T) {
	r := newRig(t)
	var heads []*agent
	for _, id := range []string{"a1", "a2", "a3"} {
		heads = append(heads, r.head(id, id+".eth", false, 0))
	}
	p := r.publisher(0, heads...)
	for _, a := range heads {
		a.snapshot(t)
	}
	p.Step(t.Context())
	if calls, txs := r.l1.counts(); calls != 1 || txs != 1 {
		t.Fatalf("%d calls, %d transactions for three heads due together", calls, txs)
	}
	var sum uint64
	for _, a := range heads {
		gas, n := r.fees.gas(a.h.cfg.Agent)
		if n != 1 {
			t.Fatalf("%s paid %d fees", a.h.cfg.Agent, n)
		}
		sum += gas
	}
	if want := 3*r.l1.gasEach + 1; sum != want {
		t.Errorf("shares add up to %d gas, the receipt says %d", sum, want)
	}
}

// The oldest change goes first: when a batch is cut, what waited longest
// is on chain.
func TestOldestFirst(t *testing.T) {
	r := newRig(t)
	young, old := r.head("young", "young.eth", false, 0), r.head("old", "old.eth", false, 0)
	p := r.publisher(0, young, old)
	old.snapshot(t)
	young.snapshot(t)
	young.st.st.Pending.Since = old.st.st.Pending.Since.Add(time.Hour)
	var order []string
	r.l1.setHook(func(u ens.Update) (ens.UpdateResult, bool) {
		order = append(order, u.Name)
		return ens.UpdateResult{}, false
	})
	p.Step(t.Context())
	if !slices.Equal(order, []string{"old.eth", "young.eth"}) {
		t.Fatalf("order %v", order)
	}
}

// A rollback found while writing is published over in the same round, with
// the nonces read from the chain again.
func TestRollbackRepublishedAtOnce(t *testing.T) {
	r := newRig(t)
	a := r.head("alpha", "alpha.eth", false, time.Hour)
	p := r.publisher(0, a)
	a.snapshot(t)
	p.Step(t.Context())
	a.lin.ids = append(a.lin.ids, "alpha-old")
	r.w.set("alpha.eth", "alpha-old")
	r.clk.add(time.Hour)
	v := a.snapshot(t)
	p.Step(t.Context())
	if r.w.get("alpha.eth") != v || r.l1.resyncs == 0 || r.obs.n(r.obs.outcomes, "alpha/rollback") != 1 {
		t.Fatalf("record %s, resyncs %d, outcomes %v", r.w.get("alpha.eth"), r.l1.resyncs, r.obs.outcomes)
	}
}

// A hold an operator resolves publishes at once, whatever the interval.
func TestReleasedHoldPublishesAtOnce(t *testing.T) {
	r := newRig(t)
	a := r.head("alpha", "alpha.eth", false, time.Hour)
	p := r.publisher(0, a)
	first := a.snapshot(t)
	p.Step(t.Context())
	r.w.set("alpha.eth", "foreign")
	a.snapshot(t)
	r.clk.add(time.Hour)
	p.Step(t.Context())
	if a.h.Hold() == nil || r.obs.n(r.obs.outcomes, "alpha/held") != 1 {
		t.Fatal("not held")
	}
	if err := a.h.Override(t.Context()); err != nil {
		t.Fatal(err)
	}
	p.Step(t.Context())
	if got := r.w.get("alpha.eth"); got == "foreign" || got == first {
		t.Fatalf("the record is %s after the override", got)
	}
}

// Read-backs: every CheckEvery, sooner after a failed one; a rollback
// found is published at once; the age of what is known is reported.
func TestReadBacks(t *testing.T) {
	r := newRig(t)
	a := r.head("alpha", "alpha.eth", false, 0)
	p := r.publisher(time.Minute, a)
	first := a.snapshot(t)
	p.Step(t.Context())
	if p.Unverified(a.h) != "" {
		t.Fatal("unverified right after a write")
	}
	r.w.mu.Lock()
	r.w.readErr = errors.New("resolver timeout")
	r.w.mu.Unlock()
	r.clk.add(2 * time.Minute)
	next := p.Step(t.Context())
	if r.obs.n(r.obs.checks, "alpha/failed") != 1 || !next.Before(r.clk.now().Add(time.Minute)) {
		t.Fatalf("a failed read-back: checks %v, next in %v", r.obs.checks, next.Sub(r.clk.now()))
	}
	if u := p.Unverified(a.h); u == "" {
		t.Error("not unverified two intervals after the last read")
	}
	r.w.mu.Lock()
	r.w.readErr = nil
	r.w.mu.Unlock()
	a.lin.ids = append(a.lin.ids, "alpha-old")
	r.w.set("alpha.eth", "alpha-old")
	r.clk.set(next)
	p.Step(t.Context())
	if r.obs.n(r.obs.checks, "alpha/rollback") != 1 || r.w.get("alpha.eth") != first {
		t.Fatalf("rollback: checks %v, record %s", r.obs.checks, r.w.get("alpha.eth"))
	}
	if p.Unverified(a.h) != "" || !p.CheckedAt(a.h).Equal(r.clk.now()) {
		t.Errorf("after a read-back: %q, checked at %v", p.Unverified(a.h), p.CheckedAt(a.h))
	}
}

// An unreachable L1 chain is probed; when it answers, what waited for its
// backoff goes at once.
func TestProbe(t *testing.T) {
	r := newRig(t)
	a := r.head("alpha", "alpha.eth", false, 0)
	p := r.publisher(0, a)
	r.l1.setHook(func(ens.Update) (ens.UpdateResult, bool) {
		return ens.UpdateResult{Outcome: ens.Retry, Err: errDown}, true
	})
	r.w.mu.Lock()
	r.w.readErr = errDown
	r.w.mu.Unlock()
	a.snapshot(t)
	// Down for a while: the write's backoff grows, the probe keeps asking.
	var retryAt time.Time
	stepUntil(t, r, p, 100, "a long backoff", func() bool {
		retryAt = p.lanes[0].pace[a.h].retryAt
		return retryAt.Sub(r.clk.now()) > 10*time.Second
	})
	r.l1.setHook(nil)
	r.w.mu.Lock()
	r.w.readErr = nil
	r.w.mu.Unlock()
	r.clk.add(probeInterval * 6 / 5) // the latest a jittered probe comes
	p.Step(t.Context())
	if _, ok := a.h.Pending(); ok || !r.clk.now().Before(retryAt) {
		t.Fatal("not published as soon as the chain answered")
	}
}

// blocks is a chain head that a test moves.
type blocks struct {
	mu   sync.Mutex
	head ens.Head
}

func (b *blocks) Head(context.Context) (ens.Head, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.head, nil
}

func (b *blocks) Block(_ context.Context, n uint64) (ens.Head, error) {
	return ens.Head{Number: n, Hash: common.BigToHash(new(big.Int).SetUint64(n))}, nil
}

// The head watch: a head that goes back means every record is read back
// at once and the nonces are read from the chain.
func TestHeadWatch(t *testing.T) {
	r := newRig(t)
	a := r.head("alpha", "alpha.eth", false, 0)
	b := &blocks{head: ens.Head{Number: 50, Hash: common.Hash{50}}}
	hs := []*Head{a.h}
	p := NewPublisher(PublisherConfig{Chains: r.chains, Blocks: b, HeadEvery: time.Second, CheckEvery: time.Hour, Observer: r.obs, Now: r.clk.now}, hs)
	a.snapshot(t)
	p.Step(t.Context())
	if seen, mined := p.Watched(); seen.Number != 50 || mined != 101 {
		t.Fatalf("watched %d, mined %d", seen.Number, mined)
	}
	b.mu.Lock()
	b.head = ens.Head{Number: 40, Hash: common.Hash{40}}
	b.mu.Unlock()
	r.clk.add(time.Second)
	p.Step(t.Context())
	if r.obs.rewinds != 1 || r.l1.resyncs == 0 || r.obs.n(r.obs.checks, "alpha/ok") != 1 {
		t.Fatalf("rewinds %d, resyncs %d, checks %v", r.obs.rewinds, r.l1.resyncs, r.obs.checks)
	}
}

// A stop flushes what needs a write, every lane at once; a value written
// on the L2 and waiting to be visible needs none.
func TestFlush(t *testing.T) {
	r := newRig(t)
	l1 := r.head("alpha", "alpha.eth", false, time.Hour)
	l2 := r.head("scout", "scout.l2.eth", true, time.Hour)
	p := r.publisher(0, l1, l2)
	r.w.lagging(true)
	l1.snapshot(t)
	l2.snapshot(t)
	r.l1.setHook(func(ens.Update) (ens.UpdateResult, bool) {
		return ens.UpdateResult{Outcome: ens.Retry, Err: errors.New("base fee above the cap")}, true
	})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	left := p.Flush(ctx)
	cancel()
	if !slices.Equal(left, []string{"alpha"}) {
		t.Fatalf("left pending: %v, want [alpha]", left)
	}
	if pp, ok := l2.h.Pending(); !ok || !pp.AwaitingVisibility() {
		t.Fatalf("the L2 pointer: %+v", pp)
	}
	r.l1.setHook(nil)
	if left := p.Flush(t.Context()); len(left) != 0 {
		t.Fatalf("left pending: %v", left)
	}
	if _, txs := r.l2.counts(); txs != 1 {
		t.Errorf("%d L2 transactions", txs)
	}
}

// Each target publishes on its own: an L2 chain that hangs does not hold
// back an L1-recorded head.
func TestLanesIndependent(t *testing.T) {
	r := newRig(t)
	l1 := r.head("alpha", "alpha.eth", false, 0)
	l2 := r.head("scout", "scout.l2.eth", true, 0)
	hs := []*Head{l1.h, l2.h}
	p := NewPublisher(PublisherConfig{Chains: r.chains, Observer: r.obs}, hs)
	r.l2.hang = true
	l2.snapshot(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	<-r.l2.entered // the L2 write hangs
	v := l1.snapshot(t)
	deadline := time.Now().Add(30 * time.Second)
	for r.w.get("alpha.eth") != v {
		if time.Now().After(deadline) {
			t.Fatal("the L1 head was held back by the hung L2")
		}
		time.Sleep(time.Millisecond) // polling a condition
	}
	if _, ok := l2.h.Pending(); !ok {
		t.Error("the L2 head published through a hung chain")
	}
}
