package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermesd/hermesd/internal/atomicfile"
	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/tarball"
)

var (
	// ErrHashMismatch means the restored files do not hash to the bundle
	// hash their own lock records: the snapshot is not what it claims.
	ErrHashMismatch = errors.New("restored files do not match the snapshot's bundle hash")
	// ErrNoLock means the snapshot carries no bundle.lock.json, so there is
	// nothing to verify it against.
	ErrNoLock = errors.New("snapshot has no bundle.lock.json")
	// ErrNotEmpty means the restore target already holds files.
	ErrNotEmpty = errors.New("restore target is not empty")
	// ErrWrongAgent means the blob decrypts under another configured
	// agent's identity.
	ErrWrongAgent = errors.New("blob belongs to another agent")
)

// Limits bound what a restore accepts from an untrusted blob.
type Limits struct {
	MaxEntries   int
	MaxEntrySize int64
	MaxTotalSize int64
}

// DefaultLimits are generous for a brain and small for an attack.
var DefaultLimits = Limits{MaxEntries: 1_000_000, MaxEntrySize: 64 << 30, MaxTotalSize: 256 << 30}

// Restorer rebuilds brain directories from blobs.
type Restorer struct {
	Store    BlobStore
	SpoolDir string
	Key      cipher.Key
	Identity string
	// Others are the identities of the other configured agents; when a
	// blob does not decrypt, they are tried so the error can say whose
	// blob it is.
	Others []string
	Limits Limits
	Log    *slog.Logger
}

// Restored describes a completed restore.
type Restored struct {
	BlobID     string
	BundleHash hash.Digest
	Lock       *bundlelock.Lock
	Files      int   // hashed files
	Bytes      int64 // plaintext bytes of hashed files
	BlobSize   int64
	Skipped    []string // archive entries skipped (links, devices), with reasons
	Download   time.Duration
	Unpack     time.Duration // decrypt + extract + verify + sync + rename
}

// Restore downloads blobID and installs it as target, which must not exist
// or must hold no regular files. On any error target is left as it was.
func (r *Restorer) Restore(ctx context.Context, blobID, target string) (Restored, error) {
	if err := checkEmpty(target); err != nil {
		return Restored{}, err
	}
	spool, err := os.CreateTemp(r.SpoolDir, "restore-*.blob")
	if err != nil {
		return Restored{}, fmt.Errorf("create spool: %w", err)
	}
	spool.Close()
	defer os.Remove(spool.Name())

	start := time.Now()
	rr, err := r.Store.ReadToFile(ctx, blobID, spool.Name())
	if err != nil {
		return Restored{}, fmt.Errorf("download %s: %w", blobID, err)
	}
	res := Restored{BlobID: blobID, BlobSize: rr.Size, Download: time.Since(start)}

	start = time.Now()
	got, err := r.RestoreFile(ctx, spool.Name(), target)
	if err != nil {
		return Restored{}, err
	}
	got.BlobID, got.BlobSize, got.Download = blobID, res.BlobSize, res.Download
	got.Unpack = time.Since(start)
	return got, nil
}

// RestoreFile installs the encrypted snapshot in the file blobPath as
// target, verifying it on the way.
func (r *Restorer) RestoreFile(ctx context.Context, blobPath, target string) (Restored, error) {
	if err := checkEmpty(target); err != nil {
		return Restored{}, err
	}
	parent := filepath.Dir(target)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return Restored{}, fmt.Errorf("create parent of %s: %w", target, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(target)+".restore-")
	if err != nil {
		return Restored{}, fmt.Errorf("create temp dir: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			os.RemoveAll(tmp)
		}
	}()

	res, err := r.unpack(ctx, blobPath, tmp)
	if err != nil {
		return Restored{}, err
	}
	if err := syncTree(tmp); err != nil {
		return Restored{}, err
	}
	if err := replaceEmpty(tmp, target); err != nil {
		return Restored{}, err
	}
	committed = true
	if err := atomicfile.SyncDir(parent); err != nil {
		return Restored{}, err
	}
	return res, nil
}

// unpack decrypts and extracts blobPath into dir and verifies the result.
func (r *Restorer) unpack(ctx context.Context, blobPath, dir string) (Restored, error) {
	f, err := os.Open(blobPath)
	if err != nil {
		return Restored{}, fmt.Errorf("open blob: %w", err)
	}
	defer f.Close()
	plain, err := cipher.Decrypt(f, r.Key, r.Identity)
	if err != nil {
		return Restored{}, r.explainDecrypt(blobPath, err)
	}
	lim := r.Limits
	if lim == (Limits{}) {
		lim = DefaultLimits
	}
	man, err := tarball.Extract(ctx, plain, dir, tarball.ExtractOptions{
		MaxEntries:   lim.MaxEntries,
		MaxEntrySize: lim.MaxEntrySize,
		MaxTotalSize: lim.MaxTotalSize,
	})
	if err != nil {
		if errors.Is(err, cipher.ErrAuth) {
			return Restored{}, fmt.Errorf("decrypt: %w", err)
		}
		return Restored{}, fmt.Errorf("extract: %w", err)
	}
	// The tar ended; the final segment must still authenticate and nothing
	// may follow it. Only then is the restore allowed to commit.
	if n, err := io.Copy(io.Discard, plain); err != nil {
		return Restored{}, fmt.Errorf("decrypt: %w", err)
	} else if n > 0 {
		return Restored{}, fmt.Errorf("extract: %d bytes of data after the end of the archive", n)
	}

	lock, err := bundlelock.Read(filepath.Join(dir, bundlelock.FileName))
	if errors.Is(err, os.ErrNotExist) {
		return Restored{}, ErrNoLock
	}
	if err != nil {
		return Restored{}, fmt.Errorf("restored lock: %w", err)
	}
	want, err := hash.ParseDigest(lock.BundleHash())
	if err != nil {
		return Restored{}, fmt.Errorf("restored lock: bundleHash %q: %w", lock.BundleHash(), err)
	}
	files := toHashFiles(man)
	got := hash.FromFiles(files)
	if got != want {
		return Restored{}, fmt.Errorf("%w: files hash to %s, lock says %s", ErrHashMismatch, got, want)
	}
	res := Restored{BundleHash: got, Lock: lock}
	for _, fl := range files {
		if !hash.Excluded(fl.Path) {
			res.Files++
			res.Bytes += fl.Size
		}
	}
	for _, w := range man.Skipped {
		res.Skipped = append(res.Skipped, w.Path+" ("+w.Reason+")")
	}
	return res, nil
}

// explainDecrypt turns a first-segment authentication failure into "this is
// agent X's blob" when another configured identity opens it.
func (r *Restorer) explainDecrypt(blobPath string, err error) error {
	if !errors.Is(err, cipher.ErrAuthFirstSegment) || len(r.Others) == 0 {
		return fmt.Errorf("decrypt: %w", err)
	}
	f, ferr := os.Open(blobPath)
	if ferr != nil {
		return fmt.Errorf("decrypt: %w", err)
	}
	defer f.Close()
	owner, perr := cipher.ProbeIdentity(f, r.Key, r.Others)
	if perr != nil || owner == "" {
		return fmt.Errorf("decrypt: %w", err)
	}
	return fmt.Errorf("%w: it decrypts as %q, not as %q", ErrWrongAgent, owner, r.Identity)
}

// checkEmpty accepts a missing target or a directory with no regular files
// (empty subdirectories, as a runtime's mkdir -p leaves them, are fine).
func checkEmpty(target string) error {
	st, err := os.Lstat(target)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("restore target: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrNotEmpty, target)
	}
	has, err := HasFiles(target)
	if err != nil {
		return err
	}
	if has {
		return fmt.Errorf("%w: %s holds files", ErrNotEmpty, target)
	}
	return nil
}

// HasFiles reports whether dir (or anything below it) holds a regular file
// or a symlink.
func HasFiles(dir string) (bool, error) {
	found := false
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("scan %s: %w", dir, err)
	}
	return found, nil
}

// replaceEmpty renames tmp over target, which is missing or a tree of empty
// directories.
func replaceEmpty(tmp, target string) error {
	if _, err := os.Lstat(target); err == nil {
		// Re-check right before removing: never delete a file.
		if has, err := HasFiles(target); err != nil || has {
			return fmt.Errorf("%w: %s gained files during the restore", ErrNotEmpty, target)
		}
		if err := removeEmptyDirs(target); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, target); err != nil {
		return fmt.Errorf("move restored brain into place: %w", err)
	}
	return nil
}

// removeEmptyDirs removes a tree of directories bottom-up with rmdir, which
// fails rather than deletes anything that appeared meanwhile.
func removeEmptyDirs(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("scan %s: %w", root, err)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := unix.Rmdir(dirs[i]); err != nil {
			return fmt.Errorf("remove empty directory %s: %w", dirs[i], err)
		}
	}
	return nil
}

// syncTree makes everything written under dir durable with one syncfs(2)
// instead of an fsync per file.
func syncTree(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("sync restored files: %w", err)
	}
	return nil
}
