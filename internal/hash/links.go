package hash

import (
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"strings"

	"github.com/hermesd/hermesd/internal/fsys"
)

// Links are the symlinks of a tree: key → target, verbatim. They count in
// no bundle hash (as in the reference, docs/design.md §2), yet snapshots
// store them, so a change to a symlink alone (created, removed,
// retargeted) must still be seen: Digest fingerprints them, beside the
// bundle hash, without changing what the bundle hash is.
type Links map[string]string

// unreadableTarget stands for a target that cannot be read (longer than
// fsys.MaxSymlinkLen, say): it still fingerprints the link's presence.
const unreadableTarget = "\x00unreadable"

// Digest is the fingerprint of ls: SHA-256 over its keys in key order,
// each as key ‖ 0x00 ‖ target ‖ 0x00; the zero Digest for no symlinks.
func (ls Links) Digest() Digest {
	if len(ls) == 0 {
		return Digest{}
	}
	keys := make([]string, 0, len(ls))
	for k := range ls {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, Compare)
	h := sha256.New()
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(ls[k]))
		h.Write([]byte{0})
	}
	var d Digest
	copy(d[:], h.Sum(nil))
	return d
}

// readLinks reads the targets of the symlinks at keys into ls; one gone
// meanwhile is left out.
func readLinks(root fsys.Root, keys []string, ls Links) error {
	for _, k := range keys {
		target, _, err := root.Readlink(k)
		switch {
		case err == nil:
			ls[k] = target
		case fsys.IsGone(err):
			delete(ls, k)
		case errors.Is(err, fsys.ErrSymlinkTarget):
			ls[k] = unreadableTarget
		default:
			return err
		}
	}
	return nil
}

// ReadLinks returns the symlinks of the tree at root as ov shows it,
// from directory listings alone (no file is read): what Cache.Links would
// hold after a Rescan. A missing root has none.
func ReadLinks(ctx context.Context, root string, ov *fsys.Overlay) (Links, error) {
	h, ok, err := openTree(root, ov)
	if err != nil || !ok {
		return Links{}, err
	}
	defer h.Close()
	var keys []string
	err = walkTree(ctx, h, "", func(string) error { return nil }, func(p string) { keys = append(keys, p) })
	if err != nil {
		return nil, err
	}
	ls := Links{}
	return ls, readLinks(h, keys, ls)
}

// dropLinks removes from ls every link at or below one of paths.
func dropLinks(ls Links, paths []string) {
	if len(ls) == 0 || len(paths) == 0 {
		return
	}
	named := make(map[string]bool, len(paths))
	for _, p := range paths {
		named[p] = true
	}
	for k := range ls {
		for p := k; ; {
			if named[p] {
				delete(ls, k)
				break
			}
			i := strings.LastIndexByte(p, '/')
			if i < 0 {
				break
			}
			p = p[:i]
		}
	}
}
