package pointer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/state"
)

// Outcome of publishing, confirming or checking one agent's pointer. The
// strings are metric labels and log values.
type Outcome string

const (
	Published    Outcome = "published"    // the record names the newest snapshot
	Rollback     Outcome = "rollback"     // the record named an older snapshot of ours; pending again
	Held         Outcome = "held"         // another writer: held until an operator decides
	Unauthorized Outcome = "unauthorized" // the signer may not write the name: held
	Failed       Outcome = "failed"       // retry later
	OK           Outcome = "ok"           // Check: nothing to do
	// Lagging: written where the record lives (an L2), not yet visible
	// through L1 resolution, within the visibility timeout: wait.
	Lagging Outcome = "lagging"
	// NotVisible: as Lagging, past the visibility timeout: an error that
	// keeps the pointer pending (never a hold).
	NotVisible Outcome = "not_visible"
	// Misrouted: the name resolves from another place than the agent's
	// configured records (the record was moved); nothing is written.
	Misrouted Outcome = "misrouted"
	// Transferred: the name belongs to another owner now; the agent is
	// no longer snapshotted or published here (final).
	Transferred Outcome = "transferred"
)

// Verified makes s the agent's last verified snapshot (the state
// directory's head) and, for an agent with a name, the pointer pending
// publication: pending → pending with the newer value, written → pending
// over the written value (docs/design.md §7.3). The publisher is woken
// even if the save failed: the state is kept in memory and saved again.
func (h *Head) Verified(s state.Snapshot) error {
	err := h.update(func(st *state.AgentState) bool {
		st.Last = &s
		if h.cfg.Name == "" {
			return true
		}
		switch p := st.Pending; {
		case p == nil:
			st.Pending = &state.Pointer{Expected: st.Published, Since: s.CreatedAt, Target: h.cfg.Target}
		case p.Written != nil:
			// The target holds the value written there (not visible from
			// L1 yet): the new snapshot replaces it.
			p.Expected, p.Written = p.Written.Value, nil
		}
		// The newest snapshot wins; Since keeps the age of the oldest
		// unpublished change.
		st.Pending.Value = s.BlobID
		st.Pending.TxHash, st.Pending.LastErr = "", ""
		return true
	})
	// The fleet head next: the snapshot's recovery point for the next
	// owner. A failed write is retried (SyncFleet, by the publisher and
	// before a hand-off); the record does not wait for it.
	if h.deps.Fleet != nil {
		ctx, cancel := context.WithTimeout(context.Background(), fleetWriteTimeout)
		h.SyncFleet(ctx)
		cancel()
	}
	if h.cfg.Name != "" || h.FleetPending() {
		h.notify()
	}
	return err
}

// fleetWriteTimeout bounds the fleet head's write in Verified (the fleet
// bounds each of its requests by its fence's margin too).
const fleetWriteTimeout = 30 * time.Second

// Restored makes s, a snapshot restored into the brain, the agent's last;
// record, when not empty, is the record's value it was restored from,
// verbatim (a record written before heads carried their digest names
// the head by its id alone): published, with nothing pending or held.
func (h *Head) Restored(s state.Snapshot, record string) error {
	return h.update(func(st *state.AgentState) bool {
		st.Last = &s
		if record != "" {
			st.Published, st.PublishedAt = record, h.deps.Now()
			st.Pending, st.Hold = nil, nil
		}
		return true
	})
}

// CatchUp takes over a snapshot whose state save was lost (a crash after
// the brain's lock recorded it): it becomes the last, and pending when the
// lost save was the one that would have made it so. It reports whether it
// did.
func (h *Head) CatchUp() (bool, error) {
	caught := false
	err := h.update(func(st *state.AgentState) bool {
		caught = h.catchUpIn(st)
		return caught
	})
	return caught, err
}

// catchUpIn moves st's last snapshot forward to the newest one the brain's
// lock records, when st's is an older entry of the same lineage (or st
// knows none).
func (h *Head) catchUpIn(st *state.AgentState) bool {
	if h.lineage == nil {
		return false
	}
	e, ok := h.lineage.Newest()
	if !ok {
		return false
	}
	if l := st.Last; l != nil && (l.BlobID == e.BlobID || !h.lineage.Knows(l.BlobID)) {
		return false
	}
	h.log.Warn("the agent state missed a snapshot the brain's lock records; catching up", "blob", e.BlobID, "bundle_hash", e.BundleHash)
	st.Last = &e
	switch p := st.Pending; {
	case p != nil && p.Value != e.BlobID:
		p.Value, p.Attempts, p.LastErr = e.BlobID, 0, ""
	case p == nil && h.cfg.Name != "" && e.BlobID != st.Published && (st.Published != "" || !st.PublishedAt.IsZero()):
		// The lost save was the one that would have made this snapshot
		// pending: without it the record would stay on the older one
		// until the brain changed again. (With nothing known of the
		// record, Reconcile's read decides.)
		st.Pending = &state.Pointer{Value: e.BlobID, Expected: st.Published, Since: e.CreatedAt, Target: h.cfg.Target}
	}
	return true
}

// Reconcile learns what the chain says when the state does not know (a
// first start, a wiped state directory) through Check, and wakes the
// publisher when a pointer is pending: its first round may have run
// before a catch-up made one pending.
func (h *Head) Reconcile(ctx context.Context) error {
	defer func() {
		if _, ok := h.Pending(); ok {
			h.notify()
		}
	}()
	if h.cfg.Name == "" || h.deps.Reader == nil {
		return nil
	}
	known := false
	h.view(func(st *state.AgentState) { known = st.Published != "" || !st.PublishedAt.IsZero() })
	if known {
		return nil
	}
	_, err := h.Check(ctx)
	return err
}

// MarkTransferred records that the agent now belongs to another owner: no
// more snapshots or pointer writes for it here, for good (a restart keeps
// it). head is the snapshot handed over ("" when not known).
func (h *Head) MarkTransferred(head, reason string) error {
	return h.update(func(st *state.AgentState) bool { return h.transferIn(st, head, reason) })
}

func (h *Head) transferIn(st *state.AgentState, head, reason string) bool {
	if st.Transferred != nil {
		return false
	}
	st.Transferred = &state.Transferred{Head: head, At: h.deps.Now(), Reason: reason}
	st.Pending, st.Hold = nil, nil
	h.log.Warn("agent transferred to another owner: no more snapshots or pointer writes for it here; remove it from the configuration", "reason", reason)
	return true
}

// ownerMoved is asked when the signer may not write the name or the
// record names a snapshot not of this agent: when the registry says the
// name has another owner now, the agent was transferred and is marked so
// (true). A failure to read the owner leaves things as they are.
func (h *Head) ownerMoved(ctx context.Context) bool {
	if h.deps.Owners == nil || h.cfg.Self == (common.Address{}) || h.cfg.Name == "" {
		return false
	}
	owner, err := h.deps.Owners.Owner(ctx, h.cfg.Name)
	if err != nil || owner == h.cfg.Self {
		return false
	}
	h.MarkTransferred("", fmt.Sprintf("%s is owned by %s now, not by this operator (%s)", h.cfg.Name, owner.Hex(), h.cfg.Self.Hex()))
	return true
}

// holdIn holds publishing at value for reason (kept if it holds already
// at that value).
func (h *Head) holdIn(st *state.AgentState, value, reason string) {
	if st.Hold == nil || st.Hold.Value != value {
		st.Hold = &state.Hold{Value: value, Reason: reason, Since: h.deps.Now()}
	}
}

// foreignReason is the hold's reason for a value not of the lineage.
func (h *Head) foreignReason(v string) string {
	return fmt.Sprintf("%s names %s, which is not a snapshot of this agent: another writer? "+
		"resolve with 'hermesd pointer adopt %s' (take its snapshot, set the local brain aside) or "+
		"'hermesd pointer override %s' (publish ours)", h.cfg.Name, v, h.cfg.Agent, h.cfg.Agent)
}

// ErrNotHeld means there is no hold to resolve.
var ErrNotHeld = errors.New("publishing is not held")

// Override resolves a hold by publishing ours: the newest verified
// snapshot becomes pending over whatever the record holds now where it
// lives.
func (h *Head) Override(ctx context.Context) error {
	var theirs string // what the record holds where it lives
	if r := h.atTarget(); r != nil && h.cfg.Name != "" {
		v, ok, err := r.Read(ctx, h.cfg.Name)
		if err != nil {
			return fmt.Errorf("read ENS pointer of %s: %w", h.cfg.Name, err)
		}
		if ok {
			theirs = v
		}
	}
	var verr error
	err := h.update(func(st *state.AgentState) bool {
		switch {
		case st.Hold == nil:
			verr = ErrNotHeld
			return false
		case st.Last == nil:
			verr = errors.New("no verified snapshot to publish yet")
			return false
		}
		st.Hold = nil
		st.Published = theirs
		if st.Pending == nil || st.Pending.Value != st.Last.BlobID {
			st.Pending = &state.Pointer{Value: st.Last.BlobID, Since: h.deps.Now(), Target: h.cfg.Target}
		}
		st.Pending.Expected = theirs
		h.log.Warn("publishing resumed: ours overrides the other writer's snapshot", "name", h.cfg.Name,
			"replacing", theirs, "with", st.Last.BlobID)
		return true
	})
	if verr != nil {
		return verr
	}
	h.notify()
	return err
}

// ReadAtTarget reads the record where it lives (what adopt restores).
func (h *Head) ReadAtTarget(ctx context.Context) (string, bool, error) {
	r := h.atTarget()
	if r == nil || h.cfg.Name == "" {
		return "", false, errors.New("the agent has no ENS name")
	}
	v, ok, err := r.Read(ctx, h.cfg.Name)
	if err != nil {
		return "", false, fmt.Errorf("read ENS pointer of %s: %w", h.cfg.Name, err)
	}
	return v, ok, nil
}
