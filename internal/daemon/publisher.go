package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/backoff"
	"github.com/hermesd/hermesd/internal/ens"
)

// publisher schedules the agents' pointer writes: at most one write per
// agent per interval, all due agents in one call to agent.PublishOnce,
// oldest change first (it splits them into transactions as gas allows),
// failures retried with backoff per agent, and every published pointer
// read back every checkEvery to repair a rollback. While the chain is
// unreachable it probes it with a read every couple of seconds; when the
// chain answers again, the pointers waiting for their backoff are
// published at once and every record is read back. Pending pointers live
// in each agent's state file, so a crash resumes them; a state save that
// failed after a publish is the agent's to retry (agent.Run).
type publisher struct {
	w          agent.PointerWriter
	probe      agent.Pointer // reads a record to see whether the chain is back; may be nil
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
	held      map[string]bool // held at the last look: its release publishes at once
	lastCheck time.Time
	checkBo   backoff.Backoff // read-backs that failed are tried again sooner
	checkAt   time.Time       // next read-back after a failed one (zero: lastCheck+checkEvery)
	chainDown bool            // a chain call failed since the last success
	// unreachable: the last failure was the chain not answering; a probe
	// runs until it answers.
	unreachable bool
	probeAt     time.Time
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
		held:       map[string]bool{},
		checkBo:    backoff.Backoff{Min: 2 * time.Second, Max: checkEvery},
	}
	p.probe, _ = w.(agent.Pointer)
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
	p.mu.Lock()
	p.lastCheck = p.now() // the first read-back is one interval after the start
	p.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-timer.C:
		}
		p.probeChain(ctx)
		if at := p.nextCheck(); p.checkEvery > 0 && !p.now().Before(at) {
			p.checkAll(ctx)
		}
		next := p.publishDue(ctx, false)
		p.mu.Lock()
		if at := p.probeAt; !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
		p.mu.Unlock()
		if p.checkEvery > 0 {
			if c := p.nextCheck(); next.IsZero() || c.Before(next) {
				next = c
			}
		}
		if next.IsZero() {
			next = p.now().Add(time.Minute)
		}
		timer.Reset(max(next.Sub(p.now()), 10*time.Millisecond))
	}
}

// nextCheck is when every record is read back next.
func (p *publisher) nextCheck() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.checkAt.IsZero() {
		return p.checkAt
	}
	return p.lastCheck.Add(p.checkEvery)
}

// probeChain reads one record while the chain is unreachable; when it
// answers, the pointers waiting for their backoff are due at once and the
// records are read back soon (a chain that comes back may come back
// rolled back).
func (p *publisher) probeChain(ctx context.Context) {
	p.mu.Lock()
	due := p.unreachable && p.probe != nil && !p.now().Before(p.probeAt)
	p.mu.Unlock()
	if !due {
		return
	}
	var name string
	for _, a := range p.agents {
		if n := a.Config().ENSName; n != "" {
			name = n
			break
		}
	}
	_, _, err := p.probe.Read(ctx, name)
	p.mu.Lock()
	defer p.mu.Unlock()
	if (err != nil && errors.Is(err, ens.ErrUnavailable)) || ctx.Err() != nil {
		// Jittered, so many daemons sharing a node do not probe in
		// lockstep.
		p.probeAt = p.now().Add(probeInterval*4/5 + rand.N(probeInterval*2/5))
		return
	}
	p.log.Info("the chain answers again; publishing pending pointers now")
	p.unreachable, p.probeAt = false, time.Time{}
	clear(p.retryAt)
	p.lastCheck, p.checkAt = time.Time{}, time.Time{}
}

// noteUnreachable starts the probe when err says the chain does not
// answer; the caller holds p.mu.
func (p *publisher) noteUnreachable(err error) {
	if errors.Is(err, ens.ErrUnavailable) && !p.unreachable {
		p.unreachable = true
		p.probeAt = p.now().Add(probeInterval)
	}
}

// flush publishes every pending pointer now, ignoring intervals and
// backoff, until none is left or ctx ends (the shutdown time limit, or a
// second signal). It returns the agents still pending.
func (p *publisher) flush(ctx context.Context) []string {
	bo := backoff.Backoff{Min: 250 * time.Millisecond, Max: 5 * time.Second}
	start, published := p.now(), 0
	defer func() {
		if published > 0 {
			took := p.now().Sub(start)
			p.log.Info("flush published pending pointers", "pointers", published, "took", took.Round(time.Millisecond),
				"per_second", fmt.Sprintf("%.1f", float64(published)/max(took.Seconds(), 1e-3)))
		}
	}()
	for n := 1; ; n++ {
		_, done := p.publish(ctx, true)
		published += done
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
	next, _ := p.publish(ctx, force)
	return next
}

// publish is publishDue that also counts the pointers it published.
func (p *publisher) publish(ctx context.Context, force bool) (next time.Time, published int) {
	p.noteHolds()
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
		// The oldest change first: when gas or time runs out, what waited
		// longest is on chain.
		slices.SortStableFunc(due, func(a, b *agent.Agent) int {
			return cmp.Compare(a.PendingSince().UnixNano(), b.PendingSince().UnixNano())
		})
		start := p.now()
		results := agent.PublishOnce(ctx, p.w, due)
		took := p.now().Sub(start)
		perTx := map[string]int{}
		for _, r := range results {
			if r.Write.TxHash != "" {
				perTx[r.Write.TxHash]++
			}
		}
		again := false
		for _, r := range results {
			if r.Outcome == agent.OutcomePublished {
				published++
			}
			if p.record(r, took, perTx[r.Write.TxHash]) {
				again = true
			}
		}
		if !again || ctx.Err() != nil {
			break
		}
	}
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
	return next, published
}

// noteHolds remembers which agents are held; one whose hold an operator
// just resolved (pointer override) publishes at once, whatever its
// interval or backoff.
func (p *publisher) noteHolds() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.agents {
		id := a.ID()
		switch held := a.Hold() != nil; {
		case held:
			p.held[id] = true
		case p.held[id]:
			delete(p.held, id)
			delete(p.last, id)
			delete(p.retryAt, id)
		}
	}
}

// record logs and schedules one agent's result; it reports a rollback,
// which the caller publishes again at once. batch is the number of updates
// in the result's transaction.
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
		p.chainDown, p.unreachable, p.probeAt = false, false, time.Time{}
		if recovered {
			p.lastCheck, p.checkAt = time.Time{}, time.Time{} // the chain is back: check every record soon
		}
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
	case agent.OutcomeRollback:
		log.Warn("the pointer went back to an older snapshot of this agent; publishing the newest again", "reason", r.Err)
		again = true
	case agent.OutcomeTransferred:
		// Final, and logged once by the agent: no retries, no backoff.
	case agent.OutcomeHeld, agent.OutcomeUnauthorized:
		log.Error("pointer publishing held until an operator decides", "reason", r.Err)
		p.mu.Lock()
		p.held[id] = true
		p.mu.Unlock()
	default:
		wait := bo.Failed("pointer publish failed; will retry", r.Err)
		p.mu.Lock()
		p.retryAt[id] = p.now().Add(wait)
		p.chainDown = true
		p.noteUnreachable(r.Err)
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
	failed := false
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
			failed = true
			p.mu.Lock()
			p.chainDown = true
			p.noteUnreachable(err)
			p.mu.Unlock()
		}
		if p.metrics != nil {
			p.metrics.pointerChecks.WithLabelValues(a.ID(), string(out)).Inc()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if failed {
		// Read again sooner than the interval: a record that could not
		// be read is not known to be right.
		p.checkAt = p.now().Add(p.checkBo.Failed("", nil))
		return
	}
	p.checkBo = backoff.Backoff{Min: p.checkBo.Min, Max: p.checkBo.Max}
	p.checkAt = time.Time{}
}
