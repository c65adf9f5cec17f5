package backoff

import (
	"log/slog"
	"math/rand/v2"
	"time"
)

// Default limits.
const (
	DefaultMin      = time.Second
	DefaultMax      = 5 * time.Minute
	DefaultLogEvery = 30 * time.Second
)

// Backoff tracks consecutive failures of one operation. The zero value
// uses the defaults and discards log lines. It is not safe for concurrent
// use: each retry loop owns its Backoff.
type Backoff struct {
	Min, Max time.Duration // first and largest wait
	LogEvery time.Duration // at most one error line per period
	Log      *slog.Logger  // nil discards
	Now      func() time.Time
	// Jitter returns a random duration in [0, d]; nil uses math/rand.
	Jitter func(d time.Duration) time.Duration

	failures int
	lastLog  time.Time
}

// Failures is the number of consecutive failures so far.
func (b *Backoff) Failures() int { return b.failures }

// Wait is the wait after n consecutive failures: Min doubled n-1 times,
// capped at Max, of which the upper half is random (so many agents failing
// together do not retry in lockstep). It is 0 for n <= 0.
func (b *Backoff) Wait(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = DefaultMin
	}
	if hi <= 0 {
		hi = DefaultMax
	}
	d := lo << min(n-1, 30)
	if d > hi || d <= 0 {
		d = hi
	}
	return d/2 + b.jitter(d/2)
}

func (b *Backoff) jitter(d time.Duration) time.Duration {
	if b.Jitter != nil {
		return b.Jitter(d)
	}
	return time.Duration(rand.Int64N(int64(d) + 1))
}

func (b *Backoff) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// Failed records a failure and returns how long to wait before the next
// attempt. It logs msg at error level with err, the consecutive count, the
// wait and attrs, unless it already logged within LogEvery.
func (b *Backoff) Failed(msg string, err error, attrs ...any) time.Duration {
	b.failures++
	wait := b.Wait(b.failures)
	every := b.LogEvery
	if every <= 0 {
		every = DefaultLogEvery
	}
	if now := b.now(); b.failures == 1 || now.Sub(b.lastLog) >= every {
		b.lastLog = now
		if b.Log != nil {
			args := append([]any{"error", err, "consecutive_errors", b.failures, "backoff", wait.Round(time.Millisecond)}, attrs...)
			b.Log.Error(msg, args...)
		}
	}
	return wait
}

// Succeeded records a success. After failures it logs msg once, at info
// level, with the number of failures it ends, and returns that number.
func (b *Backoff) Succeeded(msg string, attrs ...any) int {
	n := b.failures
	if n > 0 && b.Log != nil {
		b.Log.Info(msg, append([]any{"previous_errors", n}, attrs...)...)
	}
	b.failures, b.lastLog = 0, time.Time{}
	return n
}
