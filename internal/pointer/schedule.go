package pointer

import (
	"errors"
	"time"

	"github.com/hermesd/hermesd/internal/ens"
)

// schedule logs one head's result and sets its next attempt; it reports a
// rollback, which the caller publishes again at once. took is the round's
// duration.
func (l *lane) schedule(r Result, took time.Duration) (again bool) {
	h := r.Head
	log := h.log.With("name", h.cfg.Name)
	pc := l.paceOf(h)
	if pc == nil {
		return false // the head left the lane while it was written
	}
	obs := l.pub.cfg.Observer
	switch r.Outcome {
	case Published:
		l.published(r, took)
	case Lagging, NotVisible:
		l.lagging(r)
	case Rollback:
		log.Warn("the pointer went back to an older snapshot of this agent; publishing the newest again", "reason", r.Err)
		// The chain that went back may be below our nonces too.
		l.pub.resyncNonces()
		again = true
	case Transferred:
		// Final, and logged once by the head: no retries, no backoff.
	case Misrouted:
		// Not the chain's failure: the route is checked again on the
		// head's backoff, and a move back (or a restart with records:
		// set) ends it.
		wait := pc.retry.Failed("pointer not written: its name resolves from elsewhere than its records", r.Err)
		pc.retryAt = l.now().Add(wait)
		obs.Failed(h.cfg.Agent, "publish")
	case Held, Unauthorized:
		log.Error("pointer publishing held until an operator decides", "reason", r.Err)
		pc.held = true
	default:
		wait := pc.retry.Failed("pointer publish failed; will retry", r.Err)
		pc.retryAt = l.now().Add(wait)
		if l.target == "" {
			// The L1 chain; a records target's chain recovers on each
			// head's own backoff.
			l.mu.Lock()
			l.chainDown = true
			l.noteUnreachable(r.Err)
			l.mu.Unlock()
		}
		obs.Failed(h.cfg.Agent, "publish")
	}
	obs.Outcome(h.cfg.Agent, r.Outcome)
	return again
}

// published schedules and logs a head whose record names its newest
// snapshot now.
func (l *lane) published(r Result, took time.Duration) {
	h, pc := r.Head, l.paceOf(r.Head)
	log := h.log.With("name", h.cfg.Name)
	now := l.now()
	l.mu.Lock()
	if l.target == "" && r.Write.Tx.Block > l.mined {
		l.mined = r.Write.Tx.Block // the head watch knows the chain got there
	}
	recovered := l.chainDown
	l.chainDown, l.unreachable, l.probeAt = false, false, time.Time{}
	if recovered {
		l.lastCheck, l.checkAt = time.Time{}, time.Time{} // the chain is back: check every record soon
	}
	l.mu.Unlock()
	pc.last, pc.retryAt, pc.confirmAt = now, time.Time{}, time.Time{}
	pc.retry.Succeeded("pointer publishing recovered")
	pc.confirm.Succeeded("pointer visible from L1 now")
	if r.Err != nil {
		log.Error("pointer published; the agent state is not saved yet (retried)", "error", r.Err)
	}
	pending := now.Sub(r.Since).Round(time.Millisecond)
	w := r.Write
	switch {
	case l.target != "" && w.Tx.Hash == "":
		// Written before; L1 resolution shows it now.
		log.Info("pointer published: visible from L1", "blob", r.Update.Value, "records", l.target, "chain_id", w.Tx.ChainID,
			"confirmations", r.Reads+1, "pending_for", pending)
	case l.target != "":
		log.Info("pointer published", "blob", r.Update.Value, "records", l.target, "chain_id", w.Tx.ChainID,
			"tx", w.Tx.Hash, "batch", w.Tx.Batch, "gas", w.Tx.Gas, "visible_from_l1", true,
			"took", took.Round(time.Millisecond), "pending_for", pending)
	default:
		log.Info("pointer published", "blob", r.Update.Value, "tx", w.Tx.Hash, "batch", w.Tx.Batch,
			"gas", w.Tx.Gas, "took", took.Round(time.Millisecond), "pending_for", pending)
	}
	l.pub.cfg.Observer.Published(h.cfg.Agent, took)
}

// lagging schedules the next confirmation of a value written off L1 that
// L1 resolution does not show yet: read again (never written again) on a
// backoff of its own; pointer_interval counts from the write.
func (l *lane) lagging(r Result) {
	h, pc := r.Head, l.paceOf(r.Head)
	if r.Write.Tx.Hash != "" {
		pc.last = l.now()
	}
	pc.retryAt = time.Time{}
	wait := pc.confirm.Wait(max(r.Reads, 1))
	if r.Outcome == NotVisible {
		pc.confirm.Failed("pointer not visible from L1; it stays pending and is confirmed again", r.Err)
		l.pub.cfg.Observer.Failed(h.cfg.Agent, "visibility")
	} else if w := r.Write; w.Tx.Hash != "" {
		h.log.Info("pointer written where the record lives; not yet visible from L1, waiting for it", "name", h.cfg.Name,
			"blob", r.Update.Value, "records", l.target, "chain_id", w.Tx.ChainID, "tx", w.Tx.Hash,
			"block", w.Tx.Block, "gas", w.Tx.Gas, "l1_shows", r.Seen)
	}
	pc.confirmAt = l.now().Add(wait)
}

// noteUnreachable starts the probe when err says the chain does not
// answer; the caller holds l.mu.
func (l *lane) noteUnreachable(err error) {
	if errors.Is(err, ens.ErrUnavailable) && !l.unreachable {
		l.unreachable = true
		l.probeAt = l.now().Add(probeInterval)
	}
}
