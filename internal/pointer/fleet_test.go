package pointer

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
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
