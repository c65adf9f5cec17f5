package hash

import (
	"context"
	"fmt"

	"github.com/hermesd/hermesd/internal/fsys"
)

// Result describes one hash of a tree.
type Result struct {
	Digest Digest
	// Links fingerprints the tree's symlinks (Links.Digest; zero for
	// none), which the bundle hash leaves out. Cache passes fill it.
	Links Digest
	// Files lists the hashed files in key order (excluded names are not
	// in it). Dir fills it; the Cache methods leave it nil (see Cache.Files).
	Files []File
	// Count and Bytes are the number and total size of the hashed files.
	Count int
	Bytes int64
	// Read and ReadBytes count the files whose contents were read in this
	// pass (the rest came from the cache).
	Read      int
	ReadBytes int64
}

// Dir returns the bundle hash of the tree at root, reading every file once,
// in parallel. A missing root, or one that is not a directory, hashes to
// Null, as with the reference. Symlinks are never followed (the root itself
// may be one); a name outside the policy of fsys.CheckName (invalid UTF-8,
// a backslash, ...) is an ErrName error naming the file. Files that vanish while the walk runs are
// left out. With opts.Overlay the tree is hashed as the overlay shows it.
func Dir(ctx context.Context, root string, opts Options) (Result, error) {
	h, ok, err := openTree(root, opts.Overlay)
	if err != nil || !ok {
		return Result{Digest: Null}, err
	}
	defer h.Close()
	s := &scanner{root: h, workers: opts.workers()}
	ents, st, err := s.walk(ctx, "")
	if err != nil {
		return Result{}, err
	}
	res := Result{Digest: bundleOf(ents), Files: make([]File, len(ents)), Count: len(ents), Read: st.read, ReadBytes: st.readBytes}
	for i, e := range ents {
		res.Files[i] = e.file()
		res.Bytes += e.size
	}
	return res, nil
}

// openTree opens root, seen through ov; ok is false (and err nil) when
// root does not exist or is not a directory.
func openTree(root string, ov *fsys.Overlay) (h fsys.Root, ok bool, err error) {
	h, err = fsys.OpenRootOverlay(root, ov)
	if err != nil {
		if fsys.IsGone(err) {
			return h, false, nil
		}
		return h, false, fmt.Errorf("hash: %w", err)
	}
	return h, true, nil
}
