package pointer

import (
	"context"
	"sync"
	"time"

	"github.com/hermesd/hermesd/internal/state"
)

// FleetHead is the fleet's copy of an agent's head (docs/design.md §12):
// the third place a head lives in, beside the state directory and the
// ENS record, when the agent runs in a fleet.
type FleetHead struct {
	// Value names the snapshot as the record would.
	Value      string
	BundleHash string
	Version    int64
	CreatedAt  time.Time
	// Published is what the record was last known to hold.
	Published string
}

// Fleet keeps agents' fleet heads (etcd). PutHead succeeds only while
// this node owns the agent and is not fenced.
type Fleet interface {
	PutHead(ctx context.Context, agent string, h FleetHead) error
}

// fleetPlace is the head's fleet place: what it last wrote there.
type fleetPlace struct {
	// write is held across a write's choice of value and its put: the
	// snapshot loop (Verified) and the publisher (a record moved, a
	// retry) both write, and two puts in flight together could land in
	// either order, the older last — a fleet head rolled back, which a
	// new owner would restore from.
	write   sync.Mutex
	mu      sync.Mutex
	written string // the value the fleet head names, as far as this head knows
	// published is what the fleet head says the record holds: it is
	// written again when the record moves, so that a new owner can tell
	// that the head descends from the record without a walk.
	published string
	err       error // the last write's failure (nil: none, or none due)
}

// fleetDue reports the snapshot the fleet head should name and whether
// it does not yet.
func (h *Head) fleetDue() (FleetHead, bool) {
	var fh FleetHead
	due := false
	h.view(func(st *state.AgentState) {
		if st.Last == nil || st.Transferred != nil {
			return
		}
		fh = FleetHead{Value: st.Last.BlobID, BundleHash: st.Last.BundleHash, Version: st.Last.Version,
			CreatedAt: st.Last.CreatedAt, Published: st.Published}
		h.fleet.mu.Lock()
		due = h.fleet.written != fh.Value || h.fleet.published != fh.Published
		h.fleet.mu.Unlock()
	})
	return fh, due
}

// SyncFleet writes the fleet head when it does not name the agent's last
// verified snapshot (a write that failed, or a new owner whose head
// differs) or what the record holds now. Without a fleet it does
// nothing.
func (h *Head) SyncFleet(ctx context.Context) error {
	if h.deps.Fleet == nil {
		return nil
	}
	h.fleet.write.Lock()
	defer h.fleet.write.Unlock()
	fh, due := h.fleetDue()
	if !due {
		return nil
	}
	err := h.deps.Fleet.PutHead(ctx, h.cfg.Agent, fh)
	h.fleet.mu.Lock()
	if err == nil {
		h.fleet.written, h.fleet.published = fh.Value, fh.Published
	}
	prev := h.fleet.err
	h.fleet.err = err
	h.fleet.mu.Unlock()
	switch {
	case err != nil && prev == nil:
		h.log.Warn("fleet head not written; retried", "blob", fh.Value, "error", err)
	case err == nil && prev != nil:
		h.log.Info("fleet head written again", "blob", fh.Value)
	}
	return err
}

// FleetPending reports whether the fleet head does not name the agent's
// last verified snapshot (false without a fleet).
func (h *Head) FleetPending() bool {
	if h.deps.Fleet == nil {
		return false
	}
	_, due := h.fleetDue()
	return due
}

// TookOver makes s, the snapshot a new owner of the agent in a fleet
// brought its brain to, the agent's last; record is what the ENS record
// holds ("" for none) and fleet the fleet head found (nil: none). The
// record is published as far as this head knows; when it names another
// snapshot, s is pending over it. A hold is lifted (s is the agent's own,
// from its fleet); a transfer stays. The fleet head is due unless it
// names s.
func (h *Head) TookOver(s state.Snapshot, record string, fleet *FleetHead) error {
	h.fleet.mu.Lock()
	h.fleet.written, h.fleet.published, h.fleet.err = "", "", nil
	if fleet != nil {
		h.fleet.written, h.fleet.published = fleet.Value, fleet.Published
	}
	h.fleet.mu.Unlock()
	err := h.update(func(st *state.AgentState) bool {
		if st.Transferred != nil {
			return false
		}
		st.Last = &s
		st.Published, st.PublishedAt, st.Hold, st.Pending = record, h.deps.Now(), nil, nil
		if h.cfg.Name != "" && record != s.BlobID {
			st.Pending = &state.Pointer{Value: s.BlobID, Expected: record, Since: h.deps.Now(), Target: h.cfg.Target}
		}
		return true
	})
	h.notify()
	return err
}

// gate says whether the head may write its places now (nil: it may).
func (h *Head) gate() error {
	if h.deps.Gate == nil {
		return nil
	}
	return h.deps.Gate()
}
