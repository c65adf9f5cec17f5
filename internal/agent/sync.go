package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
)

// Outcome says what one SyncOnce did.
type Outcome string

const (
	Unchanged   Outcome = "unchanged"   // hash equals the last verified snapshot
	Empty       Outcome = "empty"       // nothing to protect
	Snapshotted Outcome = "snapshotted" // uploaded and verified
	Restored    Outcome = "restored"    // the brain had vanished and came back
)

// SyncResult is what SyncOnce did.
type SyncResult struct {
	Outcome  Outcome
	Hash     hash.Digest
	Snapshot *snapshot.Result
}

// maxChangedRetries bounds re-hash-and-retry when the brain keeps changing
// under the packer.
const maxChangedRetries = 3

// SyncOnce brings the agent up to date: hash the brain (a full stat walk,
// re-reading only what changed) and snapshot it if the hash moved since the
// last verified snapshot. It is safe to call concurrently with Run.
func (a *Agent) SyncOnce(ctx context.Context) (SyncResult, error) {
	return a.sync(ctx, syncIn{rescan: true})
}

// syncIn is what one sync looks at, and what it shares.
type syncIn struct {
	paths  []string // changed since the last sync (Update)
	rescan bool     // look at the whole brain (Rescan)
	// newer is closed when a newer state of the brain is ready while the
	// sync runs (snapshot.Input.Newer).
	newer <-chan struct{}
	slots chan struct{} // the process's sync slots (Env.Slots; nil: none)
}

// sync hashes and snapshots if needed, one at a time, holding a sync
// slot.
func (a *Agent) sync(ctx context.Context, in syncIn) (SyncResult, error) {
	a.syncMu.Lock()
	defer a.syncMu.Unlock()
	slot := &slotHolder{slots: in.slots}
	if err := slot.take(ctx); err != nil {
		return SyncResult{}, err
	}
	defer slot.release()
	snap := snapshot.Input{Newer: in.newer}
	if in.slots != nil {
		snap.Slot = slot
	}
	start, before := a.deps.Now(), a.lastBlob()
	res, err := a.syncLocked(ctx, in.paths, in.rescan, snap)
	if err != nil && ctx.Err() == nil && a.lastBlob() == before {
		// Whatever failed before a snapshot was recorded (the state or
		// spool directory unwritable, a SQLite copy, the hash, the
		// upload), the brain is not known to be saved: it counts as
		// unsaved from when this sync began, not only once a changed
		// hash was seen.
		a.markUnsaved(start)
	}
	if err != nil && ctx.Err() == nil && !errors.Is(err, snapshot.ErrSuperseded) {
		// Every failed attempt counts, by the stage that failed, however
		// rarely its error is logged.
		a.deps.Observer.Failed(a.cfg.ID, StageOf(err), err)
	}
	return res, err
}

// The stages a sync fails in (hermesd_failures_total{stage}).
const (
	StageState    = "state"    // saving the agent's state file
	StageDirs     = "dirs"     // the brain or seed directory refused (unsafe)
	StageSQLite   = "sqlite"   // copying live SQLite databases to the spool
	StageHash     = "hash"     // hashing the brain
	StageSnapshot = "snapshot" // taking, uploading and verifying a snapshot
	StagePack     = "pack"     // the brain kept changing while it was packed
	StageRestore  = "restore"  // restoring a brain that vanished
)

// Stages are the stages a sync can fail in.
var Stages = []string{StageState, StageDirs, StageSQLite, StageHash, StageSnapshot, StagePack, StageRestore}

// stageError is a sync's error with the stage it failed in.
type stageError struct {
	stage string
	err   error
}

func (e *stageError) Error() string { return e.err.Error() }
func (e *stageError) Unwrap() error { return e.err }

// atStage tags err with the stage it failed in (nil stays nil).
func atStage(stage string, err error) error {
	if err == nil {
		return nil
	}
	return &stageError{stage: stage, err: err}
}

// StageOf is the stage a sync's error failed in (StageSnapshot when it
// names none).
func StageOf(err error) string {
	if se, ok := errors.AsType[*stageError](err); ok {
		return se.stage
	}
	if errors.Is(err, snapshot.ErrChanged) {
		return StagePack
	}
	return StageSnapshot
}

// lastBlob is the blob of the last verified snapshot ("" for none).
func (a *Agent) lastBlob() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.st.Last == nil {
		return ""
	}
	return a.st.Last.BlobID
}

// syncLocked is sync, holding syncMu and a slot; snap holds what every
// snapshot.Input of the sync carries.
func (a *Agent) syncLocked(ctx context.Context, paths []string, rescan bool, snap snapshot.Input) (SyncResult, error) {
	// A sync starts from a saved state: a save that failed earlier is
	// tried again first (Run also retries it on its own).
	if err := a.SaveState(); err != nil {
		return SyncResult{}, atStage(StageState, err)
	}
	if err := a.checkPaths(); err != nil {
		return SyncResult{}, atStage(StageDirs, err)
	}
	if a.Transferred() != nil {
		return SyncResult{Outcome: TransferredOutcome}, nil
	}
	for attempt := 0; ; attempt++ {
		t := a.deps.Now()
		full := rescan || attempt > 0
		single := attempt == 0 && a.snapshotIsHash()
		// Live SQLite databases are read through consistent copies.
		pass, err := a.freeze.freeze(ctx, paths, full || single)
		if err != nil {
			return SyncResult{}, atStage(StageSQLite, fmt.Errorf("freeze SQLite databases: %w", err))
		}
		var ov *fsys.Overlay
		if pass != nil {
			ov = pass.ov
		}
		if single {
			out, err := a.takeAsHash(ctx, ov, t, snap)
			pass.release()
			if errors.Is(err, snapshot.ErrChanged) {
				a.log.Debug("brain changed while the first snapshot read it; hashing it first", "error", err)
				continue
			}
			return out, err
		}
		var res hash.Result
		if full {
			res, err = a.cache.RescanOverlay(ctx, ov)
		} else {
			res, err = a.cache.UpdateOverlay(ctx, paths, ov)
		}
		if err != nil {
			pass.release()
			return SyncResult{}, atStage(StageHash, fmt.Errorf("hash: %w", err))
		}
		a.noteHash(res)
		a.deps.Observer.Hashed(a.cfg.ID, res.Count, res.Bytes, a.deps.Now().Sub(t))

		out, err := a.snapshotIfMoved(ctx, res.Digest, linksID(res.Links), ov, snap)
		pass.release()
		if errors.Is(err, snapshot.ErrChanged) && attempt < maxChangedRetries {
			a.log.Debug("brain changed while packing; re-hashing", "attempt", attempt+1)
			continue
		}
		return out, err
	}
}

// linksID is how a snapshot records the fingerprint of its symlinks: ""
// for none.
func linksID(d hash.Digest) string {
	if d == (hash.Digest{}) {
		return ""
	}
	return d.String()
}

// snapshotIfMoved snapshots the brain when its bundle hash h or the
// fingerprint of its symlinks (links, which the bundle hash leaves out)
// differs from the last verified snapshot's, or when that needs renewing.
func (a *Agent) snapshotIfMoved(ctx context.Context, h hash.Digest, links string, ov *fsys.Overlay, in snapshot.Input) (SyncResult, error) {
	a.mu.Lock()
	var last *state.Snapshot
	if a.st.Last != nil {
		l := *a.st.Last
		last = &l
	}
	tooLarge := a.tooLarge
	a.mu.Unlock()

	if h == hash.Null {
		if last != nil && last.BundleHash != hash.Null.String() {
			// Everything that was protected is gone. Never snapshot an
			// empty brain over a real one: bring it back instead.
			return a.recoverWiped(ctx, last)
		}
		a.markSaved()
		return SyncResult{Outcome: Empty, Hash: h}, nil
	}
	if last != nil && last.BundleHash == h.String() {
		age := a.deps.Now().Sub(last.CreatedAt)
		linked := last.Links != links
		refresh := a.cfg.RefreshAfter > 0 && age >= a.cfg.RefreshAfter
		ren := a.deps.Pipeline.Renewal(a.deps.Now())
		switch {
		case a.rekeyDue(last):
			a.log.Info("brain unchanged since the handover; re-keying: a full snapshot under this operator's key", "parent", last.BlobID)
		case linked:
			// The files are the same; a symlink was created, removed or
			// retargeted, and snapshots store symlinks.
			a.log.Info("symlinks changed (the bundle hash leaves them out); snapshotting", "bundle_hash", h)
		case ren.Due:
			// v3: the packs the head needs near their end epoch (or are
			// not known here): a snapshot re-packs what is still live.
			a.log.Info("brain unchanged but its snapshot needs renewing; re-packing", "blob", last.BlobID, "reason", ren.Reason)
		case refresh:
			// Unchanged, but its blob expires soon: store it again (a new
			// blob, since every envelope has a fresh salt) and repoint.
			a.log.Info("brain unchanged but its snapshot nears expiry; uploading it again",
				"blob", last.BlobID, "age", age.Round(time.Second))
		default:
			a.markSaved()
			a.deps.Observer.Unchanged(a.cfg.ID)
			return SyncResult{Outcome: Unchanged, Hash: h}, nil
		}
	}
	a.markUnsaved(a.deps.Now())
	if tooLarge == h {
		// Packing it again gives the same size: fail at once until the
		// brain changes.
		return SyncResult{}, fmt.Errorf("%w: this state of the brain (%s) was measured before; waiting for a change",
			snapshot.ErrTooLarge, h)
	}

	in.Want, in.Overlay, in.Known = h, ov, a.cache
	r, err := a.deps.Pipeline.Take(ctx, in)
	if err != nil {
		if errors.Is(err, snapshot.ErrSuperseded) {
			return SyncResult{}, err
		}
		if errors.Is(err, snapshot.ErrTooLarge) {
			a.mu.Lock()
			a.tooLarge = h
			a.mu.Unlock()
		}
		return SyncResult{}, err
	}
	return a.recordSnapshot(r, links)
}

// snapshotIsHash reports whether the next snapshot is best taken as the
// hash itself (takeAsHash): the agent has never snapshotted this brain, so
// a snapshot follows whatever the hash says, and reading every file twice
// (once to hash it, once to store it) would double the cost of the first
// snapshot of a large brain. Only formats that hash while they read do.
func (a *Agent) snapshotIsHash() bool {
	if !a.deps.Pipeline.HashesWhileTaking() || a.cache.Validated() {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.st.Last == nil && !a.hashFirst
}

// takeAsHash takes the first snapshot without hashing the brain first:
// the snapshot reads every file once, with the checks that it held still
// (a file that did not is ErrChanged, and the caller hashes first after
// all), and the hash cache takes over what it read.
func (a *Agent) takeAsHash(ctx context.Context, ov *fsys.Overlay, t time.Time, in snapshot.Input) (SyncResult, error) {
	a.markUnsaved(a.deps.Now())
	learn := a.cache.Learner(ov)
	// The symlinks, read before the snapshot reads the tree: a change
	// after this is a change the next pass sees.
	links, err := hash.ReadLinks(ctx, a.cfg.BrainDir, ov)
	if err != nil {
		return SyncResult{}, atStage(StageHash, fmt.Errorf("hash: %w", err))
	}
	learn.SetLinks(links)
	in.Overlay = ov
	r, err := a.deps.Pipeline.Take(ctx, in)
	if errors.Is(err, snapshot.ErrEmpty) {
		res, err := learn.Adopt(hash.Null)
		if err != nil {
			return SyncResult{}, err
		}
		a.noteHash(res)
		a.markSaved()
		return SyncResult{Outcome: Empty, Hash: hash.Null}, nil
	}
	if err != nil {
		a.mu.Lock()
		a.hashFirst = true
		a.mu.Unlock()
		return SyncResult{}, err
	}
	for f := range r.Reads.Drain() { // taken over; not kept with the result
		learn.Add(f.Path, f.Stat, f.Start, f.Size, f.SHA256)
	}
	if res, err := learn.Adopt(r.BundleHash); err != nil {
		// The snapshot stands; the next pass reads the brain again.
		a.log.Warn("the hash cache did not take over the first snapshot's reads", "error", err)
	} else {
		a.noteHash(res)
		a.deps.Observer.Hashed(a.cfg.ID, res.Count, res.Bytes, a.deps.Now().Sub(t))
	}
	return a.recordSnapshot(r, linksID(links.Digest()))
}

// recordSnapshot makes a verified snapshot the agent's last, and pending
// publication when the agent has a name.
func (a *Agent) recordSnapshot(r snapshot.Result, links string) (SyncResult, error) {
	a.log.Info("snapshot uploaded and verified", "blob", r.BlobID, "format", r.Format, "bundle_hash", r.BundleHash,
		"version", r.Version, "files", r.Files, "bytes", r.Bytes, "blob_bytes", r.Size, "uploaded", r.Uploaded,
		"packs", r.Packs, "live_packs", r.LivePacks, "repacked", r.Repacked, "files_read", r.FilesRead,
		"end_epoch", r.EndEpoch, "pack", r.Pack.Round(time.Millisecond), "prepare", r.Prepare.Round(time.Millisecond),
		"upload", r.Upload.Round(time.Millisecond), "verify", r.Verify.Round(time.Millisecond),
		"quilted", r.Quilted, "batch_wait", r.BatchWait.Round(time.Millisecond))

	// The head records it as the last verified snapshot and, for an agent
	// with a name, the pointer pending (published from memory even if the
	// save failed; the save is retried until it succeeds).
	err := a.head.Verified(state.Snapshot{
		BlobID:     r.BlobID,
		BundleHash: r.BundleHash.String(),
		Version:    r.Version,
		Size:       r.Size,
		SHA256:     fmt.Sprintf("%x", r.SHA256),
		EndEpoch:   r.EndEpoch,
		CreatedAt:  r.CreatedAt,
		Links:      links,
	})
	a.markSaved()
	a.deps.Observer.Snapshot(a.cfg.ID, r)
	if a.deps.Accounts != nil {
		a.deps.Accounts.Snapshotted(a.cfg.ID, r)
	}
	a.saveCache()
	if err != nil {
		return SyncResult{}, atStage(StageState, err)
	}
	return SyncResult{Outcome: Snapshotted, Hash: r.BundleHash, Snapshot: &r}, nil
}

func (a *Agent) markSaved() {
	a.mu.Lock()
	a.unsavedSince = time.Time{}
	a.mu.Unlock()
}

// markUnsaved notes that the brain is not known to be stored since t,
// unless it was already unsaved before.
func (a *Agent) markUnsaved(t time.Time) {
	a.mu.Lock()
	if a.unsavedSince.IsZero() {
		a.unsavedSince = t
	}
	a.mu.Unlock()
}

// recoverWiped restores a brain that vanished while hermesd was running.
func (a *Agent) recoverWiped(ctx context.Context, last *state.Snapshot) (SyncResult, error) {
	a.log.Warn("brain directory is empty or gone; restoring it instead of snapshotting an empty brain",
		"dir", a.cfg.BrainDir, "last_blob", last.BlobID)
	created, err := a.restoreIfNeeded(ctx, PrepareOptions{})
	if err != nil {
		a.setPhase(PhaseFailed, err.Error())
		return SyncResult{}, atStage(StageRestore, err)
	}
	if created {
		if err := a.fillSeed(); err != nil {
			return SyncResult{}, atStage(StageRestore, err)
		}
	}
	res, err := a.cache.Rescan(ctx)
	if err != nil {
		return SyncResult{}, atStage(StageHash, fmt.Errorf("hash restored brain: %w", err))
	}
	a.noteHash(res)
	a.setPhase(PhaseReady, "")
	return SyncResult{Outcome: Restored, Hash: res.Digest}, nil
}
