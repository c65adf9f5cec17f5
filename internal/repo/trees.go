package repo

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"slices"

	"github.com/hermesd/hermesd/internal/hash"
)

// finishTrees encodes every directory bottom-up, seals the trees no live
// pack holds, computes the bundle hash and how much of each indexed pack
// the commit references.
func (bd *build) finishTrees(ctx context.Context) (hash.Digest, error) {
	bd.usage, bd.seen = map[*indexPack]int64{}, map[Handle]struct{}{}
	ref := bd.ref
	// The chunk ids of files read in several chunks: every sealer is done.
	for _, c := range bd.chunked {
		ids := make([]ID, len(c.slots))
		for i, s := range c.slots {
			ids[i] = *s
		}
		c.e.Chunks = ids
	}
	bd.chunked = nil
	if err := bd.resolveLinks(); err != nil {
		return hash.Digest{}, err
	}
	var enc []byte
	var walk func(d *dirNode, path string) error
	walk = func(d *dirNode, path string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		t := d.tree
		kept, subs := t.Entries[:0], d.subs
		for _, e := range t.Entries {
			switch e.Type {
			case EntryDir:
				sub := subs[0]
				subs = subs[1:]
				p := e.Name
				if path != "" {
					p = path + "/" + e.Name
				}
				if err := walk(sub, p); err != nil {
					return err
				}
				if !d.same {
					e.SHA256 = sub.id
				}
				bd.dirs++
			case EntryFile:
				for _, id := range e.Chunks {
					ref(Handle{TypeChunk, id})
				}
				bd.files++
				bd.bytes += e.Size
			case EntrySymlink: // kept; it counts toward nothing
			default:
				continue // vanished (never in a previous commit's tree)
			}
			if !d.same {
				kept = append(kept, e)
			}
		}
		d.subs = nil
		encode := func() error {
			var err error
			if enc, err = t.appendEncoding(enc[:0]); err != nil {
				return fmt.Errorf("tree of %s: %w", displayPath(path), err)
			}
			if len(enc) > bd.maxTree {
				return fmt.Errorf("%w: the tree of %s is %d bytes, more than a pack of %d bytes can hold (too many entries)",
					ErrTooLarge, displayPath(path), len(enc), bd.b.MaxPackSize)
			}
			return nil
		}
		if !d.same {
			t.Entries = kept
			if err := encode(); err != nil {
				return err
			}
			d.id = sha256.Sum256(enc)
		}
		bd.trees[d.id] = t
		h := Handle{TypeTree, d.id}
		if bd.claim(h) {
			// A kept tree is encoded only when it must be written again
			// (its pack is being repacked).
			if d.same {
				if err := encode(); err != nil {
					return err
				}
			}
			if err := bd.sealObject(ctx, h, enc); err != nil {
				return err
			}
			bd.stats.treesNew.Add(1)
		} else {
			bd.stats.treesReused.Add(1)
		}
		ref(h) // after the claim: a tree being repacked is new now
		return nil
	}
	if err := walk(bd.root, ""); err != nil {
		return hash.Digest{}, err
	}
	sum, err := Summarize(ctx, bd.trees, bd.root.id)
	if err != nil {
		return hash.Digest{}, err
	}
	return sum.BundleHash, nil
}

// ref counts h toward the usage of the indexed pack holding it, unless it
// was claimed for a new pack or counted already.
func (bd *build) ref(h Handle) {
	bd.mu.Lock()
	_, isNew := bd.pending[h]
	bd.mu.Unlock()
	if isNew {
		return // in a new pack: nothing to count
	}
	if _, ok := bd.seen[h]; ok {
		return
	}
	bd.seen[h] = struct{}{}
	if l, ok := bd.locate(h); ok {
		bd.usage[l.pack] += l.n
	}
}

// checkTrees vouches for the trees' bundle hash: it must be Want, or
// (a snapshot without Want) every racy file must read the same again.
func (bd *build) checkTrees(ctx context.Context) error {
	if want := bd.in.Want; want != (hash.Digest{}) && bd.bundle != want {
		return fmt.Errorf("%w: the snapshot's files hash to %s, expected %s", ErrChanged, bd.bundle, want)
	}
	return bd.checkRacy(ctx)
}

// linkedFile is a file read that has more than one name (st_nlink > 1).
type linkedFile struct {
	e        *Entry
	path     string
	dev, ino uint64
}

// resolveLinks makes every name of a file that the walk meets after the
// file's first name a hard link entry naming that first name (tar and
// restic restore hard links as links, and so does hermesd: an agent that
// writes through one name sees the change through the other). Names
// outside the brain are not its business: a file with one name in it is a
// file. Both names were read; their contents must agree, or the file
// changed in between (ErrChanged).
func (bd *build) resolveLinks() error {
	ls := slices.DeleteFunc(bd.linked, func(l linkedFile) bool { return l.e.Type != EntryFile })
	bd.linked = nil
	if len(ls) < 2 {
		return nil
	}
	slices.SortFunc(ls, func(a, b linkedFile) int {
		if c := cmp.Compare(a.dev, b.dev); c != 0 {
			return c
		}
		if c := cmp.Compare(a.ino, b.ino); c != 0 {
			return c
		}
		return WalkCompare(a.path, b.path)
	})
	for i := 0; i < len(ls); {
		first, j := ls[i], i+1
		for ; j < len(ls) && ls[j].dev == first.dev && ls[j].ino == first.ino; j++ {
			e := ls[j].e
			if e.Size != first.e.Size || e.SHA256 != first.e.SHA256 {
				return fmt.Errorf("%w: %s and %s are one file, read with different contents", ErrChanged, first.path, ls[j].path)
			}
			e.Link, e.Mode, e.Mtime, e.Chunks = first.path, 0, 0, nil
		}
		i = j
	}
	return nil
}

// WalkCompare orders two '/'-separated paths as a depth-first walk in name
// order meets them (Walk, tree order): by their names, component by
// component, bytewise.
func WalkCompare(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		switch {
		case x == '/':
			return -1 // a's name ends here: a prefix of b's
		case y == '/':
			return +1
		}
		return cmp.Compare(x, y)
	}
	return cmp.Compare(len(a), len(b))
}
