package watch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"path/filepath"
	"time"
)

// fingerprint digests the tree under root for the periodic rescan of a
// directory that cannot be watched: every entry's relative path and type,
// and for non-directories size, modification and change time and inode.
// It keeps O(1) memory per root, and the consumer hears of a poll only when
// the digest moved. Directory times are left out: hermesd's own atomic
// writes (ignored files) touch the root's mtime on every snapshot.
//
// The scan is racy when an entry's time is within window of now: a same-size
// write later in the same timestamp granule would not move the digest, so
// the caller must report the next poll as a change whatever its digest.
// A missing root returns an error wrapping fs.ErrNotExist; other errors
// (an unreadable directory) are mixed into the digest and the first is
// returned with it.
func fingerprint(root string, ignore func(string) bool, seed maphash.Seed, now time.Time, window time.Duration) (scan, error) {
	var sc scan
	var h maphash.Hash
	h.SetSeed(seed)
	var num [8]byte
	put := func(v uint64) {
		binary.LittleEndian.PutUint64(num[:], v)
		h.Write(num[:])
	}
	near := func(t int64) bool {
		d := now.UnixNano() - t
		return d < int64(window) && d > -int64(window)
	}
	prefix := dirPrefix(root)
	var firstErr error
	werr := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if p == root {
			if err != nil {
				return err // the root itself: missing or unreadable
			}
			return nil
		}
		rel := filepath.ToSlash(p[len(prefix):])
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while we walked
			}
			h.WriteString("!" + rel + "\x00" + err.Error() + "\x00")
			if firstErr == nil {
				firstErr = fmt.Errorf("scan %s: %w", p, err)
			}
			return nil
		}
		if ignore(rel) {
			return nil
		}
		h.WriteString(rel)
		h.WriteByte(0)
		put(uint64(d.Type()))
		if d.IsDir() {
			sc.dirs++
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil // removed while we walked; its parent's listing changed anyway
		}
		ctime, ino := statExtra(fi)
		mtime := fi.ModTime().UnixNano()
		put(uint64(fi.Size()))
		put(uint64(mtime))
		put(uint64(ctime))
		put(ino)
		sc.racy = sc.racy || near(mtime) || (ctime != 0 && near(ctime))
		return nil
	})
	if werr != nil {
		return scan{}, fmt.Errorf("scan %s: %w", root, werr)
	}
	sc.sum = h.Sum64()
	sc.dirs++ // the root
	return sc, firstErr
}

// scan is what a fingerprint found.
type scan struct {
	sum  uint64
	racy bool // an entry's time is too recent to trust: report the next poll
	dirs int  // directories, the watches the tree would need
}
