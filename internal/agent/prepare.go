package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hermesd/hermesd/internal/atomicfile"
	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
)

// ErrRestoreFailed wraps why an existing pointer could not be restored.
var ErrRestoreFailed = errors.New("restore failed")

// Prepare makes the brain directory usable: a missing or empty brain is
// cold-restored from the agent's pointer (or, for an agent without an ENS
// name, from the last snapshot in the local state); with no pointer it
// starts fresh from the seed. A pointer that exists but cannot be restored
// fails the agent and leaves the directory untouched — the seed never
// silently replaces a brain that exists somewhere. Then the brain is hashed
// (unless its first snapshot will hash it as it reads it) and the
// publication state reconciled with the chain.
func (a *Agent) Prepare(ctx context.Context) error { return a.PrepareWith(ctx, PrepareOptions{}) }

// PrepareOptions adjust Prepare for an operator's one-off start-up
// restore (`hermesd restore AGENT`).
type PrepareOptions struct {
	// Unverified installs a v1/v2/seal snapshot whose bundle hash cannot
	// be verified (no lock, or files that do not match it) instead of
	// refusing it, as `restore --unverified` asks. The blob must still
	// decrypt and authenticate (AEAD): an unauthenticated blob is never
	// installed. Status.Restore says what was not checked. The daemon
	// never sets it.
	Unverified bool
}

// PrepareWith is Prepare with options.
func (a *Agent) PrepareWith(ctx context.Context, opts PrepareOptions) error {
	if err := a.checkPaths(); err != nil {
		a.setPhase(PhaseFailed, err.Error())
		return err
	}
	if t := a.Transferred(); t != nil {
		// Handed to a new owner: nothing to restore, snapshot or publish.
		a.setPhase(PhaseReady, "transferred: "+t.Reason)
		return nil
	}
	a.removeCrashTemps()
	created, err := a.restoreIfNeeded(ctx, opts)
	if err != nil {
		a.setPhase(PhaseFailed, err.Error())
		return err
	}
	if created {
		// Only a brain that was just restored or created is filled; files
		// an operator deleted from a running brain stay deleted.
		if err := a.fillSeed(); err != nil {
			a.setPhase(PhaseFailed, err.Error())
			return err
		}
	}
	// A snapshot whose state save was lost (a crash right after a failed
	// save) is not uploaded again.
	a.head.CatchUp()
	if !a.snapshotIsHash() {
		// (Else the first snapshot hashes the brain as it reads it.)
		res, err := a.cache.Rescan(ctx)
		if err != nil {
			a.setPhase(PhaseFailed, err.Error())
			return fmt.Errorf("hash brain: %w", err)
		}
		a.noteHash(res)
	}
	if err := a.head.Reconcile(ctx); err != nil {
		// Not fatal: snapshots continue; the publisher checks the record
		// again before it writes.
		a.log.Warn("ENS pointer not reconciled yet", "error", err)
	}
	a.setPhase(PhaseReady, "")
	return nil
}

// removeCrashTemps deletes the temporary files of hermesd's own atomic
// writes into the brain (bundle.lock.json, receipts.ndjson) that a crash
// between link and rename left behind (or, where unnamed temporary files
// are not available, between create and rename). They are not brain
// content: the watcher ignores them, but the bundle hash would not.
func (a *Agent) removeCrashTemps() {
	for _, base := range []string{bundlelock.FileName, snapshot.ReceiptsFile} {
		m, _ := filepath.Glob(filepath.Join(a.cfg.BrainDir, atomicfile.TempPrefix(base)+"*"))
		outside, _ := filepath.Glob(atomicfile.OutsidePrefix(filepath.Join(a.cfg.BrainDir, base)) + "*")
		m = append(m, outside...)
		for _, p := range m {
			if info, err := os.Lstat(p); err != nil || !info.Mode().IsRegular() {
				continue
			}
			if err := os.Remove(p); err == nil {
				a.log.Warn("removed a temporary file left in the brain by an interrupted write", "file", p)
			}
		}
	}
}

// restoreIfNeeded restores a missing or file-less brain. It reports
// whether the brain directory was (re)created.
func (a *Agent) restoreIfNeeded(ctx context.Context, opts PrepareOptions) (bool, error) {
	has, err := snapshot.HasFiles(a.cfg.BrainDir)
	if err != nil {
		return false, err
	}
	if has {
		a.mu.Lock()
		a.startedAs = "existing"
		if a.st.Origin == "" {
			a.st.Origin = "existing"
			a.saveStateLocked()
		}
		a.mu.Unlock()
		a.deps.Observer.Restore(a.cfg.ID, "existing", nil)
		return false, nil
	}
	a.setPhase(PhaseRestoring, "")

	blob, source, err := a.findSnapshot(ctx)
	if err != nil {
		a.deps.Observer.Restore(a.cfg.ID, "failed", nil)
		return false, fmt.Errorf("%w: %w", ErrRestoreFailed, err)
	}
	if blob == "" && a.cfg.Handover != nil && a.handoverPending() {
		// A handed-over agent never starts fresh: its brain is on chain.
		a.deps.Observer.Restore(a.cfg.ID, "failed", nil)
		return false, fmt.Errorf("%w: %w", ErrRestoreFailed, a.checkHandover(ctx, ""))
	}
	if blob == "" {
		if err := os.MkdirAll(a.cfg.BrainDir, snapshot.RootMode); err != nil {
			return false, fmt.Errorf("create brain dir: %w", err)
		}
		a.mu.Lock()
		a.startedAs = "fresh"
		a.st.Origin = "fresh"
		err := a.saveStateLocked()
		a.mu.Unlock()
		a.log.Info("no snapshot exists; starting fresh", "dir", a.cfg.BrainDir, "seed", a.cfg.SeedDir)
		a.deps.Observer.Restore(a.cfg.ID, "fresh", nil)
		return true, err
	}

	handover := a.cfg.Handover != nil && a.handoverPending()
	if handover {
		if err := a.checkHandover(ctx, blob); err != nil {
			a.deps.Observer.Restore(a.cfg.ID, "failed", nil)
			return false, fmt.Errorf("%w: %w", ErrRestoreFailed, err)
		}
	}
	a.log.Info("brain missing; restoring", "blob", blob, "from", source)
	r, err := a.deps.Pipeline.RestoreWith(ctx, blob, a.cfg.BrainDir, snapshot.RestoreOptions{Unverified: opts.Unverified, PublicRoot: a.cfg.AllowUnsafeDirs})
	if err == nil && handover {
		err = a.afterHandoverRestore(r)
	}
	if err != nil {
		a.deps.Observer.Restore(a.cfg.ID, "failed", nil)
		if handover && errors.Is(err, snapshot.ErrBlobNotFound) {
			err = fmt.Errorf("the handover's head is gone from Walrus (expired?); ask the seller for a new handover: %w", err)
		}
		if errors.Is(err, snapshot.ErrNoLock) || errors.Is(err, snapshot.ErrHashMismatch) {
			// Name the override: an operator who trusts the snapshot
			// (say, one the reference runtime took while its brain was
			// changing) can install it, saying so.
			err = fmt.Errorf("%w (to install it anyway, unverified: hermesd restore %s --unverified)", err, a.cfg.ID)
		}
		return false, fmt.Errorf("%w: blob %s (from %s): %w", ErrRestoreFailed, blob, source, err)
	}
	a.noteRestore(r)
	if err := a.afterRestore(ctx, r, source == SourceENS); err != nil {
		return true, err
	}
	end := "unknown"
	a.mu.Lock()
	if l := a.st.Last; l != nil && l.EndEpoch > 0 {
		end = strconv.FormatUint(l.EndEpoch, 10)
	}
	a.mu.Unlock()
	a.log.Info("brain restored", "blob", blob, "bundle_hash", r.BundleHash, "files", r.Files,
		"bytes", r.Bytes, "blob_bytes", r.BlobSize, "end_epoch", end, "download", r.Download.Round(time.Millisecond),
		"unpack", r.Unpack.Round(time.Millisecond))
	a.deps.Observer.Restore(a.cfg.ID, "restored", &r)
	return true, nil
}

// noteRestore logs and keeps (Status.Restore) what a restore reported
// beyond its success: never silent.
func (a *Agent) noteRestore(r snapshot.Restored) {
	for _, s := range r.Skipped {
		a.log.Warn("restore skipped an archive entry", "entry", s)
	}
	for _, s := range r.Stripped {
		a.log.Warn("restore stripped a special bit", "file", s)
	}
	for _, s := range r.Notes {
		a.log.Warn("restore", "note", s)
	}
	for _, s := range r.Unchecked {
		a.log.Warn("restore NOT VERIFIED", "unchecked", s)
	}
	a.mu.Lock()
	a.st.Restored = savedRestore(r, a.deps.Now()) // saved with the restored snapshot
	a.mu.Unlock()
}

// findSnapshot returns the blob to restore and where its id came from, or
// "" when there is none (Latest decides).
func (a *Agent) findSnapshot(ctx context.Context) (blob, source string, err error) {
	var p Pointer
	if a.cfg.ENSName != "" {
		p = a.deps.Pointer
	}
	return Latest(ctx, p, a.cfg.ENSName, func() (*state.AgentState, error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.st.Clone(), nil
	})
}

// afterRestore records the restored snapshot: receipts re-imported, the
// lock naming the restored blob, the local state pointing at it.
func (a *Agent) afterRestore(ctx context.Context, r snapshot.Restored, fromENS bool) error {
	rpath := filepath.Join(a.cfg.BrainDir, snapshot.ReceiptsFile)
	if f, err := os.Open(rpath); err == nil && a.deps.Receipts != nil {
		rep, err := a.deps.Receipts.ImportRouted(ctx, f, a.cfg.ImportPolicy, a.cfg.Trusted, a.cfg.ReceiptRoute)
		f.Close()
		if err != nil {
			// The brain is in place; its receipts.ndjson is rewritten from
			// the log at the next snapshot, so say loudly what is missing.
			a.log.Error("receipts in the restored brain were not imported", "error", err)
		} else {
			a.log.Info("receipts re-imported", "imported", rep.Imported, "duplicates", rep.Duplicates,
				"quarantined", rep.Quarantined, "dropped", rep.Dropped)
		}
	}

	lockPath := filepath.Join(a.cfg.BrainDir, bundlelock.FileName)
	lock := &bundlelock.Lock{}
	if r.Lock != nil {
		lock = r.Lock.Clone()
	}
	if !r.Verified {
		// An unverified restore: the lock records what the files are.
		lock.Record(r.BundleHash.String(), a.deps.Now().UnixMilli())
	}
	created := time.UnixMilli(lock.LastUpdated())
	if lock.LastUpdated() == 0 {
		created = a.deps.Now()
	}
	end := a.restoredEndEpoch(r)
	lock.Uploaded(bundlelock.LineageEntry{
		BlobID:     r.BlobID,
		BundleHash: r.BundleHash.String(),
		CreatedAt:  created.UnixMilli(),
		Size:       r.BlobSize,
		EndEpoch:   end, // 0 only when nothing records it
	})
	if err := bundlelock.Write(lockPath, lock); err != nil {
		return fmt.Errorf("record restored blob in lock: %w", err)
	}

	err := a.head.Restored(state.Snapshot{
		BlobID:     r.BlobID,
		BundleHash: r.BundleHash.String(),
		Version:    lock.Version(),
		Size:       r.BlobSize,
		EndEpoch:   end,
		CreatedAt:  created,
	}, fromENS)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.st.Origin = "restored"
	a.startedAs = "restored"
	return errors.Join(err, a.saveStateLocked())
}

// restoredEndEpoch is the best known end epoch of a restored snapshot:
// what this agent recorded when it uploaded it (its state's last
// snapshot), else what the snapshot records of its packs (v3: the earliest
// end of the packs its commit lists, which its head pack, written last,
// outlives); 0 when neither says (a v1/v2 blob does not record its own).
func (a *Agent) restoredEndEpoch(r snapshot.Restored) uint64 {
	a.mu.Lock()
	last := a.st.Last
	a.mu.Unlock()
	if last != nil && last.BlobID == r.BlobID && last.EndEpoch > 0 {
		return last.EndEpoch
	}
	return r.EndEpoch
}

// fillSeed copies files from the seed directory that are missing in the
// brain. It never overwrites: a restored brain wins over the seed.
func (a *Agent) fillSeed() error {
	if a.cfg.SeedDir == "" {
		return nil
	}
	if err := os.MkdirAll(a.cfg.BrainDir, snapshot.RootMode); err != nil {
		return fmt.Errorf("create brain dir: %w", err)
	}
	copied := 0
	err := filepath.WalkDir(a.cfg.SeedDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(a.cfg.SeedDir, p)
		if err != nil || rel == "." {
			return err
		}
		dst := filepath.Join(a.cfg.BrainDir, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.Mkdir(dst, info.Mode().Perm()); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			return nil
		case !d.Type().IsRegular():
			return nil // symlinks and special files are not brain content
		}
		if _, err := os.Lstat(dst); err == nil {
			return nil
		}
		if err := copyNew(p, dst, info.Mode().Perm()); err != nil {
			return err
		}
		copied++
		return nil
	})
	if err != nil {
		return fmt.Errorf("fill from seed %s: %w", a.cfg.SeedDir, err)
	}
	if copied > 0 {
		a.log.Info("filled missing files from the seed", "files", copied, "seed", a.cfg.SeedDir)
	}
	return nil
}

// copyNew copies src to dst, which must not exist.
func copyNew(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(dst)
		return err
	}
	if err := out.Chmod(perm); err != nil { // umask must not change the mode
		out.Close()
		return err
	}
	return out.Close()
}

func (a *Agent) noteHash(res hash.Result) {
	a.mu.Lock()
	a.lastHash, a.lastHashAt = res.Digest, a.deps.Now()
	a.mu.Unlock()
}
