package pointer

import (
	"context"
	"errors"
	"fmt"
)

// Router says where a name's record lives as L1 resolution reaches it
// now: which target's L1 resolver answers the name (compose maps the
// resolver to an ens.records entry by its l1_resolver).
type Router interface {
	// Route is the target L1 resolution of name reaches ("" = a resolver
	// on L1 itself), for a head whose record is configured at configured;
	// known is false when it cannot tell (a target without an
	// l1_resolver might be the one).
	Route(ctx context.Context, name, configured string) (target string, known bool, err error)
}

// ErrMisrouted: the name resolves from another place than the agent's
// configured target (the record was moved, `hermesd pointer move`, and
// the configuration's records: not changed): nothing is written where
// the record no longer lives.
var ErrMisrouted = errors.New("the name resolves from another place than its configured records")

// routed checks, before the head's record is written, that L1 resolution
// reaches the name through its configured target; a read-back
// (Check) makes the next write check again. A name that resolves from
// elsewhere is ErrMisrouted, kept for status (Misrouted) until a check
// finds the route agrees. A route that cannot be read or told is no
// misroute: the write goes ahead as configured.
func (h *Head) routed(ctx context.Context) error {
	if h.deps.Router == nil || h.cfg.Name == "" {
		return nil
	}
	h.mu.Lock()
	ok := h.routeOK
	h.mu.Unlock()
	if ok {
		return nil
	}
	target, known, err := h.deps.Router.Route(ctx, h.cfg.Name, h.cfg.Target)
	if err != nil {
		// Not known: the write goes ahead (it needs the chain as much),
		// and the next one checks again.
		h.log.Debug("could not find where the name resolves from; writing as configured", "name", h.cfg.Name, "error", err)
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if known && target != h.cfg.Target {
		h.misroute = fmt.Sprintf("%s resolves through the L1 resolver of %s, but its configuration writes it at %s: "+
			"set the agent's records: %s (and restart), or move the record back with 'hermesd pointer move %s --to %s'; nothing is written until then",
			h.cfg.Name, targetName(target), targetName(h.cfg.Target), recordsID(target), h.cfg.Name, recordsID(h.cfg.Target))
		return fmt.Errorf("%w: %s", ErrMisrouted, h.misroute)
	}
	h.routeOK, h.misroute = true, ""
	return nil
}

// recheckRoute makes the next write check the route again.
func (h *Head) recheckRoute() {
	h.mu.Lock()
	h.routeOK = false
	h.mu.Unlock()
}

// Misrouted says, when the last route check found the name resolving
// from another place than its configured target, what to do ("" when
// not).
func (h *Head) Misrouted() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.misroute
}

// recordsID is a target as the records: setting names it.
func recordsID(target string) string {
	if target == "" {
		return "l1"
	}
	return target
}
