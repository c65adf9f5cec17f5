package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/pointer"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
)

// SourceFleetHead: a take-over restored the agent's fleet head.
const SourceFleetHead = "fleet head"

// TakeOverPlan is where a new owner of the agent in a fleet brings its
// brain from (docs/design.md §12.3).
type TakeOverPlan struct {
	// Blob is the snapshot to bring the brain to ("" when none exists:
	// the brain starts as Prepare finds it).
	Blob   string
	Source string
	// Record is what the ENS record holds ("" none, or no name).
	Record string
	// Fleet is the fleet head found (nil: none).
	Fleet *pointer.FleetHead
	// Why says why the source was chosen, for the log.
	Why string
}

// PlanTakeOver chooses what a new owner restores: the fleet head when it
// descends from the record (the record names it, or its writer knew the
// record to hold what it holds: a head this fleet wrote after the
// record's), else the record — a fleet head that does not descend from
// the record (an operator's or a transfer's write) is never a rollback of
// it.
func PlanTakeOver(fleet *pointer.FleetHead, record string, hasName bool) TakeOverPlan {
	p := TakeOverPlan{Record: record, Fleet: fleet}
	switch {
	case fleet == nil && record == "":
		p.Why = "no fleet head and no record"
	case fleet == nil:
		p.Blob, p.Source, p.Why = record, SourceENS, "no fleet head"
	case !hasName || record == "":
		p.Blob, p.Source, p.Why = fleet.Value, SourceFleetHead, "no record"
	case fleet.Value == record:
		p.Blob, p.Source, p.Why = fleet.Value, SourceFleetHead, "the record names the fleet head"
	case fleet.Published == record:
		p.Blob, p.Source, p.Why = fleet.Value, SourceFleetHead, "the fleet head descends from the record"
	default:
		p.Blob, p.Source = record, SourceENS
		p.Why = fmt.Sprintf("the fleet head %s does not descend from the record (its writer knew %q)", fleet.Value, fleet.Published)
	}
	return p
}

// maxDescent bounds the walk from a fleet head back to the record: a
// fleet head more snapshots ahead of the record than that is not taken
// for its descendant (the record is restored, with a warning).
const maxDescent = 64

// historian walks a snapshot's lineage (snapshot.Pipeline).
type historian interface {
	History(ctx context.Context, head string, limit int) ([]snapshot.HistoryEntry, error)
}

// CheckDescent settles a plan that restores the record over a fleet
// head whose writer did not know the record to hold what it holds (the
// record moved after the head was last written: a publication finishing
// as a hand-off ended): when the record is the fleet head or one of its
// ancestors within maxDescent snapshots, the fleet head descends from it
// and is restored instead. A walk that fails is an error (retried), never
// a reason to restore the older record.
func (a *Agent) CheckDescent(ctx context.Context, p TakeOverPlan) (TakeOverPlan, error) {
	if p.Source != SourceENS || p.Fleet == nil || p.Record == "" {
		return p, nil
	}
	h, ok := a.deps.Pipeline.(historian)
	if !ok {
		return p, nil
	}
	hist, err := h.History(ctx, p.Fleet.Value, maxDescent)
	if err != nil {
		return p, fmt.Errorf("walk the fleet head's lineage back to the record: %w", err)
	}
	for _, e := range hist {
		if headref.Same(e.BlobID, p.Record) {
			p.Blob, p.Source = p.Fleet.Value, SourceFleetHead
			p.Why = fmt.Sprintf("the record is the fleet head's ancestor (%d back)", e.N)
			return p, nil
		}
	}
	return p, nil
}

// ReadRecord reads what the agent's record holds where it lives ("" for
// none, or an agent without a name).
func (a *Agent) ReadRecord(ctx context.Context) (string, error) {
	if a.cfg.ENSName == "" {
		return "", nil
	}
	v, ok, err := a.head.ReadAtTarget(ctx)
	if err != nil || !ok {
		return "", err
	}
	return v, nil
}

// TakeOver brings the brain to p.Blob for a new owner in a fleet, before
// Prepare: a brain that already is that snapshot (the agent's last here)
// stays; any other is replaced — set aside when it holds what no
// snapshot stored, removed when it is exactly its last stored snapshot —
// and p.Blob restored and verified in its place (a fleet head's bundle
// hash must match too). The head then takes the snapshot over
// (pointer.Head.TookOver): pending over the record when the record names
// another. A restore that fails puts the brain back.
func (a *Agent) TakeOver(ctx context.Context, p TakeOverPlan) error {
	a.syncMu.Lock()
	defer a.syncMu.Unlock()
	if a.Transferred() != nil || p.Blob == "" {
		return nil
	}
	a.mu.Lock()
	var last *state.Snapshot
	if a.st.Last != nil {
		l := *a.st.Last
		last = &l
	}
	a.mu.Unlock()
	has, err := snapshot.HasFiles(a.cfg.BrainDir)
	if err != nil {
		return err
	}
	if has && last != nil && last.BlobID == p.Blob {
		a.log.Info("the brain already is the snapshot to take over", "blob", p.Blob, "from", p.Source)
		return a.head.TookOver(*last, p.Record, p.Fleet)
	}
	aside := ""
	if _, err := os.Lstat(a.cfg.BrainDir); err == nil {
		if has && !a.brainIsStored(ctx, last) {
			if aside, err = a.setAside(); err != nil {
				return err
			}
		} else if err := os.RemoveAll(a.cfg.BrainDir); err != nil {
			return fmt.Errorf("remove the stale brain: %w", err)
		}
	}
	a.setPhase(PhaseRestoring, "")
	a.log.Info("taking the agent over; restoring", "blob", p.Blob, "from", p.Source, "why", p.Why)
	r, err := a.deps.Pipeline.RestoreWith(ctx, p.Blob, a.cfg.BrainDir, snapshot.RestoreOptions{PublicRoot: a.cfg.AllowUnsafeDirs})
	if err == nil && p.Source == SourceFleetHead && p.Fleet.BundleHash != "" && r.BundleHash.String() != p.Fleet.BundleHash {
		err = fmt.Errorf("%w: the fleet head says bundle hash %s, the snapshot restored %s", snapshot.ErrHashMismatch, p.Fleet.BundleHash, r.BundleHash)
	}
	if err != nil {
		a.deps.Observer.Restore(a.cfg.ID, "failed", nil)
		os.RemoveAll(a.cfg.BrainDir)
		if aside != "" {
			if perr := os.Rename(aside, a.cfg.BrainDir); perr != nil {
				return errors.Join(fmt.Errorf("%w: blob %s (from %s): %w", ErrRestoreFailed, p.Blob, p.Source, err),
					fmt.Errorf("CANNOT PUT THE BRAIN BACK; it is at %s: %w", aside, perr))
			}
		}
		return fmt.Errorf("%w: blob %s (from %s): %w", ErrRestoreFailed, p.Blob, p.Source, err)
	}
	a.noteRestore(r)
	published := ""
	if p.Blob == p.Record {
		published = p.Record // the record's value, verbatim
	}
	if err := a.afterRestore(ctx, r, published); err != nil {
		return err
	}
	a.mu.Lock()
	s := *a.st.Last
	a.mu.Unlock()
	if err := a.head.TookOver(s, p.Record, p.Fleet); err != nil {
		return err
	}
	if aside != "" {
		a.log.Warn("the brain held changes no snapshot stored; set aside", "aside", filepath.Base(aside))
	}
	a.log.Info("brain restored", "blob", p.Blob, "from", p.Source, "bundle_hash", r.BundleHash, "files", r.Files, "bytes", r.Bytes)
	a.deps.Observer.Restore(a.cfg.ID, "restored", &r)
	return nil
}

// brainIsStored reports whether the brain is exactly last, a snapshot
// stored on Walrus (so replacing it loses nothing).
func (a *Agent) brainIsStored(ctx context.Context, last *state.Snapshot) bool {
	if last == nil {
		return false
	}
	res, err := a.cache.Rescan(ctx)
	if err != nil {
		return false
	}
	return res.Digest.String() == last.BundleHash
}
