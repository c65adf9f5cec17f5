package pointer

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// PublishOptions adjust Publish.
type PublishOptions struct {
	// Visible waits, reading through L1 on a backoff, until a value
	// written off L1 is visible there (or the visibility timeout passes,
	// or ctx ends) instead of returning Lagging.
	Visible bool
}

// maxRollbacks bounds how often Publish publishes over a rollback it
// found while writing.
const maxRollbacks = 3

// Publish publishes h's pending pointer now, through the chain of its
// target, as the publisher does but in the caller's goroutine (the CLI,
// the drill): a rollback found while writing is published over, a value
// written off L1 is confirmed through L1 at once. It returns the last
// result, and false when nothing was pending (a held agent has nothing
// pending).
func Publish(ctx context.Context, chains map[string]Chain, h *Head, opts PublishOptions) (Result, bool) {
	var last Result
	for range maxRollbacks {
		r, ok := h.PublishOnce(ctx, chains)
		if !ok {
			return last, last.Head != nil
		}
		last = r
		switch {
		case r.Outcome == Rollback:
			continue
		case r.Outcome == Lagging && opts.Visible:
			return h.awaitVisible(ctx, r), true
		}
		return r, true
	}
	return last, true
}

// PublishOnce writes h's pending pointer once through the chain of its
// target (for a value written off L1: confirms it, reading through L1)
// and records the outcome. It reports false when nothing is pending.
func (h *Head) PublishOnce(ctx context.Context, chains map[string]Chain) (Result, bool) {
	pp, ok := h.Pending()
	if !ok {
		return Result{}, false
	}
	if pp.AwaitingVisibility() {
		return h.Confirm(ctx), true
	}
	p := &Publisher{cfg: PublisherConfig{Chains: chains, Now: time.Now, Observer: nopObserver{}}, log: slog.New(slog.DiscardHandler)}
	l := newLane(p, h.cfg.Target)
	l.track(h)
	return l.write(ctx, []*Head{h}, []Pending{pp})[0], true
}

// awaitVisible confirms a written value (first: the result of its write)
// until L1 shows it, the visibility timeout passes, or ctx ends.
func (h *Head) awaitVisible(ctx context.Context, first Result) Result {
	poll := max(h.cfg.ConfirmPoll, 10*time.Millisecond)
	start := time.Now()
	for n := 0; ; n++ {
		t := time.NewTimer(min(poll<<min(n, 10), 5*time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			first.Err = fmt.Errorf("waiting for L1 to show it: %w", ctx.Err())
			first.Waited = time.Since(start)
			return first
		case <-t.C:
		}
		r := h.Confirm(ctx)
		if r.Outcome == Lagging {
			continue
		}
		r.Wrote, r.Write, r.Waited = first.Wrote, first.Write, time.Since(start)
		return r
	}
}
