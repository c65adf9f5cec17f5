package hash

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hermesd/hermesd/internal/fsys"
)

// Racy reports whether a file with stat st, read from start on, may have
// been written again within the timestamp granularity: an unchanged stat
// then proves nothing about its contents (see racyWindow).
func Racy(st fsys.Info, start time.Time) bool { return isRacy(st, start) }

// Learner collects the files another reader of the tree read whole (a
// snapshot that hashes while it reads), so that the cache takes them over
// without reading them again: the cache then trusts them exactly as if it
// had read them itself, racy ones included (they are read again next
// pass).
type Learner struct {
	c  *Cache
	ov *fsys.Overlay

	mu    sync.Mutex
	ents  []*entry
	bytes int64
	links Links
}

// SetLinks gives the symlinks of the tree (ReadLinks, taken before the
// other reader started) for Adopt to install with the files.
func (l *Learner) SetLinks(ls Links) {
	l.mu.Lock()
	l.links = ls
	l.mu.Unlock()
}

// Learner starts collecting the files of one pass over the tree as ov
// shows it.
func (c *Cache) Learner(ov *fsys.Overlay) *Learner { return &Learner{c: c, ov: ov} }

// Add records the file at key ('/'-separated, relative to the root): its
// stat taken after it was opened and before it was read, the moment just
// before it was opened, the bytes read and their SHA-256. Safe for
// concurrent use.
func (l *Learner) Add(key string, st fsys.Info, start time.Time, size int64, sum [32]byte) {
	e := &entry{key: key, st: st, size: size, sum: sum}
	k := keccakPool.Get().(*keccak)
	e.leaf = k.leaf(key, &e.sum)
	keccakPool.Put(k)
	e.racy = size != st.Size || isRacy(st, start) || st.Overlay
	l.mu.Lock()
	l.ents = append(l.ents, e)
	l.bytes += size
	l.mu.Unlock()
}

// Adopt makes the files added the cache's whole content. They must be
// every file of the tree, once each, hashing to want (the bundle hash the
// reader computed from the same reads); otherwise the cache is emptied, so
// that its next pass reads everything, and an error is returned.
func (l *Learner) Adopt(want Digest) (Result, error) {
	l.mu.Lock()
	ents, links := l.ents, l.links
	l.ents = nil
	l.mu.Unlock()
	if links == nil {
		links = Links{}
	}
	slices.SortFunc(ents, func(a, b *entry) int { return Compare(a.key, b.key) })
	c := l.c
	c.mu.Lock()
	defer c.mu.Unlock()
	fail := func(format string, args ...any) (Result, error) {
		c.reset()
		c.validated = false
		return Result{}, fmt.Errorf("hash: adopt: "+format, args...)
	}
	for i := 1; i < len(ents); i++ {
		if ents[i].key == ents[i-1].key {
			return fail("%s added twice", ents[i].key)
		}
	}
	if got := bundleOf(ents); got != want {
		return fail("the files added hash to %s, not %s", got, want)
	}
	c.entries = make(map[string]*entry, len(ents))
	for _, e := range ents {
		c.entries[e.key] = e
	}
	c.sorted = ents
	c.validated = true
	c.overlaid = l.ov.Paths()
	c.links = links
	c.recompute()
	return c.result(scanStats{read: len(ents), readBytes: l.bytes}), nil
}
