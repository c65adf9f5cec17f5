package wait

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	var n atomic.Int32
	if !Until(time.Minute, func() bool { return n.Add(1) == 5 }) {
		t.Fatal("Until gave up on a condition that held at the fifth poll")
	}
	if got := n.Load(); got != 5 {
		t.Errorf("cond polled %d times, want 5 (no poll after it held)", got)
	}
	n.Store(0)
	if Until(20*time.Millisecond, func() bool { n.Add(1); return false }) {
		t.Fatal("Until reported a condition that never held")
	}
	if n.Load() < 2 {
		t.Errorf("cond polled %d times in 20 ms, want it polled again until the deadline", n.Load())
	}
	if !Until(0, func() bool { return true }) {
		t.Error("a condition that holds at once, with no time left, is still seen")
	}
}

// recorder is a testing.TB whose Fatalf records instead of stopping.
type recorder struct {
	testing.TB
	helper int
	fatal  string
}

func (r *recorder) Helper() { r.helper++ }
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
}

func TestWithinFailsNamingWhat(t *testing.T) {
	r := &recorder{TB: t}
	Within(r, 5*time.Millisecond, "the moon", func() bool { return false })
	if want := "timed out after 5ms waiting for the moon"; r.fatal != want {
		t.Errorf("failure %q, want %q", r.fatal, want)
	}
	if r.helper == 0 {
		t.Error("Within does not mark itself a helper: the failure would point at it, not at the test")
	}

	r = &recorder{TB: t}
	For(r, "the sun", func() bool { return true })
	if r.fatal != "" || r.helper < 2 {
		t.Errorf("For on a condition that holds: failure %q, %d helper calls", r.fatal, r.helper)
	}
}
