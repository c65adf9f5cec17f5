package pointer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/backoff"
	"github.com/hermesd/hermesd/internal/ens"
)

// probeInterval is how often an unreachable L1 chain is probed.
const probeInterval = 2 * time.Second

// checkAll reads every published pointer of the lane back and repairs
// rollbacks.
func (l *lane) checkAll(ctx context.Context) {
	l.mu.Lock()
	l.lastCheck = l.now()
	l.mu.Unlock()
	failed := false
	for _, h := range l.list() {
		if ctx.Err() != nil {
			return
		}
		if !h.ready() || h.cfg.Name == "" {
			continue
		}
		if l.checkOne(ctx, h) == Failed {
			failed = true
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if failed {
		// Read again sooner than the interval: a record that could not
		// be read is not known to be right.
		l.checkAt = l.now().Add(l.checkRetry.Failed("", nil))
		return
	}
	l.checkRetry = backoff.Backoff{Min: l.checkRetry.Min, Max: l.checkRetry.Max, Now: l.checkRetry.Now}
	l.checkAt = time.Time{}
}

// checkOne reads h's record back and logs what it found.
func (l *lane) checkOne(ctx context.Context, h *Head) Outcome {
	held := h.Hold() != nil
	out, err := h.Check(ctx)
	log := h.log.With("name", h.cfg.Name)
	switch out {
	case Rollback:
		log.Warn("the pointer went back to an older snapshot of this agent; the newest is published again", "reason", err)
		l.pub.resyncNonces()
		l.notify()
	case Held:
		if !held {
			log.Error("pointer publishing held until an operator decides", "reason", err)
		}
	case Lagging:
		log.Debug("pointer written where the record lives, not yet visible from L1")
	case NotVisible:
		log.Debug("pointer check: not visible from L1", "error", err)
		l.pub.cfg.Observer.Failed(h.cfg.Agent, "visibility")
	case Failed:
		log.Debug("pointer check failed", "error", err)
		l.mu.Lock()
		l.chainDown = true
		l.noteUnreachable(err)
		l.mu.Unlock()
	}
	l.pub.cfg.Observer.Checked(h.cfg.Agent, out)
	return out
}

// watches reports whether this lane watches the L1 chain's head.
func (l *lane) watches() bool { return l.target == "" && l.pub.cfg.Blocks != nil }

// probeChain reads one record while the L1 chain is unreachable; when it
// answers, the pointers waiting for their backoff are due at once and the
// records are read back soon (a chain that comes back may come back
// rolled back).
func (l *lane) probeChain(ctx context.Context) {
	probe := l.pub.cfg.Probe
	l.mu.Lock()
	due := l.unreachable && probe != nil && !l.now().Before(l.probeAt)
	l.mu.Unlock()
	if !due {
		return
	}
	var name string
	for _, h := range l.list() {
		if h.cfg.Name != "" {
			name = h.cfg.Name
			break
		}
	}
	_, _, err := probe.Read(ctx, name)
	l.mu.Lock()
	defer l.mu.Unlock()
	if (err != nil && errors.Is(err, ens.ErrUnavailable)) || ctx.Err() != nil {
		// Jittered, so many daemons sharing a node do not probe in
		// lockstep.
		l.probeAt = l.now().Add(probeInterval*4/5 + rand.N(probeInterval*2/5))
		return
	}
	l.pub.log.Info("the chain answers again; publishing pending pointers now")
	l.unreachable, l.probeAt = false, time.Time{}
	l.hmu.Lock()
	for _, pc := range l.pace {
		pc.retryAt = time.Time{}
	}
	l.hmu.Unlock()
	l.lastCheck, l.checkAt = time.Time{}, time.Time{}
}

// watchHead looks at the L1 chain's head when due. A head lower than the
// last one seen, or a block at the last head's height with another hash,
// means the chain went back (a reorg, an older chain restored): every
// record is read back at once, and the nonce counters read the node's
// pending nonce again, so that the repair is not sent with nonces the
// chain is below. While the chain is unreachable the probe looks instead.
func (l *lane) watchHead(ctx context.Context) {
	l.mu.Lock()
	due := l.watches() && !l.unreachable && !l.now().Before(l.headAt)
	prev, top := l.seen, max(l.seen.Number, l.mined)
	l.mu.Unlock()
	if !due {
		return
	}
	h, err := l.pub.cfg.Blocks.Head(ctx)
	went := ""
	if err == nil {
		went = l.wentBack(ctx, prev, top, h)
	}
	l.mu.Lock()
	l.headAt = l.now().Add(l.pub.cfg.HeadEvery)
	if err != nil {
		if ctx.Err() == nil {
			l.pub.log.Debug("chain head not read", "error", err)
			l.noteUnreachable(err)
		}
		l.mu.Unlock()
		return
	}
	l.seen = h
	if went != "" {
		// What our writes reached is gone with the rest.
		l.mined = min(l.mined, h.Number)
	}
	l.mu.Unlock()
	if went == "" {
		return
	}
	l.pub.log.Warn(went+"; reading every pointer back now and the signer's nonce from the chain",
		"head", h.Number, "hash", h.Hash)
	l.pub.recheck()
	l.pub.resyncNonces()
	l.pub.cfg.Observer.Rewound()
}

// wentBack says how the chain went back between prev (top: the highest
// block known reached) and h, or "" when it did not.
func (l *lane) wentBack(ctx context.Context, prev ens.Head, top uint64, h ens.Head) string {
	switch {
	case h.Number < top:
		return fmt.Sprintf("the chain's head went back from block %d to block %d", top, h.Number)
	case prev.Hash == (common.Hash{}):
	case h.Number == prev.Number && h.Hash != prev.Hash:
		return fmt.Sprintf("block %d was replaced (a reorg)", h.Number)
	case h.Number > prev.Number:
		// One more header, only when the head moved.
		if b, err := l.pub.cfg.Blocks.Block(ctx, prev.Number); err == nil && b.Hash != prev.Hash {
			return fmt.Sprintf("block %d was replaced (a reorg below the new head %d)", prev.Number, h.Number)
		}
	}
	return ""
}
