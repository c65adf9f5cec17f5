package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hermesd/hermesd/internal/atomicfile"
	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/diskspace"
	"github.com/hermesd/hermesd/internal/fsys"
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
	// ErrHostile matches an archive the extractor refused: an unsafe or
	// unsupported name, a duplicate, a sparse entry, a limit exceeded.
	ErrHostile = errors.New("snapshot archive refused")
)

// RootMode is the mode of a brain directory hermesd creates, and of a
// restored one when the snapshot does not record its own (v3 commits and
// hermesd's archives before 2026-11-27): what the reference runtime's
// `mkdir -p` gives it. (A temporary directory is created 0700 and would
// keep that mode otherwise.)
const RootMode fs.FileMode = 0o755

// Limits bound what a restore accepts from an untrusted blob.
type Limits struct {
	MaxEntries   int
	MaxEntrySize int64
	MaxTotalSize int64
}

// DefaultMaxEntries bounds the entries of a restored archive.
const DefaultMaxEntries = 1_000_000

// limitsFor bounds an extraction by what the blob makes plausible: the
// extractor writes no more file bytes than it reads (sparse entries are
// refused), and the plaintext of a blob is never larger than the blob, so
// the blob's size bounds everything written.
func (l Limits) limitsFor(blobSize int64) Limits {
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	if l.MaxTotalSize <= 0 || l.MaxTotalSize > blobSize {
		l.MaxTotalSize = max(blobSize, 1)
	}
	if l.MaxEntrySize <= 0 || l.MaxEntrySize > l.MaxTotalSize {
		l.MaxEntrySize = l.MaxTotalSize
	}
	return l
}

// Restored describes a completed restore.
type Restored struct {
	Format Format
	// BlobID is the head reference restored (docs/format-v3.md §14): the
	// one asked for, with, for a v3 head, its commit id (read from the
	// head when the reference had none).
	BlobID     string
	BundleHash hash.Digest
	// Verified is false only for an unverified restore (see
	// RestoreOptions.Unverified) that could not check the bundle hash;
	// BundleHash is then what the files hash to.
	Verified bool
	Lock     *bundlelock.Lock // nil when the snapshot holds none (unverified restores)
	Files    int              // hashed files
	Bytes    int64            // plaintext bytes of hashed files
	BlobSize int64            // the blob (v3: the head pack)
	// Taken is when the snapshot began reading the brain (v3: its
	// commit's time; v1/v2: its lock's lastUpdated, written before the
	// archive), zero when not recorded: a file that differs from the
	// snapshot changed at or after it.
	Taken time.Time
	// EndEpoch is the earliest end epoch of the packs a v3 snapshot's
	// commit lists besides its head (0: none listed, or v1/v2, whose
	// blob does not record its own): a bound the snapshot expires by at
	// the latest, as its head pack, written last, ends after them.
	EndEpoch uint64
	// Downloaded and Ranges count what a v3 restore read: only the
	// objects it needed, in closed range reads.
	Downloaded int64
	Ranges     int64
	Skipped    []string // archive entries skipped (fifos, devices), with reasons
	// Stripped lists the files restored without the setuid or setgid bit
	// the snapshot records (fsys.Restorable), one line each.
	Stripped []string
	// Links counts the files restored as another name of a file (hard
	// links).
	Links int
	// Symlinks counts the symlinks restored, as symlinks.
	Symlinks int
	// Notes says what else the restore did that the operator should know
	// (a directory's mode kept narrower than the snapshot's, a time the
	// file system could not hold).
	Notes []string
	// Unchecked says what an unverified restore could not check.
	Unchecked []string
	// Warnings say what nothing bound to the reference restored: a
	// reference without a digest, a blob taken on the aggregator's word.
	Warnings []string
	Source   string // where the blob came from
	Attempts int    // download attempts
	Download time.Duration
	Unpack   time.Duration // decrypt + extract + verify + sync + rename

	root rootMeta // the brain directory's own, from the snapshot (fill)
}

// rootMeta is what a snapshot records of the brain directory itself.
type rootMeta struct {
	known bool
	mode  fs.FileMode // permission and special bits
	timed bool        // mtime is recorded (the epoch is a time like any other)
	mtime int64       // ns since the epoch
}

// stripped formats one file restored without recorded special bits.
func stripped(path string, recorded, restored fs.FileMode) string {
	return fmt.Sprintf("%s: %s not restored (recorded %04o, restored %04o)", path,
		fsys.SpecialString(recorded&^restored), fsys.UnixMode(recorded), fsys.UnixMode(restored))
}

// narrowed formats one directory restored without the o+w it records.
func narrowed(path string, recorded, restored fs.FileMode) string {
	return fmt.Sprintf("kept %s at mode %04o: the snapshot records %04o, writable by everyone, which a directory of a brain may not be unless allow_unsafe_dirs is set",
		path, fsys.UnixMode(restored), fsys.UnixMode(recorded))
}

// retimed formats one entry restored with another time than recorded:
// kept is what the file system holds, or zero when the time was not set.
func retimed(path string, recorded, kept time.Time) string {
	if kept.IsZero() {
		return fmt.Sprintf("%s keeps the time of the restore: its recorded time %s is beyond what hermesd can set (1678 to 2262)", path, recorded.UTC().Format(time.RFC3339Nano))
	}
	return fmt.Sprintf("%s: recorded time %s, the file system holds %s (the nearest in its range)", path,
		recorded.UTC().Format(time.RFC3339Nano), kept.UTC().Format(time.RFC3339Nano))
}

// maxNotes bounds the lines of one kind a restore reports: a hostile
// snapshot may hold a million directories writable by everyone.
const maxNotes = 20

// addNotes appends lines to notes, at most maxNotes of them, then how many
// more there were.
func addNotes(notes []string, lines []string) []string {
	if len(lines) > maxNotes {
		more := len(lines) - maxNotes
		lines = append(lines[:maxNotes:maxNotes], fmt.Sprintf("... and %d more like the line above", more))
	}
	return append(notes, lines...)
}

// RestoreOptions adjust a restore.
type RestoreOptions struct {
	// Unverified installs a snapshot without a bundle.lock.json, or whose
	// lock the files do not match (a reference-runtime snapshot taken
	// while its brain was changing), instead of refusing it. The blob must
	// still decrypt and authenticate; Restored says what was not checked
	// and what the files hash to. Never used by the daemon. (A v3
	// snapshot is always verified: its commit is the claim.)
	Unverified bool
	// Path restores only this file or directory of a v3 snapshot
	// ('/'-separated, relative to the brain), every object and file
	// verified; "" restores everything.
	Path string
	// PublicRoot keeps the modes that let everyone write of the brain
	// directory and of every directory in it, when the snapshot records
	// them (config allow_unsafe_dirs); without it the restore clears o+w
	// and says so in Notes.
	PublicRoot bool
}

// StageError says at which stage of a restore an error happened:
// "download" (nothing was written but the spool) or "unpack" (decrypt,
// extract, verify; the target is untouched).
type StageError struct {
	Stage string
	Err   error
}

func (e *StageError) Error() string { return e.Err.Error() }
func (e *StageError) Unwrap() error { return e.Err }

// Restore downloads the snapshot head names (a head reference,
// docs/format-v3.md §14: a blob or patch id, with a v3 head's digest) and
// installs it as target, which must not exist or must hold no regular
// files. On any error target is left as it was. Bytes that are not the
// ones the reference names fail with an error matching
// headref.ErrMismatch before anything is decrypted into target.
func (p *Pipeline) Restore(ctx context.Context, head, target string) (Restored, error) {
	return p.RestoreWith(ctx, head, target, RestoreOptions{})
}

// RestoreWith is Restore with options. The blob's first bytes say its
// format: v3 is read with range reads of only the objects needed, v1 and
// v2 are downloaded whole.
func (p *Pipeline) RestoreWith(ctx context.Context, head, target string, opts RestoreOptions) (Restored, error) {
	ref, err := parseRef(head)
	if err != nil {
		return Restored{}, err
	}
	blobID := ref.ID
	if err := checkEmpty(target); err != nil {
		return Restored{}, err
	}
	f, err := p.BlobFormat(ctx, blobID)
	switch {
	case err != nil && errors.Is(err, ErrBlobNotFound):
		return Restored{}, &StageError{"download", err}
	case err != nil && (errors.Is(err, cipher.ErrUnknownFormat) || errors.Is(err, cipher.ErrUnsupportedVersion)):
		return Restored{}, &StageError{"unpack", fmt.Errorf("blob %s: %w", blobID, err)}
	case err != nil:
		return Restored{}, &StageError{"download", err}
	case f == FormatV3:
		return p.restoreV3(ctx, ref, target, opts)
	case ref.Bound:
		return Restored{}, &StageError{"unpack", notV3(ref, f)}
	case opts.Path != "":
		return Restored{}, fmt.Errorf("%w: blob %s is %s; only v3 snapshots restore a single path", ErrNotV3, blobID, f)
	}
	return p.restoreWhole(ctx, blobID, target, opts)
}

// restoreWhole restores a v1 or v2 blob: download, decrypt, extract,
// verify, rename into place.
func (p *Pipeline) restoreWhole(ctx context.Context, blobID, target string, opts RestoreOptions) (Restored, error) {
	spool, err := os.CreateTemp(p.SpoolDir, "restore-*.blob")
	if err != nil {
		return Restored{}, fmt.Errorf("create spool: %w", err)
	}
	spool.Close()
	defer os.Remove(spool.Name())

	start := time.Now()
	got, err := p.Store.Get(ctx, blobID, spool.Name(), 0)
	if err != nil {
		return Restored{}, &StageError{"download", fmt.Errorf("download %s: %w", blobID, err)}
	}
	download := time.Since(start)
	// The store checked the whole blob against its id; a patch it could
	// not check.
	warning := wholeWarning(blobID)

	start = time.Now()
	res, err := p.restoreFile(ctx, spool.Name(), got.Size, target, opts)
	if warning != "" {
		res.Warnings = append(res.Warnings, warning)
	}
	res.BlobID, res.BlobSize, res.Download = blobID, got.Size, download
	res.Downloaded, res.Ranges = got.Size, 1
	res.Source, res.Attempts = got.Source, got.Attempts
	res.Unpack = time.Since(start)
	if err != nil {
		return res, &StageError{"unpack", err}
	}
	return res, nil
}

// RestoreFile installs the encrypted snapshot in the file blobPath as
// target, verifying it on the way.
func (p *Pipeline) RestoreFile(ctx context.Context, blobPath, target string, opts RestoreOptions) (Restored, error) {
	st, err := os.Stat(blobPath)
	if err != nil {
		return Restored{}, fmt.Errorf("open blob: %w", err)
	}
	return p.restoreFile(ctx, blobPath, st.Size(), target, opts)
}

func (p *Pipeline) restoreFile(ctx context.Context, blobPath string, size int64, target string, opts RestoreOptions) (Restored, error) {
	if err := checkEmpty(target); err != nil {
		return Restored{}, err
	}
	// The plaintext is never larger than the blob.
	return intoPlace(target, size, opts.PublicRoot, func(tmp string) (Restored, error) {
		return p.unpack(ctx, blobPath, size, tmp, opts)
	})
}

// intoPlace is the one way a restore reaches its target: fill builds the
// brain in a temporary directory beside it (after a check that need bytes
// fit; a v3 fill checks its own exact need), and only a complete, verified tree is synced and renamed into
// place; anything else is removed and the target is left as it was.
//
// The brain directory gets the mode and time the snapshot records (else
// RootMode), except that an existing (empty) target directory is never
// widened: a permission bit it lacks stays off, and Notes says so. A brain
// kept 0700 does not come back world-readable because a snapshot or an
// older format says 0755. Nor does it come back writable by everyone
// unless publicRoot (RestoreOptions.PublicRoot) allows it.
func intoPlace(target string, need int64, publicRoot bool, fill func(tmp string) (Restored, error)) (Restored, error) {
	parent := filepath.Dir(target)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return Restored{}, fmt.Errorf("create parent of %s: %w", target, err)
	}
	if err := diskspace.Check(parent, need); err != nil {
		return Restored{}, fmt.Errorf("restore into %s: %w", target, err)
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
	res, err := fill(tmp)
	if err != nil {
		return Restored{}, err
	}
	mode := RootMode
	if res.root.known {
		mode = res.root.mode
	}
	recorded := mode
	if st, err := os.Lstat(target); err == nil && st.IsDir() {
		if have := st.Mode().Perm(); mode.Perm()&^have != 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("kept %s at mode %04o: the snapshot's brain directory is %04o, and an existing directory is never widened",
				target, fsys.UnixMode(mode&^(mode.Perm()&^have)), fsys.UnixMode(mode)))
			mode &^= mode.Perm() &^ have
		}
	}
	if mode&0o002 != 0 && !publicRoot {
		// A brain directory anyone may write to is refused before every
		// snapshot (anyone could plant files in them: allow_unsafe_dirs);
		// a restore does not make one.
		res.Notes = append(res.Notes, fmt.Sprintf("kept %s at mode %04o: the snapshot's brain directory is %04o, writable by everyone, which a brain directory may not be unless allow_unsafe_dirs is set",
			target, fsys.UnixMode(mode&^0o002), fsys.UnixMode(recorded)))
		mode &^= 0o002
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return Restored{}, err
	}
	if res.root.timed {
		// After every entry is made in it (its own time moved with each).
		if err := os.Chtimes(tmp, time.Time{}, time.Unix(0, res.root.mtime)); err != nil {
			return Restored{}, err
		}
		if !fsys.CommonTime(res.root.mtime) {
			if st, err := os.Lstat(tmp); err == nil && st.ModTime().UnixNano() != res.root.mtime {
				res.Notes = append(res.Notes, retimed(target, time.Unix(0, res.root.mtime), st.ModTime()))
			}
		}
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
func (p *Pipeline) unpack(ctx context.Context, blobPath string, size int64, dir string, opts RestoreOptions) (Restored, error) {
	f, err := os.Open(blobPath)
	if err != nil {
		return Restored{}, fmt.Errorf("open blob: %w", err)
	}
	defer f.Close()
	var prefix [formatPrefixLen]byte
	n, _ := f.ReadAt(prefix[:], 0)
	format, _ := DetectFormat(prefix[:n]) // decryptStream refuses what is neither v1, v2 nor Seal
	plain, err := p.decryptStream(ctx, f)
	if err != nil {
		return Restored{}, p.explainDecrypt(blobPath, err)
	}
	lim := p.Limits.limitsFor(size)
	man, err := tarball.Extract(ctx, plain, dir, tarball.ExtractOptions{
		MaxEntries:   lim.MaxEntries,
		MaxEntrySize: lim.MaxEntrySize,
		MaxTotalSize: lim.MaxTotalSize,
		PublicDirs:   opts.PublicRoot,
	})
	if err != nil {
		if isCipherErr(err) {
			return Restored{}, fmt.Errorf("decrypt: %w", err)
		}
		if ctx.Err() != nil || errors.Is(err, fs.ErrPermission) || errors.Is(err, diskspace.ErrNoSpace) {
			return Restored{}, fmt.Errorf("extract: %w", err)
		}
		return Restored{}, fmt.Errorf("%w: %w", ErrHostile, err)
	}
	// The tar ended; the final segment must still authenticate and nothing
	// may follow it. Only then is the restore allowed to commit.
	if n, err := io.Copy(io.Discard, plain); err != nil {
		return Restored{}, fmt.Errorf("decrypt: %w", err)
	} else if n > 0 {
		return Restored{}, fmt.Errorf("%w: %d bytes of data after the end of the archive", ErrHostile, n)
	}

	files := toHashFiles(man)
	got := hash.FromFiles(files)
	res := Restored{Format: format, BundleHash: got, Verified: true}
	for _, fl := range files {
		if !hash.Excluded(fl.Path) {
			res.Files++
			res.Bytes += fl.Size
		}
	}
	for _, w := range man.Skipped {
		res.Skipped = append(res.Skipped, w.Path+" ("+w.Reason+")")
	}
	for _, st := range man.Stripped {
		res.Stripped = append(res.Stripped, stripped(st.Path, st.Mode, st.Restored))
	}
	var notes []string
	for _, n := range man.Narrowed {
		notes = append(notes, narrowed(n.Path, n.Mode, n.Restored))
	}
	res.Notes = addNotes(res.Notes, notes)
	notes = notes[:0]
	for _, r := range man.Retimed {
		notes = append(notes, retimed(r.Path, r.Recorded, r.Kept))
	}
	res.Notes = addNotes(res.Notes, notes)
	res.Links, res.Symlinks = man.Links, len(man.Symlinks)
	if man.Root != nil {
		res.root = rootMeta{known: true, mode: man.Root.Mode, timed: man.Root.HasMtime, mtime: man.Root.Mtime}
	}

	lock, err := bundlelock.Read(filepath.Join(dir, bundlelock.FileName))
	switch {
	case errors.Is(err, os.ErrNotExist):
		err = ErrNoLock
	case err != nil:
		err = fmt.Errorf("%w: restored lock: %w", ErrHashMismatch, err)
	default:
		res.Lock = lock
		if ms := lock.LastUpdated(); ms > 0 {
			res.Taken = time.UnixMilli(ms)
		}
		want, perr := hash.ParseDigest(lock.BundleHash())
		switch {
		case perr != nil:
			err = fmt.Errorf("%w: restored lock: bundleHash %q: %w", ErrHashMismatch, lock.BundleHash(), perr)
		case got != want:
			err = fmt.Errorf("%w: files hash to %s, lock says %s", ErrHashMismatch, got, want)
		}
	}
	if err != nil {
		if !opts.Unverified {
			return Restored{}, err
		}
		res.Verified = false
		res.Unchecked = append(res.Unchecked, err.Error())
	}
	return res, nil
}

func isCipherErr(err error) bool {
	for _, e := range []error{cipher.ErrAuth, cipher.ErrTruncated, cipher.ErrTrailingData, cipher.ErrCorrupted} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// explainDecrypt turns a first-segment authentication failure into "this is
// agent X's blob" when another configured identity opens it.
func (p *Pipeline) explainDecrypt(blobPath string, err error) error {
	if !errors.Is(err, cipher.ErrAuthFirstSegment) {
		return fmt.Errorf("decrypt: %w", err)
	}
	others := p.others()
	if len(others) == 0 {
		return fmt.Errorf("decrypt: %w", err)
	}
	f, ferr := os.Open(blobPath)
	if ferr != nil {
		return fmt.Errorf("decrypt: %w", err)
	}
	defer f.Close()
	owner, perr := cipher.ProbeIdentity(f, p.Key, others)
	if perr != nil || owner == "" {
		return fmt.Errorf("decrypt: %w", err)
	}
	return fmt.Errorf("%w: it decrypts as %q, not as %q", ErrWrongAgent, owner, p.Identity)
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

// removeEmptyDirs removes a tree of directories bottom-up with rmdir
// (os.Remove of a directory), which fails rather than deletes anything
// that appeared meanwhile.
func removeEmptyDirs(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return fmt.Errorf("%w: %s appeared during the restore", ErrNotEmpty, p)
		}
		dirs = append(dirs, p)
		return nil
	})
	if err != nil {
		return fmt.Errorf("scan %s: %w", root, err)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Remove(dirs[i]); err != nil {
			return fmt.Errorf("remove empty directory %s: %w", dirs[i], err)
		}
	}
	return nil
}
