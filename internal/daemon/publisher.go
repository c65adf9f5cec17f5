package daemon

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/ens"
)

// pointerWriter is the ENS client as the publisher uses it.
type pointerWriter interface {
	WriteMany(ctx context.Context, updates []ens.Update) (ens.TxResult, error)
}

// publisher moves agents' ENS pointers to their newest verified snapshots:
// compare-and-set against the value each agent last published, at most one
// write per agent per interval, all due agents in one multicall (they share
// the signer), retries with backoff. Pending pointers live in each agent's
// state file, so a crash resumes them.
type publisher struct {
	w       pointerWriter
	agents  []*agent.Agent
	every   map[string]time.Duration // minimum interval between writes
	log     *slog.Logger
	metrics *metrics
	now     func() time.Time

	wake chan struct{}

	mu       sync.Mutex
	last     map[string]time.Time // last successful write per agent
	retryAt  map[string]time.Time // earliest next attempt after a failure
	failures map[string]int
	lastLog  time.Time
}

func newPublisher(w pointerWriter, agents []*agent.Agent, every map[string]time.Duration, log *slog.Logger, m *metrics) *publisher {
	return &publisher{
		w:        w,
		agents:   agents,
		every:    every,
		log:      log,
		metrics:  m,
		now:      time.Now,
		wake:     make(chan struct{}, 1),
		last:     map[string]time.Time{},
		retryAt:  map[string]time.Time{},
		failures: map[string]int{},
	}
}

// Notify asks the publisher to look for pending pointers.
func (p *publisher) Notify() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run publishes due pointers until ctx is done.
func (p *publisher) run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-timer.C:
		}
		next := p.publishDue(ctx, false)
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
	for attempt := 0; ; attempt++ {
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
		select {
		case <-ctx.Done():
			return left
		case <-time.After(backoffFor(attempt + 1)):
		}
	}
}

// publishDue writes the pointers that are due and returns when the next one
// will be (zero: nothing pending).
func (p *publisher) publishDue(ctx context.Context, force bool) time.Time {
	now := p.now()
	var due []agent.PendingPointer
	var next time.Time
	byName := map[string]*agent.Agent{}
	p.mu.Lock()
	for _, a := range p.agents {
		pp, ok := a.Pending()
		if !ok {
			continue
		}
		at := p.last[pp.Agent].Add(p.every[pp.Agent])
		if r := p.retryAt[pp.Agent]; r.After(at) {
			at = r
		}
		if force || !at.After(now) {
			due = append(due, pp)
			byName[pp.Name] = a
			continue
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	p.mu.Unlock()

	for len(due) > 0 {
		updates := make([]ens.Update, len(due))
		for i, d := range due {
			updates[i] = ens.Update{Name: d.Name, Value: d.Value, Expected: d.Expected}
		}
		start := p.now()
		res, err := p.w.WriteMany(ctx, updates)
		if errors.Is(err, ens.ErrMixedResolvers) && len(due) > 1 {
			// Names on different resolvers cannot share a transaction.
			for _, d := range due {
				p.writeOne(ctx, d, byName[d.Name])
			}
			break
		}
		if err == nil {
			p.succeeded(due, byName, res, p.now().Sub(start))
			break
		}
		// Agents with a definite problem (conflict, not authorised, no
		// such name) leave the batch; the others are retried at once.
		bad := perName(err)
		if len(bad) == 0 || len(bad) == len(due) {
			for _, d := range due {
				p.failed(d, byName[d.Name], errFor(bad, d.Name, err))
			}
			break
		}
		var rest []agent.PendingPointer
		for _, d := range due {
			if e, ok := bad[d.Name]; ok {
				p.failed(d, byName[d.Name], e)
			} else {
				rest = append(rest, d)
			}
		}
		due = rest
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.agents {
		if _, ok := a.Pending(); !ok {
			continue
		}
		at := p.last[a.ID()].Add(p.every[a.ID()])
		if r := p.retryAt[a.ID()]; r.After(at) {
			at = r
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next
}

func (p *publisher) writeOne(ctx context.Context, d agent.PendingPointer, a *agent.Agent) {
	start := p.now()
	res, err := p.w.WriteMany(ctx, []ens.Update{{Name: d.Name, Value: d.Value, Expected: d.Expected}})
	if err != nil {
		p.failed(d, a, err)
		return
	}
	p.succeeded([]agent.PendingPointer{d}, map[string]*agent.Agent{d.Name: a}, res, p.now().Sub(start))
}

func (p *publisher) succeeded(done []agent.PendingPointer, byName map[string]*agent.Agent, res ens.TxResult, took time.Duration) {
	tx := ""
	if !res.Unchanged {
		tx = res.TxHash.Hex()
	}
	for _, d := range done {
		a := byName[d.Name]
		if err := a.Published(d, tx); err != nil {
			p.log.Error("pointer published but the state could not be saved", "agent", d.Agent, "error", err)
		}
		p.mu.Lock()
		p.last[d.Agent] = p.now()
		delete(p.retryAt, d.Agent)
		recovered := p.failures[d.Agent]
		delete(p.failures, d.Agent)
		p.mu.Unlock()
		if recovered > 0 {
			p.log.Info("pointer publishing recovered", "agent", d.Agent, "previous_errors", recovered)
		}
		p.log.Info("pointer published", "agent", d.Agent, "name", d.Name, "blob", d.Value,
			"tx", tx, "batch", len(done), "gas", res.GasUsed, "took", took.Round(time.Millisecond),
			"pending_for", p.now().Sub(d.Since).Round(time.Millisecond))
		if p.metrics != nil {
			p.metrics.publishes.WithLabelValues(d.Agent, "published").Inc()
			p.metrics.publishLast.WithLabelValues(d.Agent).Set(float64(p.now().Unix()))
			p.metrics.stageDuration.WithLabelValues(d.Agent, "publish").Observe(took.Seconds())
			if len(done) > 0 {
				p.metrics.gasUsed.WithLabelValues(d.Agent).Add(float64(res.GasUsed) / float64(len(done)))
			}
		}
	}
}

func (p *publisher) failed(d agent.PendingPointer, a *agent.Agent, err error) {
	conflict := errors.Is(err, ens.ErrConflict)
	a.PublishFailed(d, err, conflict)
	p.mu.Lock()
	p.failures[d.Agent]++
	n := p.failures[d.Agent]
	p.retryAt[d.Agent] = p.now().Add(backoffFor(n))
	logNow := p.now().Sub(p.lastLog) >= 30*time.Second || conflict
	if logNow {
		p.lastLog = p.now()
	}
	p.mu.Unlock()
	result := "failed"
	if conflict {
		result = "conflict"
		p.log.Error("pointer not published: the record was changed by another writer; publishing held for this agent",
			"agent", d.Agent, "name", d.Name, "error", err)
	} else if logNow {
		p.log.Error("pointer publish failed; will retry", "agent", d.Agent, "name", d.Name,
			"error", err, "consecutive_errors", n)
	}
	if p.metrics != nil {
		p.metrics.publishes.WithLabelValues(d.Agent, result).Inc()
		p.metrics.failures.WithLabelValues(d.Agent, "publish").Inc()
	}
}

// perName splits a joined error from WriteMany into the per-name problems
// that a retry cannot fix.
func perName(err error) map[string]error {
	out := map[string]error{}
	var visit func(error)
	visit = func(e error) {
		var ce *ens.ConflictError
		var na *ens.NotAuthorizedError
		switch {
		case errors.As(e, &ce) && ce == e:
			out[ce.Name] = e
			return
		case errors.As(e, &na) && na == e:
			out[na.Name] = e
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, c := range j.Unwrap() {
				visit(c)
			}
		}
	}
	visit(err)
	return out
}

func errFor(bad map[string]error, name string, whole error) error {
	if e, ok := bad[name]; ok {
		return e
	}
	return whole
}

// backoffFor is capped exponential backoff with jitter for chain writes.
func backoffFor(failures int) time.Duration {
	d := 2 * time.Second << min(failures-1, 10)
	if d > 10*time.Minute || d <= 0 {
		d = 10 * time.Minute
	}
	return d/2 + rand.N(d/2+1)
}
