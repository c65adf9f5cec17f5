package daemon

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// The prober wakes waiting agents when Walrus answers again after failing
// to, and stays quiet while nothing fails.
func TestProberBroadcastsRecovery(t *testing.T) {
	t.Parallel()
	var down, failing atomic.Bool
	var pings atomic.Int64
	p := newProber(func(context.Context) error {
		pings.Add(1)
		if down.Load() {
			return errors.New("connection refused")
		}
		return nil
	}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.run(ctx, failing.Load) }()
	defer func() { cancel(); <-done }()

	woken := p.recovered()
	down.Store(true)
	failing.Store(true)
	deadline := time.Now().Add(30 * time.Second)
	for pings.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no probes while a sync fails")
		}
		time.Sleep(10 * time.Millisecond) // waiting for the condition
	}
	select {
	case <-woken:
		t.Fatal("woke agents while Walrus is still down")
	default:
	}
	down.Store(false)
	select {
	case <-woken:
	case <-time.After(30 * time.Second):
		t.Fatal("agents not woken after Walrus came back")
	}
	if p.recovered() == woken {
		t.Fatal("the next recovery reuses a closed channel")
	}
	// Nothing failing: no probes.
	failing.Store(false)
	n := pings.Load()
	time.Sleep(3 * probeInterval) // a quiet period is what is being checked
	if pings.Load() > n+1 {
		t.Errorf("%d probes while nothing failed", pings.Load()-n)
	}
}
