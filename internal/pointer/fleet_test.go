package pointer

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/state"
)

// memFleet keeps fleet heads as the fleet node does, refusing every write
// while its gate is closed (the node fenced or not owning the agent).
type memFleet struct {
	mu     sync.Mutex
	closed bool
	heads  map[string]FleetHead
	writes int
}

var errGate = errors.New("fenced")

func (f *memFleet) gate() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errGate
	}
	return nil
}

func (f *memFleet) setClosed(c bool) {
	f.mu.Lock()
	f.closed = c
	f.mu.Unlock()
}

func (f *memFleet) PutHead(_ context.Context, agent string, h FleetHead) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errGate
	}
	if f.heads == nil {
		f.heads = map[string]FleetHead{}
	}
	f.heads[agent] = h
	f.writes++
	return nil
}

func (f *memFleet) published(agent string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.heads[agent].Published
}

func (f *memFleet) head(agent string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.heads[agent].Value
}

// TestFleetHeadFollowsEveryVerifiedSnapshot: every verified snapshot is
// written to the fleet head at once, and so is every record published
// (the head says what the record holds, which a new owner's descent
// check reads); one whose write was refused (the
// node fenced for a moment) is written as soon as the gate opens again —
// within the fleet's retry, not the record's pointer_interval (an hour
// here), which is what the fleet head is for.
func TestFleetHeadFollowsEveryVerifiedSnapshot(t *testing.T) {
	r := newRig(t)
	a := r.head("alpha", "alpha.eth", false, time.Hour)
	f := &memFleet{}
	a.h.deps.Fleet, a.h.deps.Gate = f, f.gate
	p := r.publisher(0, a)

	v1 := a.snapshot(t)
	if got := f.head("alpha"); got != v1 {
		t.Fatalf("after a verified snapshot the fleet head is %q, want %q", got, v1)
	}
	stepUntil(t, r, p, 10, "the first snapshot published", func() bool { return r.w.get("alpha.eth") == v1 })
	if got := f.published("alpha"); got != v1 {
		t.Fatalf("the record published, the fleet head says it holds %q, want %q", got, v1)
	}

	f.setClosed(true)
	v2 := a.snapshot(t)
	if got := f.head("alpha"); got != v1 || !a.h.FleetPending() {
		t.Fatalf("a refused write: fleet head %q, pending %v", got, a.h.FleetPending())
	}
	next := p.Step(t.Context())
	if next.IsZero() || next.Sub(r.clk.now()) > fleetRetry {
		t.Fatalf("a fleet head not written is tried again at %v, %v from now; want within %v", next, next.Sub(r.clk.now()), fleetRetry)
	}
	f.setClosed(false)
	r.clk.set(next)
	p.Step(t.Context())
	if got := f.head("alpha"); got != v2 || a.h.FleetPending() {
		t.Fatalf("the gate open again: fleet head %q, want %q (pending %v)", got, v2, a.h.FleetPending())
	}
	if got := r.w.get("alpha.eth"); got != v1 {
		t.Errorf("the record moved to %q within its pointer_interval", got)
	}
}

// stallFleet is a memFleet whose first write stalls until released, and
// which counts writes in flight together.
type stallFleet struct {
	memFleet
	mu       sync.Mutex
	calls    int
	inFlight int
	most     int
	entered  chan string // each write's value as it starts
	release  chan struct{}
}

func (f *stallFleet) PutHead(ctx context.Context, agent string, h FleetHead) error {
	f.mu.Lock()
	f.calls++
	first := f.calls == 1
	f.inFlight++
	f.most = max(f.most, f.inFlight)
	f.mu.Unlock()
	f.entered <- h.Value
	if first {
		<-f.release
	}
	err := f.memFleet.PutHead(ctx, agent, h)
	f.mu.Lock()
	f.inFlight--
	f.mu.Unlock()
	return err
}

// TestFleetHeadWritesDoNotOvertake: the snapshot loop and the publisher
// both write the fleet head; a write of an older value still in flight
// when a newer snapshot is verified must not land after it (seen in a
// fleet run: the fleet head rolled back to the record's value, and the
// next owner restored the older brain). The writes take turns, each
// naming the newest snapshot when its turn comes.
func TestFleetHeadWritesDoNotOvertake(t *testing.T) {
	r := newRig(t)
	a := r.head("alpha", "alpha.eth", false, time.Hour)
	f := &stallFleet{entered: make(chan string, 4), release: make(chan struct{})}
	a.h.deps.Fleet = f
	errs := make(chan error, 2)
	verify := func(v string, at int64) {
		errs <- a.h.Verified(state.Snapshot{BlobID: v, BundleHash: "0x" + v, CreatedAt: time.Unix(at, 0)})
	}
	go verify("alpha-1", 1700000001)
	if got := <-f.entered; got != "alpha-1" {
		t.Fatalf("first write names %q", got)
	}
	go verify("alpha-2", 1700000002)
	// A second write entering while the first stalls is the fault; give
	// it a moment to show (its absence cannot be waited for).
	select {
	case v := <-f.entered:
		t.Errorf("a write of %q started while the write of alpha-1 was in flight", v)
	case <-time.After(200 * time.Millisecond):
	}
	close(f.release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := f.head("alpha"); got != "alpha-2" {
		t.Fatalf("the fleet head names %q after both writes, want the newest, alpha-2", got)
	}
	if f.most != 1 {
		t.Errorf("%d fleet head writes were in flight together", f.most)
	}
}
