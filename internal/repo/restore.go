package repo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/hermesd/hermesd/internal/hash"
)

// RestoreOptions selects what Restore writes.
type RestoreOptions struct {
	// Path restores only this file or directory (with its ancestors'
	// modes), '/'-separated and relative to the brain; "" restores the
	// whole commit, bundle.lock.json and receipts.ndjson included.
	Path string
	// MaxBytes, when positive, bounds the bytes written, on top of the
	// commit's own totals.
	MaxBytes int64
}

// Restored describes a completed restore.
type Restored struct {
	Files, Dirs int
	Bytes       int64       // file bytes written (lock and receipts included)
	BundleHash  hash.Digest // whole restores: the verified bundle hash
	Downloaded  int64       // bytes read from the blob store by this Reader so far
	Ranges      int64       // range requests made by this Reader so far
}

// rfile is one file to restore or check.
type rfile struct {
	path   string
	mode   fs.FileMode
	size   int64
	sum    [32]byte
	chunks []objRef
	offs   []int64
	one    [1]objRef // chunks of a file of one chunk (most files): no allocation
	zero   [1]int64

	mu        sync.Mutex
	created   bool
	remaining int
}

type rdir struct {
	path string
	mode fs.FileMode
}

// target is one place a chunk goes.
type target struct {
	f *rfile
	i int
}

// restorePlan is what a restore or check needs: files, directories and
// where each object goes.
type restorePlan struct {
	files   []*rfile
	dirs    []rdir
	targets map[Handle][]target
	objs    []objRef // each needed object once
	bytes   int64
}

// Restore writes the commit (or the file or directory opts.Path) into dir,
// which must not exist or be an empty directory; it is created 0700 and its
// own mode is the caller's. Everything is verified before Restore returns
// nil: the trees' bundle hash and totals against the commit (whole
// restores), every object's id after decryption, every file's SHA-256.
// Files and directories get exactly their recorded permission bits.
// Nothing is written outside dir (os.Root), nothing is fsynced, and on
// error dir may hold a partial tree: the caller restores into a temporary
// directory, removes it on error, and syncs and renames it on success.
func (r *Reader) Restore(ctx context.Context, dir string, opts RestoreOptions) (Restored, error) {
	c := r.commit
	if err := r.Prefetch(ctx, c.Root); err != nil {
		return Restored{}, err
	}
	var res Restored
	if opts.Path == "" {
		s, err := Summarize(ctx, r, c.Root)
		if err != nil {
			return Restored{}, err
		}
		if err := verifySummary(c, s); err != nil {
			return Restored{}, err
		}
		res.BundleHash = s.BundleHash
	}
	pl, err := r.planFiles(ctx, opts.Path)
	if err != nil {
		return Restored{}, err
	}
	if opts.MaxBytes > 0 && pl.bytes > opts.MaxBytes {
		return Restored{}, fmt.Errorf("%w: the restore would write %d bytes, more than %d", ErrTooLarge, pl.bytes, opts.MaxBytes)
	}
	if err := prepareTarget(dir); err != nil {
		return Restored{}, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Restored{}, fmt.Errorf("repo: %w", err)
	}
	defer root.Close()
	rd, err := openRestoreDir(root, dir)
	if err != nil {
		return Restored{}, fmt.Errorf("repo: %w", err)
	}
	defer rd.close()
	for _, d := range pl.dirs {
		// 0700 while filling; the recorded mode is applied at the end.
		if err := root.Mkdir(d.path, 0o700); err != nil {
			return Restored{}, fmt.Errorf("repo: restore: %w", err)
		}
	}
	for _, f := range pl.files {
		if f.size == 0 {
			if err := f.createEmpty(rd); err != nil {
				return Restored{}, err
			}
		}
	}
	// Files of one chunk: the chunk's id is the file's SHA-256, so the
	// object check verifies the file. Their chunks are fetched in pack
	// order, coalesced, concurrently, and written wherever they go.
	var bulk []objRef
	for _, o := range pl.objs {
		for _, t := range pl.targets[o.h] {
			if len(t.f.chunks) == 1 {
				bulk = append(bulk, o)
				break
			}
		}
	}
	err = r.fetch(ctx, r.plan(bulk, true), false, func(o objRef, plain []byte) error {
		for _, t := range pl.targets[o.h] {
			if len(t.f.chunks) == 1 {
				if err := t.f.write(rd, t.i, plain); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return Restored{}, err
	}
	// Files of several chunks: fetched in file order (the downloads still
	// run concurrently), each written and hashed as its chunks arrive.
	var multi []*rfile
	for _, f := range pl.files {
		if len(f.chunks) > 1 {
			multi = append(multi, f)
		} else if f.remaining != 0 {
			return Restored{}, fmt.Errorf("repo: restore: %s: %d chunks not written", f.path, f.remaining)
		}
	}
	if err := r.restoreInOrder(ctx, rd, multi); err != nil {
		return Restored{}, err
	}
	dirs := slices.Clone(pl.dirs)
	slices.SortFunc(dirs, func(a, b rdir) int { return strings.Compare(b.path, a.path) }) // deepest first
	for _, d := range dirs {
		if err := root.Chmod(d.path, d.mode); err != nil {
			return Restored{}, fmt.Errorf("repo: restore: %w", err)
		}
	}
	res.Files, res.Dirs, res.Bytes = len(pl.files), len(pl.dirs), pl.bytes
	res.Downloaded, res.Ranges = r.Downloaded()
	return res, nil
}

// planFiles lists what to restore below path ("" for everything, the lock
// and receipts included) and locates every chunk, checking each file's
// chunk sizes against its size.
func (r *Reader) planFiles(ctx context.Context, path string) (*restorePlan, error) {
	c := r.commit
	pl := &restorePlan{targets: map[Handle][]target{}}
	// The bound every plan must respect: the commit's own totals.
	limitFiles, limitBytes := c.Files, c.Bytes
	add := func(p string, e *Entry) error {
		if e.Type == EntryDir {
			pl.dirs = append(pl.dirs, rdir{path: p, mode: e.Mode})
			return nil
		}
		return pl.addFile(r, p, e.Mode, e.Size, e.SHA256, e.Chunks)
	}
	if path == "" {
		if err := Walk(ctx, r, c.Root, add); err != nil {
			return nil, err
		}
		for _, x := range []struct {
			name string
			ref  *FileRef
		}{{LockFile, c.Lock}, {ReceiptsFile, c.Receipts}} {
			if x.ref != nil {
				limitFiles++
				limitBytes += x.ref.Size
				if err := pl.addFile(r, x.name, x.ref.Mode, x.ref.Size, x.ref.SHA256, x.ref.Chunks); err != nil {
					return nil, err
				}
			}
		}
	} else {
		path = strings.Trim(path, "/")
		e, err := Lookup(ctx, r, c.Root, path)
		if err != nil {
			return nil, err
		}
		// Ancestors first, with their recorded modes.
		parts := strings.Split(path, "/")
		for i := 1; i < len(parts); i++ {
			a := strings.Join(parts[:i], "/")
			ae, err := Lookup(ctx, r, c.Root, a)
			if err != nil {
				return nil, err
			}
			pl.dirs = append(pl.dirs, rdir{path: a, mode: ae.Mode})
		}
		if err := add(path, e); err != nil {
			return nil, err
		}
		if e.Type == EntryDir {
			err := Walk(ctx, r, e.Subtree, func(p string, e *Entry) error { return add(path+"/"+p, e) })
			if err != nil {
				return nil, err
			}
		}
	}
	if int64(len(pl.files)) > limitFiles || pl.bytes > limitBytes {
		return nil, corruptf("the trees hold %d files of %d bytes, the commit only %d of %d", len(pl.files), pl.bytes, limitFiles, limitBytes)
	}
	return pl, nil
}

func (pl *restorePlan) addFile(r *Reader, p string, mode fs.FileMode, size int64, sum [32]byte, chunks []ID) error {
	if int64(len(pl.files)) >= maxJSONInt || size > maxJSONInt-pl.bytes {
		return corruptf("too many files or bytes")
	}
	f := &rfile{path: p, mode: mode, size: size, sum: sum, remaining: len(chunks)}
	if len(chunks) == 1 {
		f.chunks, f.offs = f.one[:], f.zero[:]
	} else {
		f.chunks, f.offs = make([]objRef, len(chunks)), make([]int64, len(chunks))
	}
	var off int64
	for i, id := range chunks {
		h := Handle{TypeChunk, id}
		o, err := r.locate(h)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		f.chunks[i], f.offs[i] = o, off
		off += o.n - Overhead
		if off > size {
			break
		}
		if _, seen := pl.targets[h]; !seen {
			pl.objs = append(pl.objs, o)
		}
		pl.targets[h] = append(pl.targets[h], target{f: f, i: i})
	}
	switch {
	case off != size:
		return corruptf("%s: its chunks hold %d bytes, its size is %d", p, off, size)
	case len(chunks) == 1 && chunks[0] != ID(sum):
		return corruptf("%s: its only chunk %s is not its content's SHA-256", p, chunks[0].Short())
	}
	pl.files = append(pl.files, f)
	pl.bytes += size
	return nil
}

func (f *rfile) createEmpty(d *restoreDir) error {
	f.created = true
	if err := d.writeAt(f.path, true, nil, 0, &f.mode); err != nil {
		return fmt.Errorf("repo: restore: %w", err)
	}
	return nil
}

// write puts chunk i's plaintext at its offset; the last chunk written
// sets the file's mode (exactly the recorded bits, whatever the umask).
func (f *rfile) write(d *restoreDir, i int, plain []byte) error {
	if int64(len(plain)) != f.chunks[i].n-Overhead {
		return corruptf("%s: chunk %d has %d bytes, want %d", f.path, i, len(plain), f.chunks[i].n-Overhead)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.remaining--
	var mode *fs.FileMode
	if f.remaining == 0 {
		mode = &f.mode
	}
	create := !f.created
	f.created = true
	if err := d.writeAt(f.path, create, plain, f.offs[i], mode); err != nil {
		return fmt.Errorf("repo: restore: %w", err)
	}
	return nil
}

// createRoot is restoreDir.create through os.Root.
func (d *restoreDir) createRoot(path string) (*os.File, error) {
	return d.root.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
}

// writeAtRoot is restoreDir.writeAt through os.Root.
func (d *restoreDir) writeAtRoot(path string, create bool, data []byte, off int64, mode *fs.FileMode) error {
	flags := os.O_WRONLY
	if create {
		flags |= os.O_CREATE | os.O_EXCL
	}
	fh, err := d.root.OpenFile(path, flags, 0o600)
	if err != nil {
		return err
	}
	_, err = fh.WriteAt(data, off)
	if err == nil && mode != nil {
		err = fh.Chmod(*mode)
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	return err
}

// restoreInOrder writes files of several chunks: one ordered fetch of all
// their chunks, file after file, each file written sequentially through
// one descriptor and hashed on the way.
func (r *Reader) restoreInOrder(ctx context.Context, rd *restoreDir, files []*rfile) error {
	var chunks []objRef
	for _, f := range files {
		chunks = append(chunks, f.chunks...)
	}
	var (
		fi, ci int // the file and chunk the next delivery belongs to
		fh     *os.File
		off    int64
		sum    = sha256.New()
	)
	defer func() {
		if fh != nil {
			fh.Close()
		}
	}()
	err := r.fetch(ctx, r.plan(chunks, false), true, func(o objRef, plain []byte) error {
		f := files[fi]
		if int64(len(plain)) != f.chunks[ci].n-Overhead {
			return corruptf("%s: chunk %d has %d bytes, want %d", f.path, ci, len(plain), f.chunks[ci].n-Overhead)
		}
		if fh == nil {
			var err error
			if fh, err = rd.create(f.path); err != nil {
				return fmt.Errorf("repo: restore: %w", err)
			}
			off = 0
			sum.Reset()
		}
		if _, err := fh.WriteAt(plain, off); err != nil {
			return fmt.Errorf("repo: restore: %w", err)
		}
		sum.Write(plain)
		off += int64(len(plain))
		if ci++; ci < len(f.chunks) {
			return nil
		}
		if off != f.size || !bytes.Equal(sum.Sum(nil), f.sum[:]) {
			return corruptf("%s does not hash to its recorded SHA-256", f.path)
		}
		err := fh.Chmod(f.mode)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		fh = nil
		if err != nil {
			return fmt.Errorf("repo: restore: %w", err)
		}
		f.remaining, f.created = 0, true
		fi, ci = fi+1, 0
		return nil
	})
	if err == nil && fi != len(files) {
		err = fmt.Errorf("repo: restore: %s: chunks not written", files[fi].path)
	}
	return err
}

// prepareTarget makes sure dir is an empty directory (creating it, 0700,
// if missing). A symlink is refused.
func prepareTarget(dir string) error {
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(dir, 0o700); err != nil {
			return fmt.Errorf("repo: create restore target: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("repo: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("%w: %s is not a directory", ErrNotEmpty, dir)
	}
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("repo: %w", err)
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if len(names) > 0 {
		return fmt.Errorf("%w: %s", ErrNotEmpty, dir)
	}
	if err != nil && err != io.EOF {
		return fmt.Errorf("repo: %w", err)
	}
	return nil
}

// CheckReport describes a successful check.
type CheckReport struct {
	Packs      int   // live packs, the head included
	Trees      int   // trees verified
	Files      int   // files, lock and receipts included
	Bytes      int64 // their total size
	Chunks     int   // distinct chunks referenced
	ReadData   bool  // every chunk was downloaded and verified
	Downloaded int64
	Ranges     int64
}

// Check verifies the snapshot without writing anything: the packs'
// headers and indexes (Open already did), every tree, the bundle hash and
// totals against the commit, and that every referenced chunk is in a live
// pack with a size that adds up. With readData it also downloads every
// chunk, decrypts it and checks its id, and checks the SHA-256 of every
// file (like restic check --read-data).
func (r *Reader) Check(ctx context.Context, readData bool) (CheckReport, error) {
	c := r.commit
	if err := r.Prefetch(ctx, c.Root); err != nil {
		return CheckReport{}, err
	}
	s, err := Summarize(ctx, r, c.Root)
	if err != nil {
		return CheckReport{}, err
	}
	if err := verifySummary(c, s); err != nil {
		return CheckReport{}, err
	}
	pl, err := r.planFiles(ctx, "")
	if err != nil {
		return CheckReport{}, err
	}
	r.treeMu.Lock()
	rep := CheckReport{Packs: len(r.packs), Trees: len(r.trees), Files: len(pl.files), Bytes: pl.bytes, Chunks: len(pl.objs), ReadData: readData}
	r.treeMu.Unlock()
	if readData {
		// Chunks of one-chunk files are checked in pack order (their id is
		// the file's SHA-256); files of several chunks are hashed in order,
		// each chunk verified on the way.
		var bulk []objRef
		var multi []*rfile
		for _, f := range pl.files {
			if len(f.chunks) > 1 {
				multi = append(multi, f)
			} else {
				bulk = append(bulk, f.chunks...)
			}
		}
		if err := r.fetch(ctx, r.plan(bulk, true), false, func(objRef, []byte) error { return nil }); err != nil {
			return CheckReport{}, err
		}
		for _, f := range multi {
			h := sha256.New()
			if err := r.fetch(ctx, r.plan(f.chunks, false), true, func(_ objRef, plain []byte) error {
				h.Write(plain)
				return nil
			}); err != nil {
				return CheckReport{}, err
			}
			if !bytes.Equal(h.Sum(nil), f.sum[:]) {
				return CheckReport{}, corruptf("%s does not hash to its recorded SHA-256", f.path)
			}
		}
	}
	rep.Downloaded, rep.Ranges = r.Downloaded()
	return rep, nil
}
