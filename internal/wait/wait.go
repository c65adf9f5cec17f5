package wait

import (
	"testing"
	"time"
)

// Deadline is how long For waits before it fails the test.
const Deadline = 60 * time.Second

// For and Within poll 1 ms apart at first, so that a condition that
// holds soon is seen at once, and back off to maxPause, so that a long
// wait (on a daemon's HTTP status, say) costs its subject little.
const maxPause = 10 * time.Millisecond

// For polls cond until it holds; after Deadline it fails the test,
// naming what it waited for.
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(t, Deadline, what, cond)
}

// Within is For with a deadline of its own: for a condition that waits on
// a retry's backoff, or a run longer than Deadline.
func Within(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(limit, maxPause, cond) {
		t.Fatalf("timed out after %v waiting for %s", limit, what)
	}
}

// Until polls cond every millisecond until it holds or limit passes, and
// reports whether it held: for a moment to catch (a file that exists
// only while a snapshot is written) as much as for a state that stays. It
// fails nothing: a goroutine other than the test's may call it, and a test
// may go on when cond did not hold.
func Until(limit time.Duration, cond func() bool) bool {
	return poll(limit, time.Millisecond, cond)
}

// poll calls cond until it holds or limit passes, pausing 1 ms after the
// first call and then twice as long each time, up to most.
func poll(limit, most time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for pause := time.Millisecond; !cond(); pause = min(2*pause, most) {
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(pause) // between two polls of cond, not a wait for time to pass
	}
	return true
}
