package daemon

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/backoff"
)

// publisher schedules the agents' pointer writes: at most one write per
// agent per interval, all due agents in one call to agent.PublishOnce (it
// splits them into transactions as gas allows), failures retried with
// backoff per agent, and every published pointer read back every
// checkEvery (and after the chain comes back) to repair a rollback.
// Pending pointers live in each agent's state file, so a crash resumes
// them.
type publisher struct {
	w          agent.PointerWriter
	agents     []*agent.Agent
	every      map[string]time.Duration // minimum interval between writes
	checkEvery time.Duration
	log        *slog.Logger
	metrics    *metrics
	now        func() time.Time

	wake chan struct{}

	mu        sync.Mutex
	last      map[string]time.Time // last successful write per agent
	retryAt   map[string]time.Time // earliest next attempt after a failure
	backoff   map[string]*backoff.Backoff
	lastCheck time.Time
	chainDown bool // a chain call failed since the last success
}

func newPublisher(w agent.PointerWriter, agents []*agent.Agent, every map[string]time.Duration, checkEvery time.Duration,
	log *slog.Logger, m *metrics) *publisher {
	p := &publisher{
		w:          w,
		agents:     agents,
		every:      every,
		checkEvery: checkEvery,
		log:        log,
		metrics:    m,
		now:        time.Now,
		wake:       make(chan struct{}, 1),
		last:       map[string]time.Time{},
		retryAt:    map[string]time.Time{},
		backoff:    map[string]*backoff.Backoff{},
	}
	for _, a := range agents {
		p.backoff[a.ID()] = &backoff.Backoff{Min: 2 * time.Second, Max: 10 * time.Minute,
			Log: log.With("agent", a.ID())}
	}
	return p
}

// Notify asks the publisher to look for pending pointers.
func (p *publisher) Notify() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run publishes due pointers and checks published ones until ctx is done.
func (p *publisher) run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	p.lastCheck = p.now() // Prepare has just reconciled every agent
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-timer.C:
		}
		if p.checkEvery > 0 && p.now().Sub(p.lastCheck) >= p.checkEvery {
			p.checkAll(ctx)
		}
		next := p.publishDue(ctx, false)
		if p.checkEvery > 0 {
			if c := p.lastCheck.Add(p.checkEvery); next.IsZero() || c.Before(next) {
				next = c
			}
		}
		if next.IsZero() {
			next = p.now().Add(time.Minute)
		}
		timer.Reset(max(next.Sub(p.now()), 10*time.Millisecond))
	}
}

// flush publishes every pending pointer now, ignoring intervals and
// backoff, until none is left or ctx ends (the shutdown time limit, or a
// second signal). It returns the agents still pending.
func (p *publisher) flush(ctx context.Context) []string {
	bo := backoff.Backoff{Min: 250 * time.Millisecond, Max: 5 * time.Second}
	for n := 1; ; n++ {
		p.publishDue(ctx, true)
		var left []string
		for _, a := range p.agents {
			if _, ok := a.Pending(); ok {
				left = append(left, a.ID())
			}
		}
		if len(left) == 0 {
			return nil
		}
		t := time.NewTimer(bo.Wait(n))
		select {
		case <-ctx.Done():
			t.Stop()
			return left
		case <-t.C:
		}
	}
}

// dueAt is when agent id may write next; the caller holds p.mu.
func (p *publisher) dueAt(id string) time.Time {
	at := p.last[id].Add(p.every[id])
	if r := p.retryAt[id]; r.After(at) {
		at = r
	}
	return at
}

// publishDue writes the pointers that are due (all pending ones when
// force) and returns when the next one will be (zero: nothing pending).
func (p *publisher) publishDue(ctx context.Context, force bool) time.Time {
	// A rollback found while writing is published again at once, once.
	for round := 0; round < 2; round++ {
		now := p.now()
		var due []*agent.Agent
		p.mu.Lock()
		for _, a := range p.agents {
			if _, ok := a.Pending(); ok && (force || !p.dueAt(a.ID()).After(now)) {
				due = append(due, a)
			}
		}
		p.mu.Unlock()
		if len(due) == 0 {
			break
		}
		start := p.now()
		results := agent.PublishOnce(ctx, p.w, due)
		took := p.now().Sub(start)
		again := false
		for _, r := range results {
			if p.record(r, took, len(results)) {
				again = true
			}
		}
		if !again || ctx.Err() != nil {
			break
		}
	}
	var next time.Time
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.agents {
		if _, ok := a.Pending(); !ok {
			continue
		}
		if at := p.dueAt(a.ID()); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next
}

// record logs and schedules one agent's result; it reports a rollback,
// which the caller publishes again at once.
func (p *publisher) record(r agent.PublishResult, took time.Duration, batch int) (again bool) {
	id := r.Agent.ID()
	log := p.log.With("agent", id, "name", r.Update.Name)
	p.mu.Lock()
	bo := p.backoff[id]
	p.mu.Unlock()
	result := string(r.Outcome)
	switch r.Outcome {
	case agent.OutcomePublished:
		p.mu.Lock()
		p.last[id] = p.now()
		delete(p.retryAt, id)
		recovered := p.chainDown
		p.chainDown = false
		p.mu.Unlock()
		bo.Succeeded("pointer publishing recovered")
		if r.Err != nil {
			log.Error("pointer published; the agent state is not saved yet (retried)", "error", r.Err)
		}
		log.Info("pointer published", "blob", r.Update.Value, "tx", r.Write.TxHash, "batch", batch,
			"gas", r.Write.GasUsed, "took", took.Round(time.Millisecond),
			"pending_for", p.now().Sub(r.Since).Round(time.Millisecond))
		if p.metrics != nil {
			p.metrics.publishLast.WithLabelValues(id).Set(float64(p.now().Unix()))
			p.metrics.stageDuration.WithLabelValues(id, "publish").Observe(took.Seconds())
			p.metrics.gasUsed.WithLabelValues(id).Add(float64(r.Write.GasUsed))
		}
		if recovered {
			p.mu.Lock()
			p.lastCheck = time.Time{} // the chain is back: check every record soon
			p.mu.Unlock()
		}
	case agent.OutcomeRollback:
		log.Warn("the pointer went back to an older snapshot of this agent; publishing the newest again", "reason", r.Err)
		again = true
	case agent.OutcomeHeld, agent.OutcomeUnauthorized:
		log.Error("pointer publishing held until an operator decides", "reason", r.Err)
	default:
		wait := bo.Failed("pointer publish failed; will retry", r.Err)
		p.mu.Lock()
		p.retryAt[id] = p.now().Add(wait)
		p.chainDown = true
		p.mu.Unlock()
		if p.metrics != nil {
			p.metrics.failures.WithLabelValues(id, "publish").Inc()
		}
	}
	if p.metrics != nil {
		p.metrics.publishes.WithLabelValues(id, result).Inc()
	}
	return again
}

// checkAll reads every published pointer back and repairs rollbacks.
func (p *publisher) checkAll(ctx context.Context) {
	p.mu.Lock()
	p.lastCheck = p.now()
	p.mu.Unlock()
	for _, a := range p.agents {
		if ctx.Err() != nil {
			return
		}
		if !a.Ready() || a.Config().ENSName == "" {
			continue
		}
		held := a.Hold() != nil
		out, err := a.CheckPointer(ctx)
		log := p.log.With("agent", a.ID(), "name", a.Config().ENSName)
		switch out {
		case agent.OutcomeRollback:
			log.Warn("the pointer went back to an older snapshot of this agent; the newest is published again", "reason", err)
			p.Notify()
		case agent.OutcomeHeld:
			if !held {
				log.Error("pointer publishing held until an operator decides", "reason", err)
			}
		case agent.OutcomeFailed:
			log.Debug("pointer check failed", "error", err)
			p.mu.Lock()
			p.chainDown = true
			p.mu.Unlock()
		}
		if p.metrics != nil {
			p.metrics.pointerChecks.WithLabelValues(a.ID(), string(out)).Inc()
		}
	}
}
