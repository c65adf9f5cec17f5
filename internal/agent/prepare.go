package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

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
// and the publication state reconciled with the chain.
func (a *Agent) Prepare(ctx context.Context) error {
	a.removeCrashTemps()
	created, err := a.restoreIfNeeded(ctx)
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
	res, err := a.cache.Rescan(ctx)
	if err != nil {
		a.setPhase(PhaseFailed, err.Error())
		return fmt.Errorf("hash brain: %w", err)
	}
	a.noteHash(res)
	if err := a.reconcile(ctx); err != nil {
		// Not fatal: snapshots continue, publishing waits for a fix.
		a.log.Error("ENS pointer not reconciled; publishing held", "error", err)
	}
	a.setPhase(PhaseReady, "")
	return nil
}

// removeCrashTemps deletes the temporary files of hermesd's own atomic
// writes into the brain (bundle.lock.json, receipts.ndjson) that a crash
// between create and rename left behind. They are not brain content: the
// watcher ignores them (isOwnFile), but the bundle hash would not, and
// every later snapshot would carry them.
func (a *Agent) removeCrashTemps() {
	for _, base := range []string{bundlelock.FileName, snapshot.ReceiptsFile} {
		// The pattern of atomicfile.Create's temporary names.
		m, _ := filepath.Glob(filepath.Join(a.cfg.BrainDir, "."+base+".tmp-*"))
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
func (a *Agent) restoreIfNeeded(ctx context.Context) (bool, error) {
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
	if blob == "" {
		if err := os.MkdirAll(a.cfg.BrainDir, 0o755); err != nil {
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

	a.log.Info("brain missing; restoring", "blob", blob, "from", source)
	r, err := a.restorer.Restore(ctx, blob, a.cfg.BrainDir)
	if err != nil {
		a.deps.Observer.Restore(a.cfg.ID, "failed", nil)
		return false, fmt.Errorf("%w: blob %s (from %s): %w", ErrRestoreFailed, blob, source, err)
	}
	for _, s := range r.Skipped {
		a.log.Warn("restore skipped an archive entry", "entry", s)
	}
	if err := a.afterRestore(ctx, r, source == "ens"); err != nil {
		return true, err
	}
	a.log.Info("brain restored", "blob", blob, "bundle_hash", r.BundleHash, "files", r.Files,
		"bytes", r.Bytes, "blob_bytes", r.BlobSize, "download", r.Download.Round(time.Millisecond),
		"unpack", r.Unpack.Round(time.Millisecond))
	a.deps.Observer.Restore(a.cfg.ID, "restored", &r)
	return true, nil
}

// findSnapshot returns the blob to restore and where its id came from, or
// "" when there is none.
func (a *Agent) findSnapshot(ctx context.Context) (blob, source string, err error) {
	if a.cfg.ENSName != "" && a.deps.Pointer != nil {
		v, err := a.deps.Pointer.Read(ctx, a.cfg.ENSName)
		switch {
		case err == nil:
			return v, "ens", nil
		case a.deps.ErrNoPointer != nil && errors.Is(err, a.deps.ErrNoPointer):
			// No record: a fresh agent, unless the local state knows a
			// snapshot (published nowhere yet).
		default:
			return "", "", fmt.Errorf("read ENS pointer of %s: %w", a.cfg.ENSName, err)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.st.Pending != nil {
		return a.st.Pending.Value, "local state (unpublished)", nil
	}
	if a.st.Last != nil {
		return a.st.Last.BlobID, "local state", nil
	}
	return "", "", nil
}

// afterRestore records the restored snapshot: receipts re-imported, the
// lock naming the restored blob, the local state pointing at it.
func (a *Agent) afterRestore(ctx context.Context, r snapshot.Restored, fromENS bool) error {
	rpath := filepath.Join(a.cfg.BrainDir, snapshot.ReceiptsFile)
	if f, err := os.Open(rpath); err == nil {
		rep, err := a.receipts.Import(ctx, f, a.cfg.ImportPolicy, a.cfg.Trusted)
		f.Close()
		if err != nil {
			// The brain is in place; the receipts stay in the brain's
			// receipts.ndjson and the next snapshot keeps them there only
			// if they are in the log, so say so loudly.
			a.log.Error("receipts in the restored brain were not imported", "error", err)
		} else {
			a.log.Info("receipts re-imported", "imported", rep.Imported, "duplicates", rep.Duplicates,
				"flagged", rep.Flagged, "quarantined", rep.Quarantined)
		}
	}

	lockPath := filepath.Join(a.cfg.BrainDir, bundlelock.FileName)
	lock := r.Lock.Clone()
	created := time.UnixMilli(lock.LastUpdated())
	if lock.LastUpdated() == 0 {
		created = a.deps.Now()
	}
	lock.Uploaded(bundlelock.LineageEntry{
		BlobID:     r.BlobID,
		BundleHash: r.BundleHash.String(),
		CreatedAt:  created.UnixMilli(),
		Size:       r.BlobSize,
		// The end epoch is not part of the blob; 0 means unknown.
	})
	if err := bundlelock.Write(lockPath, lock); err != nil {
		return fmt.Errorf("record restored blob in lock: %w", err)
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	a.st.Last = &state.Snapshot{
		BlobID:     r.BlobID,
		BundleHash: r.BundleHash.String(),
		Version:    lock.Version(),
		Size:       r.BlobSize,
		CreatedAt:  created,
	}
	if fromENS {
		a.st.Published = r.BlobID
		a.st.PublishedAt = a.deps.Now()
		a.st.Pending = nil
	}
	a.st.Origin = "restored"
	a.startedAs = "restored"
	return a.saveStateLocked()
}

// fillSeed copies files from the seed directory that are missing in the
// brain. It never overwrites: a restored brain wins over the seed.
func (a *Agent) fillSeed() error {
	if a.cfg.SeedDir == "" {
		return nil
	}
	if err := os.MkdirAll(a.cfg.BrainDir, 0o755); err != nil {
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

// reconcile learns what the chain says when the local state does not know
// (first start, or a wiped state directory): a record naming one of this
// brain's own snapshots is adopted; a record naming an unknown blob means
// another writer, and publishing is held until an operator decides.
func (a *Agent) reconcile(ctx context.Context) error {
	if a.cfg.ENSName == "" || a.deps.Pointer == nil {
		return nil
	}
	a.mu.Lock()
	known := a.st.Published != "" || !a.st.PublishedAt.IsZero()
	a.mu.Unlock()
	if known {
		return nil
	}
	v, err := a.deps.Pointer.Read(ctx, a.cfg.ENSName)
	if a.deps.ErrNoPointer != nil && errors.Is(err, a.deps.ErrNoPointer) {
		v, err = "", nil
	}
	if err != nil {
		return fmt.Errorf("read ENS pointer of %s: %w", a.cfg.ENSName, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if v == "" || a.knownBlob(v) {
		a.st.Published = v
		a.st.PublishedAt = a.deps.Now()
		if a.st.Pending != nil {
			a.st.Pending.Expected = v
		}
		return a.saveStateLocked()
	}
	a.conflict = fmt.Sprintf("%s points at %s, which is not a snapshot of this brain; another writer? "+
		"restore it (move the brain away and restart) or overwrite it with 'hermesd pointer set --force'",
		a.cfg.ENSName, v)
	return errors.New(a.conflict)
}

func (a *Agent) noteHash(res hash.Result) {
	a.mu.Lock()
	a.lastHash, a.lastHashAt = res.Digest, a.deps.Now()
	a.mu.Unlock()
}
