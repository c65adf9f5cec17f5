package repo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/hermesd/hermesd/internal/hash"
)

// WalkFunc is called for every entry of a walk with its path ('/'-
// separated, relative to the root). Returning fs.SkipDir from a
// directory's call skips its contents.
type WalkFunc func(path string, e *Entry) error

// Walk visits every entry below the tree root, depth first in name order,
// without downloading any file content. Trees are depth-bounded and a
// subtree that contains itself is ErrCorrupt. A TreeSource that can
// prefetch (Reader) loads all trees first in batched requests.
func Walk(ctx context.Context, src TreeSource, root ID, fn WalkFunc) error {
	return walkTrees(ctx, src, root, false, fn)
}

// walkTrees is Walk, in name order or, with bundleOrder, in the order of
// the bundle hash's leaves: UTF-16 order of the full paths. That is the
// order of a walk that takes each directory's entries in UTF-16 order of
// their names, a directory's name followed by '/' (two paths first differ
// in their first differing component, or one ends where the other goes on
// with '/'), so no walk needs more than the path it is at.
func walkTrees(ctx context.Context, src TreeSource, root ID, bundleOrder bool, fn WalkFunc) error {
	if p, ok := src.(prefetcher); ok {
		if err := p.Prefetch(ctx, root); err != nil {
			return err
		}
	}
	onPath := map[ID]bool{}
	var walk func(id ID, prefix string, depth int) error
	walk = func(id ID, prefix string, depth int) error {
		if depth >= MaxDepth {
			return corruptf("trees nested deeper than %d at %s", MaxDepth, displayPath(prefix))
		}
		if onPath[id] {
			return corruptf("tree cycle: %s contains itself (tree %s)", displayPath(prefix), id.Short())
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		t, err := src.Tree(ctx, id)
		if err != nil {
			return err
		}
		onPath[id] = true
		defer delete(onPath, id)
		var order []int
		if bundleOrder {
			order = leafOrder(t)
		}
		for j := range t.Entries {
			i := j
			if order != nil {
				i = order[j]
			}
			e := &t.Entries[i]
			p := e.Name
			if prefix != "" {
				p = prefix + "/" + e.Name
			}
			err := fn(p, e)
			if e.Type == EntryDir {
				if errors.Is(err, fs.SkipDir) {
					continue
				}
				if err == nil {
					err = walk(e.Subtree(), p, depth+1)
				}
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	return walk(root, "", 0)
}

// leafOrder returns the indexes of t's entries in UTF-16 order of their
// names, a directory's name followed by '/'; nil when that is the name
// order.
func leafOrder(t *Tree) []int {
	key := func(e *Entry) string {
		if e.Type == EntryDir {
			return e.Name + "/"
		}
		return e.Name
	}
	var order []int
	for i := 1; i < len(t.Entries); i++ {
		if hash.Compare(key(&t.Entries[i-1]), key(&t.Entries[i])) > 0 {
			order = make([]int, len(t.Entries))
			break
		}
	}
	if order == nil {
		return nil
	}
	keys := make([]string, len(t.Entries))
	for i := range t.Entries {
		order[i], keys[i] = i, key(&t.Entries[i])
	}
	slices.SortFunc(order, func(a, b int) int { return hash.Compare(keys[a], keys[b]) })
	return order
}

// Summary is what a commit's trees say about its files.
type Summary struct {
	BundleHash hash.Digest
	Files      int64
	Dirs       int64
	Bytes      int64
}

// Summarize computes the bundle hash of the tree root (docs/design.md §2:
// per-file leaves keccak256(path ‖ 0x00 ‖ sha256) in UTF-16 path order)
// and counts its files, directories and bytes, from the trees alone: no
// file content is downloaded. Symlinks count nowhere, as in the hasher. A root tree holding a top-level
// bundle.lock.json or receipts.ndjson is ErrCorrupt (they live beside it).
func Summarize(ctx context.Context, src TreeSource, root ID) (Summary, error) {
	var s Summary
	bundle := hash.NewBundler()
	err := walkTrees(ctx, src, root, true, func(p string, e *Entry) error {
		if p == LockFile || p == ReceiptsFile {
			return corruptf("the root tree holds %s, which belongs beside it", p)
		}
		switch e.Type {
		case EntryDir:
			s.Dirs++
			return nil
		case EntrySymlink:
			return nil // like the hasher: no symlink counts
		}
		s.Files++
		if e.Size > maxJSONInt-s.Bytes {
			return corruptf("files total more than %d bytes", int64(maxJSONInt))
		}
		s.Bytes += e.Size
		bundle.Add(p, e.SHA256)
		return nil
	})
	s.BundleHash = bundle.Sum()
	if err != nil {
		return Summary{}, err
	}
	return s, nil
}

// verifySummary checks a commit's recorded bundle hash and totals against
// its trees.
func verifySummary(c *Commit, s Summary) error {
	switch {
	case s.BundleHash != c.BundleHash:
		return corruptf("the trees hash to %s, the commit says %s", s.BundleHash, c.BundleHash)
	case s.Files != c.Files || s.Bytes != c.Bytes:
		return corruptf("the trees hold %d files of %d bytes, the commit says %d files of %d bytes", s.Files, s.Bytes, c.Files, c.Bytes)
	}
	return nil
}

// ChangeKind says how a path differs between two commits.
type ChangeKind uint8

// Kinds of change.
const (
	Added ChangeKind = iota + 1
	Removed
	Modified // a file's content, a file's or directory's mode, a file becoming a link or no longer one
)

func (k ChangeKind) String() string {
	switch k {
	case Added:
		return "added"
	case Removed:
		return "removed"
	case Modified:
		return "modified"
	}
	return fmt.Sprintf("change(%d)", uint8(k))
}

// Change is one difference between two commits. Old is nil for Added,
// New for Removed. A path that changed type (file ↔ directory) is
// reported Removed then Added.
type Change struct {
	Path string
	Kind ChangeKind
	Old  *Entry
	New  *Entry
}

// Diff compares the trees rootA (from a) and rootB (from b) and calls fn
// for every added, removed or modified path, in name order; the contents
// of an added or removed directory are reported too. Subtrees with equal
// ids are skipped without being loaded. No file content is downloaded.
func Diff(ctx context.Context, a TreeSource, rootA ID, b TreeSource, rootB ID, fn func(Change) error) error {
	for _, s := range []struct {
		src  TreeSource
		root ID
	}{{a, rootA}, {b, rootB}} {
		if p, ok := s.src.(prefetcher); ok {
			if err := p.Prefetch(ctx, s.root); err != nil {
				return err
			}
		}
	}
	all := func(src TreeSource, e *Entry, p string, kind ChangeKind) error {
		report := func(p string, e *Entry) error {
			if kind == Added {
				return fn(Change{Path: p, Kind: Added, New: e})
			}
			return fn(Change{Path: p, Kind: Removed, Old: e})
		}
		if err := report(p, e); err != nil || e.Type != EntryDir {
			return err
		}
		return Walk(ctx, src, e.Subtree(), func(sub string, e *Entry) error { return report(p+"/"+sub, e) })
	}
	var diff func(ta, tb ID, prefix string, depth int) error
	diff = func(ta, tb ID, prefix string, depth int) error {
		if ta == tb {
			return nil
		}
		if depth >= MaxDepth {
			return corruptf("trees nested deeper than %d at %s", MaxDepth, displayPath(prefix))
		}
		x, err := a.Tree(ctx, ta)
		if err != nil {
			return err
		}
		y, err := b.Tree(ctx, tb)
		if err != nil {
			return err
		}
		i, j := 0, 0
		for i < len(x.Entries) || j < len(y.Entries) {
			if err := ctx.Err(); err != nil {
				return err
			}
			var ea, eb *Entry
			switch {
			case j == len(y.Entries) || i < len(x.Entries) && x.Entries[i].Name < y.Entries[j].Name:
				ea = &x.Entries[i]
				i++
			case i == len(x.Entries) || y.Entries[j].Name < x.Entries[i].Name:
				eb = &y.Entries[j]
				j++
			default:
				ea, eb = &x.Entries[i], &y.Entries[j]
				i++
				j++
			}
			name := ""
			if ea != nil {
				name = ea.Name
			} else {
				name = eb.Name
			}
			p := name
			if prefix != "" {
				p = prefix + "/" + name
			}
			switch {
			case eb == nil:
				err = all(a, ea, p, Removed)
			case ea == nil:
				err = all(b, eb, p, Added)
			case ea.Type != eb.Type:
				if err = all(a, ea, p, Removed); err == nil {
					err = all(b, eb, p, Added)
				}
			case ea.Type == EntryDir:
				if ea.Mode != eb.Mode {
					err = fn(Change{Path: p, Kind: Modified, Old: ea, New: eb})
				}
				if err == nil {
					err = diff(ea.Subtree(), eb.Subtree(), p, depth+1)
				}
			case ea.Size != eb.Size || ea.SHA256 != eb.SHA256 || ea.Mode != eb.Mode || ea.Link != eb.Link:
				err = fn(Change{Path: p, Kind: Modified, Old: ea, New: eb})
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	return diff(rootA, rootB, "", 0)
}

// Lookup returns the entry at path (a file or a directory, '/'-separated)
// below root.
func Lookup(ctx context.Context, src TreeSource, root ID, path string) (*Entry, error) {
	id := root
	parts := strings.Split(path, "/")
	for i, name := range parts {
		if err := CheckName(name); err != nil {
			return nil, fmt.Errorf("%w: %q", ErrNotFound, path)
		}
		t, err := src.Tree(ctx, id)
		if err != nil {
			return nil, err
		}
		e := t.Find(name)
		if e == nil || (i < len(parts)-1 && e.Type != EntryDir) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, path)
		}
		if i == len(parts)-1 {
			return e, nil
		}
		id = e.Subtree()
	}
	return nil, fmt.Errorf("%w: %s", ErrNotFound, path)
}
