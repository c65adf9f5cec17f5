package hash

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/hermesd/hermesd/internal/fsys"
)

// Cache is the incremental form of Dir for one tree (one brain directory).
// It remembers, per file, the stat data (size, mtime, ctime, inode, device,
// mode) taken when the contents were read, with the contents' SHA-256 and
// leaf, and the keys in order. A pass then reads only files that are new,
// whose stat changed, or that were "racy" when read (modified within
// racyWindow of the read, when an unchanged stat proves nothing), and
// recomputes the bundle from the cached leaves.
//
// The first Update (after NewCache or Load) is a full Rescan, so loaded
// entries are always stat-validated before they are trusted.
//
// A pass may see the tree through an fsys.Overlay (UpdateOverlay,
// RescanOverlay), e.g. with consistent copies of SQLite databases in place
// of the live files. A file read from a substitute is never trusted by a
// later pass (it is re-read, like a racy file), and every path an overlay
// covered is looked at again by the next pass, so that the cache returns
// to the tree's own files when the overlay is gone.
//
// A Cache is safe for concurrent use; its methods serialize.
type Cache struct {
	root    string
	absRoot string
	opts    Options

	mu        sync.Mutex
	entries   map[string]*entry
	sorted    []*entry // key order
	digest    Digest
	bytes     int64
	validated bool     // a full scan has checked every entry since NewCache/Load
	overlaid  []string // paths the last pass's overlay covered
	links     Links    // the tree's symlinks as of the last pass
}

// NewCache returns an empty cache for the tree at root. opts.Overlay must
// be nil: an overlay belongs to one pass (UpdateOverlay, RescanOverlay).
func NewCache(root string, opts Options) *Cache {
	if opts.Overlay != nil {
		panic("hash: NewCache with an Overlay; pass it to UpdateOverlay or RescanOverlay")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		abs = filepath.Clean(root)
	}
	return &Cache{root: root, absRoot: abs, opts: opts, entries: map[string]*entry{}, digest: Null, links: Links{}}
}

// Links returns the tree's symlinks as of the last pass.
func (c *Cache) Links() Links {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(Links, len(c.links))
	for k, v := range c.links {
		out[k] = v
	}
	return out
}

// Validated reports whether a full pass (or Learner.Adopt) has checked
// every entry since NewCache or Load: until then the next pass reads
// everything it cannot stat-validate.
func (c *Cache) Validated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.validated
}

// Root returns the tree the cache describes.
func (c *Cache) Root() string { return c.root }

// Digest returns the bundle hash computed by the last Rescan or Update.
func (c *Cache) Digest() Digest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.digest
}

// Files returns the cached files in key order.
func (c *Cache) Files() []File {
	c.mu.Lock()
	defer c.mu.Unlock()
	files := make([]File, len(c.sorted))
	for i, e := range c.sorted {
		files[i] = e.file()
	}
	return files
}

// Lookup returns the cached file at path ('/'-separated, relative to the
// root) without copying the others.
func (c *Cache) Lookup(path string) (File, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[path]
	if !ok {
		return File{}, false
	}
	return e.file(), true
}

// Rescan walks the whole tree, stats every file (in parallel), reads the
// files that are new, changed or racy, drops the ones that are gone and
// returns the bundle hash. On error the cache is unchanged.
func (c *Cache) Rescan(ctx context.Context) (Result, error) {
	return c.RescanOverlay(ctx, nil)
}

// RescanOverlay is Rescan of the tree as ov shows it.
func (c *Cache) RescanOverlay(ctx context.Context, ov *fsys.Overlay) (Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rescan(ctx, ov)
}

func (c *Cache) rescan(ctx context.Context, ov *fsys.Overlay) (Result, error) {
	h, ok, err := openTree(c.root, ov)
	if err != nil {
		return Result{}, err
	}
	if !ok {
		c.reset()
		c.validated = true
		c.overlaid = nil
		return c.result(scanStats{}), nil
	}
	defer h.Close()
	s := &scanner{root: h, workers: c.opts.workers(), prev: c.entries}
	ents, st, err := s.walk(ctx, "")
	if err != nil {
		return Result{}, err
	}
	links := Links{}
	if err := readLinks(h, s.links, links); err != nil {
		return Result{}, fmt.Errorf("hash: %w", err)
	}
	c.links = links
	c.entries = make(map[string]*entry, len(ents))
	for _, e := range ents {
		c.entries[e.key] = e
	}
	c.sorted = ents
	c.validated = true
	c.overlaid = ov.Paths()
	c.recompute()
	return c.result(st), nil
}

// Update brings the cache up to date after changes to the named paths and
// returns the bundle hash. Paths are relative to the root ('/' or the OS
// separator), or absolute paths inside it; each may name a file or a
// directory that was created, modified, deleted or replaced (a directory is
// walked, and cached files under a vanished one are dropped). Only those
// paths, plus files that were racy when last read and the paths the
// previous pass's overlay covered, are looked at.
//
// changed == nil means "unknown": a full Rescan. The first Update after
// NewCache or Load is a Rescan too.
func (c *Cache) Update(ctx context.Context, changed []string) (Result, error) {
	return c.UpdateOverlay(ctx, changed, nil)
}

// UpdateOverlay is Update of the tree as ov shows it. Besides the changed
// paths it looks at every path that ov or the previous pass's overlay
// covers.
func (c *Cache) UpdateOverlay(ctx context.Context, changed []string, ov *fsys.Overlay) (Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if changed == nil || !c.validated {
		return c.rescan(ctx, ov)
	}
	paths := make([]string, 0, len(changed))
	for _, p := range changed {
		rel, err := c.rel(p)
		if err != nil {
			return Result{}, err
		}
		if rel == "" {
			return c.rescan(ctx, ov) // the root itself changed
		}
		paths = append(paths, rel)
	}
	for _, e := range c.sorted {
		if e.racy {
			paths = append(paths, e.key)
		}
	}
	paths = append(paths, c.overlaid...)
	paths = append(paths, ov.Paths()...)
	slices.Sort(paths)
	paths = slices.Compact(paths)

	h, ok, err := openTree(c.root, ov)
	if err != nil {
		return Result{}, err
	}
	if !ok {
		c.reset()
		c.overlaid = nil
		return c.result(scanStats{}), nil
	}
	defer h.Close()

	// Classify each path by what it is now. Every named path is dropped
	// below; files and directories are then hashed back in, and a path
	// that is gone, or now a symlink, fifo, ..., contributes nothing (a
	// symlink is noted among the links).
	var files, dirs, links []string
	for _, p := range paths {
		st, err := h.Stat(p)
		switch {
		case err != nil && fsys.IsGone(err):
		case err != nil:
			return Result{}, fmt.Errorf("hash: stat %s: %w", p, err)
		case st.Mode.IsRegular():
			if err := checkKey(p); err != nil {
				return Result{}, err
			}
			files = append(files, p)
		case st.Mode.IsDir():
			if err := checkKey(p); err != nil {
				return Result{}, err
			}
			dirs = append(dirs, p)
		case st.Mode.Type() == fs.ModeSymlink:
			links = append(links, p)
		}
	}

	// Hash what is there, against the current entries (read-only meanwhile).
	s := &scanner{root: h, workers: c.opts.workers(), prev: c.entries}
	var total scanStats
	var fresh []*entry
	for _, d := range dirs {
		ents, st, err := s.walk(ctx, d)
		if err != nil {
			return Result{}, err
		}
		fresh = append(fresh, ents...)
		total.read += st.read
		total.readBytes += st.readBytes
	}
	// The links at or below the named paths, as they are now.
	newLinks := make(Links, len(c.links))
	for k, v := range c.links {
		newLinks[k] = v
	}
	dropLinks(newLinks, paths)
	if err := readLinks(h, append(links, s.links...), newLinks); err != nil {
		return Result{}, fmt.Errorf("hash: %w", err)
	}
	var named []string
	for _, f := range files {
		if !Excluded(f) {
			named = append(named, f)
		}
	}
	if len(named) > 0 {
		ents, st, err := s.list(ctx, named)
		if err != nil {
			return Result{}, err
		}
		fresh = append(fresh, ents...)
		total.read += st.read
		total.readBytes += st.readBytes
	}

	// Apply: drop every key at or under a named path, then add the fresh
	// entries back.
	drop := make([]bool, len(c.sorted))
	for _, p := range paths {
		if i, ok := c.find(p); ok {
			drop[i] = true
		}
		lo, hi := c.prefixRange(p + "/")
		for i := lo; i < hi; i++ {
			drop[i] = true
		}
	}
	for i, d := range drop {
		if d {
			delete(c.entries, c.sorted[i].key)
		}
	}
	kept := make([]*entry, 0, len(c.sorted))
	for i, e := range c.sorted {
		if !drop[i] {
			kept = append(kept, e)
		}
	}
	// A path can be reached twice (a file inside a named directory):
	// the last entry wins, and the key is added once.
	added := fresh[:0:0]
	for _, e := range fresh {
		if _, dup := c.entries[e.key]; !dup {
			added = append(added, e)
		}
		c.entries[e.key] = e
	}
	for i, e := range added {
		added[i] = c.entries[e.key]
	}
	slices.SortFunc(added, func(a, b *entry) int { return Compare(a.key, b.key) })
	c.sorted = mergeSorted(kept, added)
	c.overlaid = ov.Paths()
	c.links = newLinks
	c.recompute()
	return c.result(total), nil
}

// checkKey applies the name policy to a key.
func checkKey(key string) error {
	if err := fsys.CheckName(key); err != nil {
		return fmt.Errorf("hash: %w", err)
	}
	return nil
}

// rel turns a caller's path into a key-form path relative to the root; ""
// is the root itself.
func (c *Cache) rel(p string) (string, error) {
	if filepath.IsAbs(p) {
		r, err := filepath.Rel(c.absRoot, p)
		if err != nil {
			return "", fmt.Errorf("hash: %s is not inside %s", p, c.root)
		}
		p = r
	}
	p = filepath.ToSlash(filepath.Clean(p))
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", fmt.Errorf("hash: %s is not inside %s", p, c.root)
	}
	if p == "." {
		p = ""
	}
	return p, nil
}

func (c *Cache) reset() {
	c.links = Links{}
	c.entries = map[string]*entry{}
	c.sorted = nil
	c.digest = Null
	c.bytes = 0
}

func (c *Cache) recompute() {
	c.digest = bundleOf(c.sorted)
	c.bytes = 0
	for _, e := range c.sorted {
		c.bytes += e.size
	}
}

func (c *Cache) result(st scanStats) Result {
	return Result{Digest: c.digest, Links: c.links.Digest(), Count: len(c.sorted), Bytes: c.bytes, Read: st.read, ReadBytes: st.readBytes}
}

// find returns the index of key in sorted, or where it would be inserted.
func (c *Cache) find(key string) (int, bool) {
	i := sort.Search(len(c.sorted), func(i int) bool { return Compare(c.sorted[i].key, key) >= 0 })
	return i, i < len(c.sorted) && c.sorted[i].key == key
}

// prefixRange returns the index range of the keys starting with prefix;
// Compare is lexicographic, so they are contiguous.
func (c *Cache) prefixRange(prefix string) (lo, hi int) {
	lo, _ = c.find(prefix)
	hi = lo
	for hi < len(c.sorted) && strings.HasPrefix(c.sorted[hi].key, prefix) {
		hi++
	}
	return lo, hi
}

func mergeSorted(a, b []*entry) []*entry {
	if len(b) == 0 {
		return a
	}
	out := make([]*entry, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if Compare(a[i].key, b[j].key) <= 0 {
			out = append(out, a[i])
			i++
		} else {
			out = append(out, b[j])
			j++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

var errCacheFormat = errors.New("hash: invalid cache file")
