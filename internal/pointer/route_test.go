package pointer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

// routeOf is a Router whose answer the test sets.
type routeOf struct {
	mu     sync.Mutex
	target string
	known  bool
	err    error
	asked  int
}

func (r *routeOf) Route(context.Context, string, string) (string, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked++
	return r.target, r.known, r.err
}

func (r *routeOf) set(target string, known bool, err error) {
	r.mu.Lock()
	r.target, r.known, r.err = target, known, err
	r.mu.Unlock()
}

// A head writes only where its name resolves from (docs/design.md §7.4):
// resolving through another target's L1 resolver, it is misrouted — not
// written, said in Misrouted — until a route check agrees; a read-back
// makes the next write check again; an unknown route or a failed route
// read is no misroute (and is asked again before the next write).
func TestMisrouted(t *testing.T) {
	r := newRig(t)
	a := r.head("alpha", "alpha.eth", false, 0)
	route := &routeOf{target: "l2", known: true}
	a.h.deps.Router = route
	v := a.snapshot(t)

	res := r.publishOnce(a)
	if _, txs := r.l1.counts(); res.Outcome != Misrouted || !errors.Is(res.Err, ErrMisrouted) || txs != 0 || r.w.get("alpha.eth") != "" {
		t.Fatalf("misrouted: outcome %s (%v), %d transactions", res.Outcome, res.Err, txs)
	}
	if m := a.h.Misrouted(); !strings.Contains(m, "records: l2") || !strings.Contains(m, "pointer move alpha.eth --to l1") {
		t.Errorf("Misrouted() = %q", m)
	}
	if p := a.st.get().Pending; p == nil || p.Value != v {
		t.Fatalf("the pending pointer was lost: %+v", p)
	}

	route.set("", true, nil) // the record moved back
	if res := r.publishOnce(a); res.Outcome != Published || a.h.Misrouted() != "" || r.w.get("alpha.eth") != v {
		t.Fatalf("after the route agrees: %s (%v), misrouted %q", res.Outcome, res.Err, a.h.Misrouted())
	}
	// Agreed once, the route is not asked again before each write...
	asked := route.asked
	route.set("l2", true, nil)
	a.snapshot(t)
	if res := r.publishOnce(a); res.Outcome != Published || route.asked != asked {
		t.Fatalf("a write after an agreed route: %s, route asked %d times more", res.Outcome, route.asked-asked)
	}
	// ...until a read-back.
	if _, err := a.h.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	a.snapshot(t)
	if res := r.publishOnce(a); res.Outcome != Misrouted || route.asked != asked+1 {
		t.Fatalf("after a read-back: %s, route asked %d times more", res.Outcome, route.asked-asked)
	}
	route.set("", false, nil) // a target without l1_resolver: cannot tell
	if res := r.publishOnce(a); res.Outcome != Published {
		t.Fatalf("unknown route: %s (%v)", res.Outcome, res.Err)
	}
	if _, err := a.h.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	route.set("l2", true, errDown) // a route that cannot be read: written as configured
	a.snapshot(t)
	asked = route.asked
	if res := r.publishOnce(a); res.Outcome != Published || route.asked != asked+1 {
		t.Fatalf("a failed route read: %s (%v)", res.Outcome, res.Err)
	}
	a.snapshot(t)
	if res := r.publishOnce(a); res.Outcome != Published || route.asked != asked+2 {
		t.Fatalf("after a failed route read, the next write asks again: %s (%v), asked %d", res.Outcome, res.Err, route.asked-asked)
	}
}
