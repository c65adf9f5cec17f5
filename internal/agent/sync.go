package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hermesd/hermesd/internal/backoff"
	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
	"github.com/hermesd/hermesd/internal/watch"
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
	return a.sync(ctx, nil, true, nil)
}

// sync hashes (Update of the named paths, or a Rescan when rescan is set)
// and snapshots if needed. newer, when it fires, says that a newer state
// of the brain is ready (see snapshot.Input.Newer).
func (a *Agent) sync(ctx context.Context, paths []string, rescan bool, newer <-chan struct{}) (SyncResult, error) {
	a.syncMu.Lock()
	defer a.syncMu.Unlock()
	slot := &slotHolder{slots: a.deps.Slots}
	if err := slot.take(ctx); err != nil {
		return SyncResult{}, err
	}
	defer slot.release()
	snap := snapshot.Input{Newer: newer}
	if a.deps.Slots != nil {
		snap.Slot = slot
	}
	start, before := a.deps.Now(), a.lastBlob()
	res, err := a.syncLocked(ctx, paths, rescan, snap)
	if err != nil && ctx.Err() == nil && a.lastBlob() == before {
		// Whatever failed before a snapshot was recorded (the state or
		// spool directory unwritable, a SQLite copy, the hash, the
		// upload), the brain is not known to be saved: it counts as
		// unsaved from when this sync began, not only once a changed
		// hash was seen (issue 28 item 6).
		a.mu.Lock()
		if a.unsavedSince.IsZero() {
			a.unsavedSince = start
		}
		a.mu.Unlock()
	}
	return res, err
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
		return SyncResult{}, err
	}
	if err := a.checkPaths(); err != nil {
		return SyncResult{}, err
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
			return SyncResult{}, fmt.Errorf("freeze SQLite databases: %w", err)
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
			a.deps.Observer.Failed(a.cfg.ID, "hash", err)
			return SyncResult{}, fmt.Errorf("hash: %w", err)
		}
		a.noteHash(res)
		a.deps.Observer.Hashed(a.cfg.ID, res.Count, res.Bytes, a.deps.Now().Sub(t))

		out, err := a.snapshotIfMoved(ctx, res.Digest, ov, snap)
		pass.release()
		if errors.Is(err, snapshot.ErrChanged) && attempt < maxChangedRetries {
			a.log.Debug("brain changed while packing; re-hashing", "attempt", attempt+1)
			continue
		}
		return out, err
	}
}

func (a *Agent) snapshotIfMoved(ctx context.Context, h hash.Digest, ov *fsys.Overlay, in snapshot.Input) (SyncResult, error) {
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
		refresh := a.cfg.RefreshAfter > 0 && age >= a.cfg.RefreshAfter
		ren := a.deps.Pipeline.Renewal(a.deps.Now())
		switch {
		case a.rekeyDue(last):
			a.log.Info("brain unchanged since the handover; re-keying: a full snapshot under this operator's key", "parent", last.BlobID)
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
	a.mu.Lock()
	if a.unsavedSince.IsZero() {
		a.unsavedSince = a.deps.Now()
	}
	a.mu.Unlock()
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
		a.takeFailed(err)
		return SyncResult{}, err
	}
	return a.recordSnapshot(r)
}

// takeFailed reports a failed Take to the observer.
func (a *Agent) takeFailed(err error) {
	stage := "snapshot"
	if errors.Is(err, snapshot.ErrChanged) {
		stage = "pack"
	}
	a.deps.Observer.Failed(a.cfg.ID, stage, err)
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
	a.mu.Lock()
	if a.unsavedSince.IsZero() {
		a.unsavedSince = a.deps.Now()
	}
	a.mu.Unlock()
	learn := a.cache.Learner(ov)
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
		if !errors.Is(err, snapshot.ErrSuperseded) {
			a.takeFailed(err)
		}
		return SyncResult{}, err
	}
	for _, f := range r.Reads {
		learn.Add(f.Path, f.Stat, f.Start, f.Size, f.SHA256)
	}
	r.Reads = nil // taken over; not kept with the result
	if res, err := learn.Adopt(r.BundleHash); err != nil {
		// The snapshot stands; the next pass reads the brain again.
		a.log.Warn("the hash cache did not take over the first snapshot's reads", "error", err)
	} else {
		a.noteHash(res)
		a.deps.Observer.Hashed(a.cfg.ID, res.Count, res.Bytes, a.deps.Now().Sub(t))
	}
	return a.recordSnapshot(r)
}

// recordSnapshot makes a verified snapshot the agent's last, and pending
// publication when the agent has a name.
func (a *Agent) recordSnapshot(r snapshot.Result) (SyncResult, error) {
	a.log.Info("snapshot uploaded and verified", "blob", r.BlobID, "format", r.Format, "bundle_hash", r.BundleHash,
		"version", r.Version, "files", r.Files, "bytes", r.Bytes, "blob_bytes", r.Size, "uploaded", r.Uploaded,
		"packs", r.Packs, "live_packs", r.LivePacks, "repacked", r.Repacked, "files_read", r.FilesRead,
		"end_epoch", r.EndEpoch, "pack", r.Pack.Round(time.Millisecond), "prepare", r.Prepare.Round(time.Millisecond),
		"upload", r.Upload.Round(time.Millisecond), "verify", r.Verify.Round(time.Millisecond),
		"quilted", r.Quilted, "batch_wait", r.BatchWait.Round(time.Millisecond))

	a.mu.Lock()
	a.unsavedSince = time.Time{}
	a.st.Last = &state.Snapshot{
		BlobID:     r.BlobID,
		BundleHash: r.BundleHash.String(),
		Version:    r.Version,
		Size:       r.Size,
		SHA256:     fmt.Sprintf("%x", r.SHA256),
		EndEpoch:   r.EndEpoch,
		CreatedAt:  r.CreatedAt,
	}
	if a.cfg.ENSName != "" {
		switch p := a.st.Pending; {
		case p == nil:
			a.st.Pending = &state.Pointer{Expected: a.st.Published, Since: r.CreatedAt, Target: a.cfg.Records}
		case p.Written != nil:
			// The records contract holds the value written there (not
			// visible from L1 yet): the new snapshot replaces it.
			p.Expected, p.Written = p.Written.Value, nil
		}
		// The newest snapshot wins; Since keeps the age of the oldest
		// unpublished change.
		a.st.Pending.Value = r.BlobID
		a.st.Pending.TxHash, a.st.Pending.LastErr = "", ""
	}
	err := a.saveStateLocked()
	a.mu.Unlock()
	a.deps.Observer.Snapshot(a.cfg.ID, r)
	if a.deps.Accounts != nil {
		a.deps.Accounts.Snapshotted(a.cfg.ID, r)
	}
	a.saveCache()
	if a.cfg.ENSName != "" && a.deps.Publisher != nil {
		// Published from memory even if the save failed; the save is
		// retried until it succeeds.
		a.deps.Publisher.Notify()
	}
	if err != nil {
		return SyncResult{}, err
	}
	return SyncResult{Outcome: Snapshotted, Hash: r.BundleHash, Snapshot: &r}, nil
}

func (a *Agent) markSaved() {
	a.mu.Lock()
	a.unsavedSince = time.Time{}
	a.mu.Unlock()
}

// recoverWiped restores a brain that vanished while hermesd was running.
func (a *Agent) recoverWiped(ctx context.Context, last *state.Snapshot) (SyncResult, error) {
	a.log.Warn("brain directory is empty or gone; restoring it instead of snapshotting an empty brain",
		"dir", a.cfg.BrainDir, "last_blob", last.BlobID)
	created, err := a.restoreIfNeeded(ctx, PrepareOptions{})
	if err != nil {
		a.setPhase(PhaseFailed, err.Error())
		return SyncResult{}, err
	}
	if created {
		if err := a.fillSeed(); err != nil {
			return SyncResult{}, err
		}
	}
	res, err := a.cache.Rescan(ctx)
	if err != nil {
		return SyncResult{}, fmt.Errorf("hash restored brain: %w", err)
	}
	a.noteHash(res)
	a.setPhase(PhaseReady, "")
	return SyncResult{Outcome: Restored, Hash: res.Digest}, nil
}

// finalRequest is Final's request to Run.
type finalRequest struct {
	ctx  context.Context
	done chan error // buffered: Run never waits for Final
}

// Final has Run take a last snapshot for a clean stop: of changes still in
// the debounce or held back by snapshot_interval (an unchanged brain
// uploads nothing). It returns at once when Run is not running (the agent
// never became ready, or its loop was stopped), and when ctx ends. The pointer of that snapshot is
// pending like any other; the daemon's stop flushes it.
func (a *Agent) Final(ctx context.Context) error {
	a.mu.Lock()
	exit := a.runExit
	a.mu.Unlock()
	if exit == nil {
		return nil
	}
	req := finalRequest{ctx: ctx, done: make(chan error, 1)}
	select {
	case a.final <- req:
	case <-exit:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Watcher is the source of change batches for one brain (a subscription
// to the process's watch hub).
type Watcher interface {
	Ready() <-chan struct{}
	Take() (watch.Batch, bool)
	Close() error
}

// Watch subscribes to changes below a directory.
type Watch func(dir string, opts watch.Options) (Watcher, error)

// Run watches the brain and syncs until ctx is done. Prepare must have
// succeeded. It owns its subscription; it returns when ctx is cancelled.
func (a *Agent) Run(ctx context.Context, subscribe Watch) {
	exit := make(chan struct{})
	a.mu.Lock()
	a.runExit = exit
	a.mu.Unlock()
	defer close(exit)
	var w Watcher
	defer func() {
		if w != nil {
			w.Close()
		}
	}()
	startWatch := func() {
		if w != nil {
			w.Close()
			w = nil
		}
		var err error
		w, err = subscribe(a.cfg.BrainDir, watch.Options{
			Quiet:  a.cfg.Quiet,
			MaxLag: a.cfg.MaxLag,
			Ignore: isOwnFile,
			Busy:   a.busy,
			Logger: a.log,
		})
		if err != nil {
			w = nil
			a.log.Error("cannot watch brain directory; will retry", "error", err)
		}
	}
	startWatch()

	// At most a minute between retries: the prober wakes the loop at once
	// when Walrus comes back from a visible outage, and a partial one (a
	// publisher that answers /status but fails stores) costs a minute at
	// worst.
	bo := &backoff.Backoff{Min: time.Second, Max: time.Minute, Log: a.log, Now: a.deps.Now}
	// A state save that failed (after a publish, a read-back, a hold, or
	// a snapshot) is retried here until it succeeds; saveStateLocked logs
	// the failure once and the recovery once.
	saveBo := backoff.Backoff{Min: time.Second, Max: time.Minute, Now: a.deps.Now}
	resave := time.NewTimer(time.Hour)
	resave.Stop()
	defer resave.Stop()
	resaveArmed := false
	var (
		retry     = time.NewTimer(0) // first pass right away: changes made while stopped
		pending   []string
		rescan    = true
		needRetry = true // a timer is armed: batches accumulate until it fires
		uploaded  time.Time
		refresh   = time.NewTimer(time.Hour)
	)
	defer retry.Stop()
	refresh.Stop()
	defer refresh.Stop()
	// armRefresh wakes the loop when the last snapshot nears expiry (its
	// v1/v2 blob, or a pack a v3 head needs), so an unchanged brain is
	// stored again in time.
	armRefresh := func() {
		refresh.Stop()
		a.mu.Lock()
		last := a.st.Last
		a.mu.Unlock()
		if last == nil {
			return
		}
		var at time.Time
		if a.cfg.RefreshAfter > 0 {
			at = last.CreatedAt.Add(a.cfg.RefreshAfter)
		}
		if r := a.deps.Pipeline.Renewal(a.deps.Now()); !r.At.IsZero() && (at.IsZero() || r.At.Before(at)) {
			at = r.At
		}
		if at.IsZero() {
			return
		}
		refresh.Reset(max(at.Sub(a.deps.Now()), time.Second))
	}

	for {
		var ready, recovered <-chan struct{}
		if w != nil {
			ready = w.Ready()
		}
		if needRetry && bo.Failures() > 0 && a.deps.Recovered != nil {
			recovered = a.deps.Recovered()
		}
		select {
		case <-ctx.Done():
			return
		case <-recovered:
			// The outage that failed the last sync is over: retry now
			// rather than at the end of a long backoff.
			needRetry = false
			retry.Stop()
		case <-ready:
			b, ok := w.Take()
			if !ok {
				continue
			}
			rescan = rescan || b.Rescan
			pending = append(pending, b.Paths...)
			if needRetry {
				// A failure is waiting for its backoff; the retry will
				// include these changes.
				continue
			}
		case <-retry.C:
			needRetry = false
			if w == nil {
				startWatch()
				rescan = true
			}
		case req := <-a.final:
			// A clean stop: store what the debounce or snapshot_interval
			// still holds back, looking at the whole brain (a batch may
			// be in the debounce), so a machine that goes away with the
			// daemon loses nothing written before the stop.
			if w != nil {
				if b, ok := w.Take(); ok {
					pending = append(pending, b.Paths...)
				}
			}
			_, err := a.sync(req.ctx, pending, true, nil)
			if err == nil {
				pending, rescan = nil, false
			}
			req.done <- err
			continue
		case <-a.saveFailed:
			if !resaveArmed {
				resaveArmed = true
				resave.Reset(saveBo.Failed("", nil))
			}
			continue
		case <-resave.C:
			resaveArmed = false
			// Failing again signals saveFailed, which re-arms the timer
			// with a longer wait.
			if a.SaveState() == nil {
				saveBo.Succeeded("")
			}
			continue
		case <-a.rewatch:
			// A new brain directory took the old one's place: watch it,
			// and look at all of it.
			startWatch()
			rescan = true
			if needRetry {
				continue
			}
		case <-refresh.C:
			if needRetry {
				continue
			}
		}
		if next := uploaded.Add(a.cfg.MinInterval); a.cfg.MinInterval > 0 && a.deps.Now().Before(next) {
			// Uploads are rate-limited (snapshot_interval): collect the
			// changes and sync once the interval has passed. Held
			// changes are unsaved ones (status, the unsaved-age metric).
			if len(pending) > 0 || rescan {
				a.mu.Lock()
				if a.unsavedSince.IsZero() {
					a.unsavedSince = a.deps.Now()
				}
				a.mu.Unlock()
			}
			needRetry = true
			retry.Reset(next.Sub(a.deps.Now()))
			continue
		}

		newer, stopNewer := watchNewer(w)
		res, err := a.sync(ctx, pending, rescan, newer)
		// A batch of changes that became ready while the sync ran was
		// taken here: it is synced next, at once.
		more := stopNewer()
		takeMore := func() {
			if !more {
				return
			}
			if b, ok := w.Take(); ok {
				rescan = rescan || b.Rescan
				pending = append(pending, b.Paths...)
			}
			if !needRetry {
				needRetry = true
				retry.Reset(0)
			}
		}
		if errors.Is(err, snapshot.ErrSuperseded) {
			// Not a failure: the snapshot gave way, while it waited for
			// its quilt, to the newer state now in pending.
			a.log.Debug("snapshot superseded by a newer state of the brain while it waited for its quilt")
			more = true
			takeMore()
			continue
		}
		if err != nil {
			takeMore()
			if ctx.Err() != nil {
				return
			}
			a.mu.Lock()
			a.lastErr = err.Error()
			a.mu.Unlock()
			// Keep the changed paths: the retry must look at them again.
			needRetry = true
			retry.Reset(bo.Failed("sync failed; will retry", err))
			continue
		}
		pending, rescan = nil, false
		takeMore()
		if bo.Succeeded("sync recovered") > 0 {
			a.mu.Lock()
			a.lastErr = ""
			a.mu.Unlock()
		}
		if res.Outcome == Restored {
			// The old directory (and its watches) are gone.
			startWatch()
		}
		if res.Outcome == Snapshotted {
			uploaded = a.deps.Now()
		}
		armRefresh()
		if w == nil {
			// Without a watcher nothing would wake us: poll until one
			// can be set up.
			needRetry = true
			retry.Reset(bo.Wait(1))
		}
	}
}
