package daemon

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// probeInterval is how often Walrus is probed while a sync is failing.
const probeInterval = 2 * time.Second

// prober notices the end of a Walrus outage. While some agent's last sync
// failed it probes the publishers and aggregators every couple of
// seconds; when a probe succeeds after one failed, it wakes every agent
// waiting for its backoff (an outage of minutes must not leave changes
// waiting minutes more). Idle, it costs a flag check per interval.
type prober struct {
	log *slog.Logger

	mu sync.Mutex
	ch chan struct{} // closed at the next recovery
}

func newProber(log *slog.Logger) *prober {
	return &prober{log: log, ch: make(chan struct{})}
}

// recovered returns a channel closed when Walrus next comes back.
func (p *prober) recovered() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ch
}

func (p *prober) broadcast() {
	p.mu.Lock()
	close(p.ch)
	p.ch = make(chan struct{})
	p.mu.Unlock()
}

// run probes with ping while failing says something fails, until ctx
// ends.
func (p *prober) run(ctx context.Context, ping func(context.Context) error, failing func() bool) {
	down := false
	t := time.NewTimer(probeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if failing() {
			err := ping(ctx)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil && !down:
				down = true
				p.log.Warn("walrus does not answer; waiting for it to come back", "error", err)
			case err == nil && down:
				down = false
				p.log.Info("walrus answers again; retrying failed snapshots now")
				p.broadcast()
			}
		} else {
			down = false
		}
		// Jittered, so many daemons sharing an aggregator do not probe in
		// lockstep.
		t.Reset(probeInterval*4/5 + rand.N(probeInterval*2/5))
	}
}
