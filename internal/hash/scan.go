package hash

import (
	"context"
	"crypto/sha256"
	"fmt"
	gohash "hash"
	"io"
	"io/fs"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/hermesd/hermesd/internal/fsys"
	"golang.org/x/sync/errgroup"
)

// ErrName matches the error for a file or directory name outside the one
// name policy hermesd shares between the hasher, the tar writer and the
// extractor (fsys.CheckName): not valid UTF-8 (the reference decodes it
// lossily and then fails to read the file), a backslash (the reference
// hashes '\' as '/', so "a\b" would collide with the file b in directory
// a), NUL, or a name or path longer than the file system allows. It is
// fsys.ErrName, so tarball.ErrName matches it too.
var ErrName = fsys.ErrName

// racyWindow: a file whose mtime or ctime is less than this before the
// moment its contents were read may have been written again within the
// timestamp granularity (a kernel clock tick; 1 s on some filesystems), so
// an unchanged stat proves nothing and it is read again on the next pass
// (git's "racy clean" problem).
const racyWindow = 2 * time.Second

// now is the clock read before each file is opened (a variable for tests).
var now = time.Now

// bufSize is the read buffer per worker: large reads keep the syscall count
// of big files negligible next to SHA-256.
const bufSize = 1 << 20

// batchSize is how many paths travel together from the walker to a worker.
const batchSize = 64

// entry is the hashed state of one regular file. Entries are never
// modified once built; a change replaces the pointer.
type entry struct {
	key  string
	st   fsys.Info // taken after open, before the contents were read
	size int64     // bytes actually hashed
	sum  [32]byte  // SHA-256 of the contents
	leaf Digest
	racy bool // re-read on the next pass even if st is unchanged (always, for an overlay's substitute)
}

func (e *entry) file() File {
	return File{Path: e.key, Size: e.size, Mode: e.st.Mode.Perm(), SHA256: e.sum, Stat: e.st}
}

func isRacy(st fsys.Info, start time.Time) bool {
	limit := start.Add(-racyWindow).UnixNano()
	return st.Mtime >= limit || st.Ctime >= limit
}

// Options tunes hashing.
type Options struct {
	// Workers is the number of files hashed in parallel; 0 means
	// runtime.GOMAXPROCS(0).
	Workers int
	// Overlay, for Dir, shows the tree with some files substituted or
	// hidden (see fsys.Overlay). A Cache takes its overlay per pass.
	Overlay *fsys.Overlay
}

func (o Options) workers() int {
	if o.Workers > 0 {
		return o.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// reader is one worker's reusable state.
type reader struct {
	buf *[]byte
	sha gohash.Hash
	sum []byte
	k   *keccak
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

func newReader() *reader {
	return &reader{buf: bufPool.Get().(*[]byte), sha: sha256.New(), sum: make([]byte, 0, sha256.Size), k: newKeccak()}
}

func (r *reader) release() { bufPool.Put(r.buf) }

// hash reads and digests the regular file rel. It returns nil, nil when the
// file vanished or is no longer a regular file: a walk of a changing tree
// records what it finds.
func (r *reader) hash(root fsys.Root, rel string) (*entry, error) {
	start := now()
	h, err := root.Open(rel)
	if err != nil {
		if fsys.IsGone(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("hash: open %s: %w", rel, err)
	}
	defer h.Close()
	st, err := h.Stat()
	if err != nil {
		return nil, fmt.Errorf("hash: stat %s: %w", rel, err)
	}
	if !st.Mode.IsRegular() {
		return nil, nil
	}
	buf := *r.buf
	r.sha.Reset()
	var n int64
	for {
		m, err := h.Read(buf)
		if m > 0 {
			r.sha.Write(buf[:m])
			n += int64(m)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("hash: read %s: %w", rel, err)
		}
		// A short read that reaches the stat size is the end of a regular
		// file: skip the extra read(2) that would return 0.
		if m < len(buf) && n >= st.Size {
			break
		}
	}
	e := &entry{key: rel, st: st, size: n}
	r.sum = r.sha.Sum(r.sum[:0])
	copy(e.sum[:], r.sum)
	e.leaf = r.k.leaf(rel, &e.sum)
	// A substitute's digest must never stand for the tree's own file, nor
	// for a later substitute that happens to share its stat data.
	e.racy = n != st.Size || isRacy(st, start) || st.Overlay
	return e, nil
}

// scanner hashes the regular files of a tree, reusing the entries of prev
// whose stat is unchanged.
type scanner struct {
	root    fsys.Root
	workers int
	prev    map[string]*entry // read-only while scanning; may be nil
	// links are the keys of the symlinks the walks found (written by the
	// walk's producer, read once it returned).
	links []string
}

type scanStats struct {
	read      int
	readBytes int64
}

type batch struct {
	paths []string
	out   []*entry
}

// file returns the current entry for rel: prev's if its stat is unchanged
// and it is not racy, else a fresh read. nil means skip.
func (s *scanner) file(r *reader, rel string, st *scanStats) (*entry, error) {
	if old := s.prev[rel]; old != nil && !old.racy {
		// Lstat may resolve the directories on the way through a symlink
		// swapped in meanwhile, but an unchanged Info (inode, device,
		// times) proves it found the file that was read: nothing else is
		// trusted without a read through Open.
		cur, err := s.root.Lstat(rel)
		if err != nil {
			if fsys.IsGone(err) {
				return nil, nil
			}
			return nil, fmt.Errorf("hash: stat %s: %w", rel, err)
		}
		if !cur.Mode.IsRegular() {
			return nil, nil
		}
		if cur == old.st {
			return old, nil
		}
	}
	e, err := r.hash(s.root, rel)
	if e != nil {
		st.read++
		st.readBytes += e.size
	}
	return e, err
}

// run hashes the paths that produce emits, in parallel, and returns the
// entries in emission order. produce runs in its own goroutine.
func (s *scanner) run(ctx context.Context, produce func(emit func(string) error) error) ([]*entry, scanStats, error) {
	g, gctx := errgroup.WithContext(ctx)
	jobs := make(chan *batch, 2*s.workers)
	var batches []*batch // owned by the producer until Wait returns
	g.Go(func() error {
		defer close(jobs)
		cur := &batch{}
		flush := func() error {
			if len(cur.paths) == 0 {
				return nil
			}
			cur.out = make([]*entry, len(cur.paths))
			batches = append(batches, cur)
			select {
			case jobs <- cur:
			case <-gctx.Done():
				return gctx.Err()
			}
			cur = &batch{}
			return nil
		}
		err := produce(func(p string) error {
			if cur.paths == nil {
				cur.paths = make([]string, 0, batchSize)
			}
			cur.paths = append(cur.paths, p)
			if len(cur.paths) == batchSize {
				return flush()
			}
			return nil
		})
		if err != nil {
			return err
		}
		return flush()
	})
	stats := make([]scanStats, s.workers)
	for w := range s.workers {
		g.Go(func() error {
			r := newReader()
			defer r.release()
			for b := range jobs {
				if err := gctx.Err(); err != nil {
					return err
				}
				for i, p := range b.paths {
					e, err := s.file(r, p, &stats[w])
					if err != nil {
						return err
					}
					b.out[i] = e
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, scanStats{}, err
	}
	var total scanStats
	for _, st := range stats {
		total.read += st.read
		total.readBytes += st.readBytes
	}
	n := 0
	for _, b := range batches {
		n += len(b.out)
	}
	ents := make([]*entry, 0, n)
	for _, b := range batches {
		for _, e := range b.out {
			if e != nil {
				ents = append(ents, e)
			}
		}
	}
	return ents, total, nil
}

// walk hashes every regular file below the directory sub ("" for the root)
// and returns the entries in key order.
func (s *scanner) walk(ctx context.Context, sub string) ([]*entry, scanStats, error) {
	return s.run(ctx, func(emit func(string) error) error {
		return walkTree(ctx, s.root, sub, emit, func(p string) { s.links = append(s.links, p) })
	})
}

// walkTree emits, in key order, the key of every regular file below the
// directory sub ("" for the root) that counts toward the bundle hash, from
// directory listings alone: the one walk of the hasher and of Paths. link,
// when not nil, is given the key of every symlink found.
func walkTree(ctx context.Context, root fsys.Root, sub string, emit func(string) error, link func(string)) error {
	var dir func(rel string) error
	dir = func(rel string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		ents, _, err := root.ReadDir(rel)
		if err != nil {
			if rel != "" && fsys.IsGone(err) {
				return nil // removed while we walked
			}
			return fmt.Errorf("hash: read directory %s: %w", displayPath(rel), err)
		}
		// Symlinks, sockets, fifos and devices contribute nothing to the
		// bundle hash; symlinks are noted (Links).
		ents = slices.DeleteFunc(ents, func(e fsys.Entry) bool {
			if link != nil && e.Type&fs.ModeSymlink != 0 {
				if p, err := fsys.Join(rel, e.Name); err == nil {
					link(p)
				}
			}
			return !e.Type.IsRegular() && !e.Type.IsDir()
		})
		slices.SortFunc(ents, func(a, b fsys.Entry) int {
			return compareEntry(a.Name, a.Type.IsDir(), b.Name, b.Type.IsDir())
		})
		for _, e := range ents {
			p, err := fsys.Join(rel, e.Name)
			if err != nil {
				return fmt.Errorf("hash: %w", err)
			}
			if e.Type.IsDir() {
				if err := dir(p); err != nil {
					return err
				}
			} else if !Excluded(p) {
				if err := emit(p); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return dir(sub)
}

// Paths returns the keys of the files of the tree at root that a Rescan
// would hash, in key order, reading no file (for finding files by name
// before anything is hashed). A missing root has none.
func Paths(ctx context.Context, root string) ([]string, error) {
	h, ok, err := openTree(root, nil)
	if err != nil || !ok {
		return nil, err
	}
	defer h.Close()
	var out []string
	err = walkTree(ctx, h, "", func(p string) error {
		out = append(out, p)
		return nil
	}, nil)
	return out, err
}

// list hashes the named regular files (which need not be sorted).
func (s *scanner) list(ctx context.Context, paths []string) ([]*entry, scanStats, error) {
	return s.run(ctx, func(emit func(string) error) error {
		for _, p := range paths {
			if err := emit(p); err != nil {
				return err
			}
		}
		return nil
	})
}

func displayPath(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// bundleOf returns the bundle hash of entries already in key order.
func bundleOf(ents []*entry) Digest {
	if len(ents) == 0 {
		return Null
	}
	k := keccakPool.Get().(*keccak)
	defer keccakPool.Put(k)
	k.h.Reset()
	var chunk [128 * 32]byte
	b := chunk[:0]
	for _, e := range ents {
		b = append(b, e.leaf[:]...)
		if len(b) == len(chunk) {
			k.h.Write(b)
			b = b[:0]
		}
	}
	k.h.Write(b)
	return k.sum()
}
