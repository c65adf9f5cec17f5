package repo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/hash"
)

// dirNode is one directory of the brain being snapshotted. The walker
// makes its tree's entries in tree order with room for every listed name,
// so a pointer to a file's entry stays valid while the walker appends: a
// reader fills the entry in place. finishTrees fills the directories'
// subtrees and drops what vanished. Nothing else is kept per file but,
// in a snapshot that is the hash, its read (FileReads), which finds the
// rest in the entry.
//
// A directory that is exactly as in the previous commit (same names,
// modes and file contents, its subdirectories too) keeps the previous
// commit's tree itself (same): a snapshot of a large, mostly unchanged
// brain then holds one set of trees, not two.
type dirNode struct {
	path string // '/'-separated, relative to the brain ("" for the root)
	tree *Tree
	subs []*dirNode // one per EntryDir entry, in order
	id   ID
	same bool // tree is the previous commit's tree id
}

// entryGone marks an entry whose file or directory vanished (or became
// something else) before it could be read: it is left out of the tree.
const entryGone EntryType = 0

type fileJob struct {
	dir   *dirNode // the directory whose tree holds e
	e     *Entry
	f     fsys.File
	path  string
	start time.Time // just before the open
}

// walkDir lists the directory rel, through the same walker (and overlay)
// as the hasher: a file it can reuse costs no system call beyond the
// listing (its mode comes from Known, like its contents), the others go to
// the readers, which stat them once open. It returns the directory's node
// and permission bits, or a nil node when the directory vanished before it
// could be listed: it is left out, like a vanished file. prev is the
// directory's tree in the previous commit (nil if none), prevID its id.
func (bd *build) walkDir(ctx context.Context, rel string, prev *Tree, prevID ID, depth int) (*dirNode, fsys.Info, error) {
	if depth >= MaxDepth {
		return nil, fsys.Info{}, fmt.Errorf("%w: %s: directories nested deeper than %d", ErrTooLarge, displayPath(rel), MaxDepth)
	}
	if err := ctx.Err(); err != nil {
		return nil, fsys.Info{}, err
	}
	ents, info, err := bd.fsroot.ReadDir(rel)
	if err != nil {
		if rel != "" && fsys.IsGone(err) {
			return nil, fsys.Info{}, nil
		}
		return nil, fsys.Info{}, fmt.Errorf("repo: read directory %s: %w", displayPath(rel), err)
	}
	if len(ents) > maxDirEntries {
		return nil, fsys.Info{}, fmt.Errorf("%w: %s: more than %d entries", ErrTooLarge, displayPath(rel), maxDirEntries)
	}
	slices.SortFunc(ents, func(a, b fsys.Entry) int { return strings.Compare(a.Name, b.Name) }) // bytewise: the tree order
	// Never grown: readers hold pointers to its elements.
	d := &dirNode{path: rel, tree: &Tree{Entries: make([]Entry, 0, len(ents))}}
	// same: every entry so far is the one at its place in prev.
	same := prev != nil
	sameAs := func(e *Entry) bool {
		i := len(d.tree.Entries) - 1
		if i >= len(prev.Entries) {
			return false
		}
		pe := &prev.Entries[i]
		// A file's Link is never set yet (resolveLinks): a hard link of
		// prev's is not the same; a symlink is if its target is.
		return pe.Name == e.Name && pe.Type == e.Type && pe.Mode == e.Mode && pe.Mtime == e.Mtime && !pe.Untimed && pe.Link == e.Link
	}
	for _, ent := range ents {
		name := ent.Name
		p := name
		if rel != "" {
			p = rel + "/" + name
		}
		isDir, isFile := ent.Type == fs.ModeDir, ent.Type == 0
		if ent.Type == fs.ModeSymlink {
			e, err := bd.symlink(rel, p, name)
			if err != nil {
				return nil, fsys.Info{}, err
			}
			if e != nil {
				d.tree.Entries = append(d.tree.Entries, *e)
				same = same && sameAs(&d.tree.Entries[len(d.tree.Entries)-1])
			} else {
				same = false
			}
			continue
		}
		if !isDir && !isFile {
			continue // socket, fifo, device: skipped like the hasher
		}
		if err := CheckName(name); err != nil {
			return nil, fsys.Info{}, fmt.Errorf("%w (at %q)", err, p)
		}
		if rel == "" && (name == LockFile || name == ReceiptsFile) {
			if isDir {
				return nil, fsys.Info{}, fmt.Errorf("%w: top-level %s is a directory", ErrName, name)
			}
			continue // read after the trees (readHeadFile)
		}
		var pe *Entry
		if prev != nil {
			pe = prev.Find(name)
		}
		if isDir {
			var sub *Tree
			var subID ID
			if pe != nil && pe.Type == EntryDir {
				subID = pe.Subtree()
				if sub, err = bd.in.Trees.Tree(ctx, subID); err != nil {
					return nil, fsys.Info{}, fmt.Errorf("load previous tree of %s: %w", p, err)
				}
			}
			c, di, err := bd.walkDir(ctx, p, sub, subID, depth+1)
			if err != nil {
				return nil, fsys.Info{}, err
			}
			if c != nil {
				d.tree.Entries = append(d.tree.Entries, Entry{Name: name, Type: EntryDir, Mode: di.Mode & fsys.Meta, Mtime: di.Mtime})
				d.subs = append(d.subs, c)
				same = same && c.same && sameAs(&d.tree.Entries[len(d.tree.Entries)-1])
			} else {
				same = false
			}
			continue
		}
		d.tree.Entries = append(d.tree.Entries, Entry{Name: name, Type: EntryFile})
		e := &d.tree.Entries[len(d.tree.Entries)-1]
		if k, ok := bd.reusable(p, pe); ok {
			e.Mode, e.Mtime, e.Size, e.SHA256, e.Chunks = k.Stat.Mode&fsys.Meta, k.Stat.Mtime, pe.Size, pe.SHA256, pe.Chunks
			bd.stats.filesReused.Add(1)
			bd.stats.chunksReused.Add(int64(len(pe.Chunks)))
			same = same && sameAs(e)
			continue
		}
		same = false
		if err := bd.submit(ctx, d, p, e); err != nil {
			return nil, fsys.Info{}, err
		}
	}
	if same && len(d.tree.Entries) == len(prev.Entries) {
		// Nothing differs: keep prev (the fresh entries go now).
		d = &dirNode{path: rel, tree: prev, subs: d.subs, id: prevID, same: true}
	}
	return d, info, nil
}

// symlink returns the entry of the symlink name at p in the directory rel
// (read, never followed), or nil when it is not stored: it vanished or is
// no longer a link, its target cannot be kept (longer than
// fsys.MaxSymlinkLen bytes), its name is outside the name policy, or it
// stands in the place of the top-level lock or receipts, which hermesd
// reads and writes as regular files. Like the hasher, which counts no
// symlink, a snapshot never fails because of one.
func (bd *build) symlink(rel, p, name string) (*Entry, error) {
	if CheckName(name) != nil || rel == "" && (name == LockFile || name == ReceiptsFile) {
		return nil, nil
	}
	target, info, err := bd.fsroot.Readlink(p)
	switch {
	case err == nil:
	case fsys.IsGone(err) || errors.Is(err, fsys.ErrSymlinkTarget):
		return nil, nil
	default:
		return nil, fmt.Errorf("repo: %w", err)
	}
	if fsys.CheckSymlinkTarget(target) != nil {
		return nil, nil
	}
	return &Entry{Name: name, Type: EntrySymlink, Mtime: info.Mtime, Link: target}, nil
}

// reusable returns the hash cache's entry for the file at path when the
// file may keep the previous commit's entry pe without being read: the
// cache vouches for the same size and SHA-256 and has the stat data the
// tree records (mode, mtime), the file has one name (a file of several is
// read, so that its names are found: resolveLinks), and every chunk is
// in a live pack that is not being repacked (or was sealed in this
// snapshot).
func (bd *build) reusable(path string, pe *Entry) (hash.File, bool) {
	if pe == nil || pe.Type != EntryFile || pe.Link != "" || bd.in.Known == nil {
		return hash.File{}, false
	}
	k, ok := bd.in.Known.Lookup(path)
	if !ok || k.Size != pe.Size || k.SHA256 != pe.SHA256 || k.Stat == (fsys.Info{}) || k.Stat.Nlink > 1 {
		return hash.File{}, false
	}
	for _, id := range pe.Chunks {
		if !bd.available(Handle{TypeChunk, id}) {
			return hash.File{}, false
		}
	}
	return k, true
}

func (bd *build) submit(ctx context.Context, dir *dirNode, path string, e *Entry) error {
	start := time.Now()
	if bd.b.now != nil {
		start = bd.b.now()
	}
	f, err := bd.fsroot.Open(path)
	if err != nil {
		if fsys.IsGone(err) {
			e.Type = entryGone
			return nil
		}
		return fmt.Errorf("repo: open %s: %w", path, err)
	}
	select {
	case bd.jobs <- fileJob{dir: dir, e: e, f: f, path: path, start: start}:
		return nil
	case <-ctx.Done():
		f.Close()
		return ctx.Err()
	}
}

func displayPath(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}
