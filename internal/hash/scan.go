package hash

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	gohash "hash"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"
)

// ErrName is returned for a file or directory name the bundle hash cannot
// represent faithfully:
//   - a name that is not valid UTF-8 (the reference decodes it lossily and
//     then fails to read the file);
//   - a name containing a backslash. The reference replaces every '\' with
//     '/' in keys, even on POSIX, so "a\b" would hash exactly like the file
//     b in directory a: two distinct trees would share a hash, and a file
//     and its look-alike would collide on one key. Such names have no place
//     in an agent brain, so they are refused instead of being hashed
//     ambiguously.
var ErrName = errors.New("hash: unsupported file name")

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
	st   fileStat // taken after open, before the contents were read
	size int64    // bytes actually hashed
	sum  [32]byte // SHA-256 of the contents
	leaf Digest
	racy bool // re-read on the next pass even if st is unchanged
}

func (e *entry) file() File {
	return File{Path: e.key, Size: e.size, Mode: e.st.mode.Perm(), SHA256: e.sum}
}

func isRacy(st fileStat, start time.Time) bool {
	limit := start.Add(-racyWindow).UnixNano()
	return st.mtime >= limit || st.ctime >= limit
}

// Options tunes hashing.
type Options struct {
	// Workers is the number of files hashed in parallel; 0 means
	// runtime.GOMAXPROCS(0).
	Workers int
}

func (o Options) workers() int {
	if o.Workers > 0 {
		return o.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// checkName validates one path component of a key (see ErrName).
func checkName(path, name string) error {
	if !utf8.ValidString(name) {
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrName, path)
	}
	if strings.IndexByte(name, '\\') >= 0 {
		return fmt.Errorf("%w: %q contains a backslash (the reference hashes it as '/', which is ambiguous)", ErrName, path)
	}
	return nil
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
func (r *reader) hash(root handle, rel string) (*entry, error) {
	start := now()
	h, err := openBeneath(root, rel, openFileFlags)
	if err != nil {
		if isVanished(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("hash: open %s: %w", rel, err)
	}
	defer h.close()
	st, err := h.stat()
	if err != nil {
		return nil, fmt.Errorf("hash: stat %s: %w", rel, err)
	}
	if !st.isRegular() {
		return nil, nil
	}
	buf := *r.buf
	r.sha.Reset()
	var n int64
	for {
		m, err := h.read(buf)
		if m > 0 {
			r.sha.Write(buf[:m])
			n += int64(m)
		}
		if err != nil {
			return nil, fmt.Errorf("hash: read %s: %w", rel, err)
		}
		// A short read that reaches the stat size is the end of a regular
		// file: skip the extra read(2) that would return 0.
		if m == 0 || (m < len(buf) && n >= st.size) {
			break
		}
	}
	e := &entry{key: rel, st: st, size: n}
	r.sum = r.sha.Sum(r.sum[:0])
	copy(e.sum[:], r.sum)
	e.leaf = r.k.leaf(rel, &e.sum)
	e.racy = n != st.size || isRacy(st, start)
	return e, nil
}

// scanner hashes the regular files of a tree, reusing the entries of prev
// whose stat is unchanged.
type scanner struct {
	root    handle
	workers int
	prev    map[string]*entry // read-only while scanning; may be nil
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
		cur, err := lstatAt(s.root, rel)
		if err != nil {
			if isVanished(err) {
				return nil, nil
			}
			return nil, fmt.Errorf("hash: stat %s: %w", rel, err)
		}
		if !cur.isRegular() {
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
		buf := make([]byte, 64<<10)
		var dir func(rel string) error
		dir = func(rel string) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			ents, _, err := readDir(s.root, rel, buf)
			if err != nil {
				if rel != "" && isVanished(err) {
					return nil // removed while we walked
				}
				return fmt.Errorf("hash: read directory %s: %w", displayPath(rel), err)
			}
			ents = slices.DeleteFunc(ents, func(e dirent) bool { return e.kind == kindOther })
			slices.SortFunc(ents, func(a, b dirent) int {
				return compareEntry(a.name, a.kind == kindDir, b.name, b.kind == kindDir)
			})
			for _, e := range ents {
				p := e.name
				if rel != "" {
					p = rel + "/" + e.name
				}
				if err := checkName(p, e.name); err != nil {
					return err
				}
				if e.kind == kindDir {
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
	})
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
