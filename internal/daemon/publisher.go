package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"

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
	// confirm paces the confirmations of a pointer written where its
	// record lives (an L2) that L1 resolution does not show yet, per
	// agent: they write nothing, so pointer_interval does not apply.
	confirm map[string]*backoff.Backoff
	log     *slog.Logger
	metrics *metrics
	now     func() time.Time

	wake chan struct{}

	mu        sync.Mutex
	last      map[string]time.Time // last successful write per agent
	retryAt   map[string]time.Time // earliest next attempt after a failure
	backoff   map[string]*backoff.Backoff
	held      map[string]bool      // held at the last look: its release publishes at once
	confirmAt map[string]time.Time // next confirmation of a pointer not visible from L1 yet
	confirmN  map[string]int       // confirmations of it so far
	lastCheck time.Time
	checkBo   backoff.Backoff // read-backs that failed are tried again sooner
	checkAt   time.Time       // next read-back after a failed one (zero: lastCheck+checkEvery)
	chainDown bool            // a chain call failed since the last success
	// unreachable: the last failure was the chain not answering; a probe
	// runs until it answers.
	unreachable bool
	probeAt     time.Time

	// The head watch: the L1 chain's head is looked at every headEvery
	// (nil heads: never), so that a chain that went back is noticed at
	// once rather than at the next read-back.
	heads     chainHead
	headEvery time.Duration
	headAt    time.Time // next look
	seen      ens.Head  // the head at the last look (zero: none yet)
	// mined is the highest L1 block one of our transactions was mined
	// in: the chain has reached it, whether or not a look saw it.
	mined uint64
}

// firstCheck is how soon after the start every record is first read
// back.
const firstCheck = 10 * time.Second

// chainHead is the L1 chain's head and the blocks below it: what the
// head watch reads (an *ens.Client).
type chainHead interface {
	Head(ctx context.Context) (ens.Head, error)
	Block(ctx context.Context, number uint64) (ens.Head, error)
}

// nonceResyncer is a pointer writer whose nonce counters can be made to
// read the node's pending nonce again (after the chain went back, the
// counters are ahead of it).
type nonceResyncer interface{ ResyncNonces() }

// newPublisher publishes agents' pointers through w. every is each
// agent's pointer_interval; confirmPoll, for an agent whose record lives
// on another chain than L1, how soon a write is first confirmed through
// L1 (its chain's poll interval; later ones back off).
func newPublisher(w agent.PointerWriter, agents []*agent.Agent, every, confirmPoll map[string]time.Duration, checkEvery time.Duration,
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
		confirm:    map[string]*backoff.Backoff{},
		confirmAt:  map[string]time.Time{},
		confirmN:   map[string]int{},
		checkBo:    backoff.Backoff{Min: 2 * time.Second, Max: checkEvery},
	}
	p.probe, _ = w.(agent.Pointer)
	for _, a := range agents {
		alog := log.With("agent", a.ID())
		p.backoff[a.ID()] = &backoff.Backoff{Min: 2 * time.Second, Max: 10 * time.Minute, Log: alog}
		poll := max(confirmPoll[a.ID()], 10*time.Millisecond)
		p.confirm[a.ID()] = &backoff.Backoff{Min: poll, Max: min(max(50*poll, time.Second), time.Minute), Log: alog}
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
	// The first read-back comes soon after the start, once the agents
	// are ready: a daemon that starts does not know what the chain holds
	// now (it may have been restored older while it was stopped, which
	// the head watch cannot see).
	p.lastCheck = p.now().Add(min(firstCheck, p.checkEvery) - p.checkEvery)
	p.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-timer.C:
		}
		p.probeChain(ctx)
		p.watchHead(ctx)
		if at := p.nextCheck(); p.checkEvery > 0 && !p.now().Before(at) {
			p.checkAll(ctx)
		}
		next := p.publishDue(ctx, false)
		p.mu.Lock()
		if at := p.probeAt; !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
		if at := p.headAt; p.heads != nil && !p.unreachable && (next.IsZero() || at.Before(next)) {
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

// watchHead looks at the chain's head when due. A head lower than the
// last one seen, or a block at the last head's height with another hash,
// means the chain went back (a reorg, an older chain restored): every
// record is read back at once, and the nonce counters read the node's
// pending nonce again, so that the repair is not sent with nonces the
// chain is below. While the chain is unreachable the probe looks instead.
func (p *publisher) watchHead(ctx context.Context) {
	p.mu.Lock()
	due := p.heads != nil && !p.unreachable && !p.now().Before(p.headAt)
	prev, top := p.seen, max(p.seen.Number, p.mined)
	p.mu.Unlock()
	if !due {
		return
	}
	h, err := p.heads.Head(ctx)
	went := ""
	switch {
	case err != nil:
	case h.Number < top:
		went = fmt.Sprintf("the chain's head went back from block %d to block %d", top, h.Number)
	case prev.Hash == (common.Hash{}):
	case h.Number == prev.Number && h.Hash != prev.Hash:
		went = fmt.Sprintf("block %d was replaced (a reorg)", h.Number)
	case h.Number > prev.Number:
		// One more header, only when the head moved.
		if b, berr := p.heads.Block(ctx, prev.Number); berr == nil && b.Hash != prev.Hash {
			went = fmt.Sprintf("block %d was replaced (a reorg below the new head %d)", prev.Number, h.Number)
		}
	}
	p.mu.Lock()
	p.headAt = p.now().Add(p.headEvery)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Debug("chain head not read", "error", err)
			p.noteUnreachable(err)
		}
		p.mu.Unlock()
		return
	}
	p.seen = h
	if went != "" {
		// What our writes reached is gone with the rest.
		p.mined = min(p.mined, h.Number)
		p.lastCheck, p.checkAt = time.Time{}, time.Time{}
	}
	p.mu.Unlock()
	if went == "" {
		return
	}
	p.log.Warn(went+"; reading every pointer back now and the signer's nonce from the chain",
		"head", h.Number, "hash", h.Hash)
	p.resyncNonces()
	if p.metrics != nil {
		p.metrics.headRewinds.Inc()
	}
}

// resyncNonces makes the next transactions take their nonces from the
// chain (after it went back, the counters are ahead of it).
func (p *publisher) resyncNonces() {
	if r, ok := p.w.(nonceResyncer); ok {
		r.ResyncNonces()
	}
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
			// A pointer written where its record lives (an L2) is on
			// chain; that L1 does not show it yet is confirmed after
			// the next start.
			if pp, ok := a.Pending(); ok && !pp.AwaitingVisibility() {
				left = append(left, a.ID())
			}
		}
		if len(left) == 0 {
			for _, a := range p.agents {
				if pp, ok := a.Pending(); ok && pp.AwaitingVisibility() {
					p.log.Info("pointer written where the record lives, not yet visible from L1; confirmed after the next start",
						"agent", a.ID(), "blob", pp.Value, "tx", pp.Written.TxHash)
				}
			}
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

// dueAt is when agent id may write next; the caller holds p.mu. A
// pointer already written where its record lives and only waiting to be
// visible from L1 is due for its next confirmation instead, which writes
// nothing.
func (p *publisher) dueAt(id string, pp agent.PendingPointer) time.Time {
	if pp.AwaitingVisibility() {
		return p.confirmAt[id]
	}
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
			if pp, ok := a.Pending(); ok && (force || !p.dueAt(a.ID(), pp).After(now)) {
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
			if interrupted(ctx, r) {
				// Our own stop (or a second signal) cancelled the write:
				// not a failure of the chain, and no backoff. The
				// shutdown flush, or the next start, publishes it.
				p.log.Debug("pointer publish interrupted by the stop", "agent", r.Agent.ID(), "blob", r.Update.Value)
				continue
			}
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
		pp, ok := a.Pending()
		if !ok {
			continue
		}
		if at := p.dueAt(a.ID(), pp); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next, published
}

// interrupted reports whether r failed only because ctx, the
// publisher's own context, was cancelled.
func interrupted(ctx context.Context, r agent.PublishResult) bool {
	return r.Outcome == agent.OutcomeFailed && errors.Is(ctx.Err(), context.Canceled) && errors.Is(r.Err, context.Canceled)
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
	if r.Write.TxHash != "" && r.Write.GasUsed > 0 && p.metrics != nil {
		// Every mined transaction cost gas on its chain, published or
		// not yet visible from L1 (or reverted).
		p.metrics.gasUsed.WithLabelValues(id, chainLabel(r.Write.ChainID)).Add(float64(r.Write.GasUsed))
	}
	switch r.Outcome {
	case agent.OutcomePublished:
		p.mu.Lock()
		if r.Update.Target == "" && r.Write.Block > p.mined {
			p.mined = r.Write.Block // the head watch knows the chain got there
		}
		p.last[id] = p.now()
		delete(p.retryAt, id)
		delete(p.confirmAt, id)
		confirms := p.confirmN[id]
		delete(p.confirmN, id)
		recovered := p.chainDown
		p.chainDown, p.unreachable, p.probeAt = false, false, time.Time{}
		if recovered {
			p.lastCheck, p.checkAt = time.Time{}, time.Time{} // the chain is back: check every record soon
		}
		p.mu.Unlock()
		bo.Succeeded("pointer publishing recovered")
		p.confirm[id].Succeeded("pointer visible from L1 now")
		if r.Err != nil {
			log.Error("pointer published; the agent state is not saved yet (retried)", "error", r.Err)
		}
		switch {
		case r.Update.Target != "" && r.Write.Unchanged:
			// Written before; L1 resolution shows it now.
			log.Info("pointer published: visible from L1", "blob", r.Update.Value, "records", r.Update.Target, "chain_id", r.Write.ChainID,
				"confirmations", confirms+1, "pending_for", p.now().Sub(r.Since).Round(time.Millisecond))
		case r.Update.Target != "":
			log.Info("pointer published", "blob", r.Update.Value, "records", r.Update.Target, "chain_id", r.Write.ChainID,
				"tx", r.Write.TxHash, "batch", batch, "gas", r.Write.GasUsed, "visible_from_l1", true,
				"took", took.Round(time.Millisecond), "pending_for", p.now().Sub(r.Since).Round(time.Millisecond))
		default:
			log.Info("pointer published", "blob", r.Update.Value, "tx", r.Write.TxHash, "batch", batch,
				"gas", r.Write.GasUsed, "took", took.Round(time.Millisecond),
				"pending_for", p.now().Sub(r.Since).Round(time.Millisecond))
		}
		if p.metrics != nil {
			p.metrics.publishLast.WithLabelValues(id).Set(float64(p.now().Unix()))
			p.metrics.stageDuration.WithLabelValues(id, "publish").Observe(took.Seconds())
		}
	case agent.OutcomeLagging, agent.OutcomeNotVisible:
		// Written where the record lives; L1 resolution does not show it
		// yet. Confirmed again (never written again) on a backoff of its
		// own; pointer_interval counts from the write.
		p.mu.Lock()
		if r.Write.TxHash != "" {
			p.last[id] = p.now()
		}
		delete(p.retryAt, id)
		cb := p.confirm[id]
		p.confirmN[id]++
		wait := cb.Wait(p.confirmN[id])
		p.mu.Unlock()
		if r.Outcome == agent.OutcomeNotVisible {
			cb.Failed("pointer not visible from L1; it stays pending and is confirmed again", r.Err)
			if p.metrics != nil {
				p.metrics.failures.WithLabelValues(id, "visibility").Inc()
			}
		} else {
			if r.Write.TxHash != "" {
				log.Info("pointer written where the record lives; not yet visible from L1, waiting for it",
					"blob", r.Update.Value, "records", r.Update.Target, "chain_id", r.Write.ChainID, "tx", r.Write.TxHash,
					"block", r.Write.Block, "gas", r.Write.GasUsed, "l1_shows", r.Write.Seen)
			}
		}
		p.mu.Lock()
		p.confirmAt[id] = p.now().Add(wait)
		p.mu.Unlock()
	case agent.OutcomeRollback:
		log.Warn("the pointer went back to an older snapshot of this agent; publishing the newest again", "reason", r.Err)
		// The chain that went back may be below our nonces too.
		p.resyncNonces()
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
		if r.Update.Target == "" {
			// The L1 chain; a records target's chain recovers on the
			// agent's own backoff.
			p.chainDown = true
			p.noteUnreachable(r.Err)
		}
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
			p.resyncNonces()
			p.Notify()
		case agent.OutcomeHeld:
			if !held {
				log.Error("pointer publishing held until an operator decides", "reason", err)
			}
		case agent.OutcomeLagging:
			log.Debug("pointer written where the record lives, not yet visible from L1")
		case agent.OutcomeNotVisible:
			log.Debug("pointer check: not visible from L1", "error", err)
			if p.metrics != nil {
				p.metrics.failures.WithLabelValues(a.ID(), "visibility").Inc()
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

// chainLabel is a chain id as a metric label ("" when unknown).
func chainLabel(id uint64) string {
	if id == 0 {
		return ""
	}
	return strconv.FormatUint(id, 10)
}
