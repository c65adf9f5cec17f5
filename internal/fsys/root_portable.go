//go:build !linux || fsys_portable

package fsys

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

// Inodes reports whether an Info carries the inode and device that tell
// the names of one file (hard links) apart from copies: not here, so a
// snapshot stores each name of a file as a file of its own.
const Inodes = false

// The portable implementation, on os.Root. os.Root never leaves its root
// but follows symlinks that stay inside it, so paths are resolved here one
// component at a time: Lstat the name, refuse a symlink, open it, and check
// with os.SameFile that what was opened is what was looked at (a symlink
// swapped in between would open something else).

// Root is an open directory, the root of a walk; Close releases it. The
// zero Root holds nothing (its Close does nothing).
type Root struct {
	r  *os.Root
	ov *Overlay
}

// File is a file opened for reading by Root.Open. The zero File holds
// nothing (its Close does nothing).
type File struct {
	f     *os.File
	subst bool // opened in place of the path by an Overlay
}

// errSwapped: a path changed between the look and the open; IsGone is true
// for it, as for any path that is no longer what the walker saw.
var errSwapped = errors.New("path changed while it was opened")

// OpenRoot opens the directory at path. The path itself may lead through
// symlinks; nothing below it is followed.
func OpenRoot(path string) (Root, error) { return OpenRootOverlay(path, nil) }

// OpenRootOverlay is OpenRoot for a Root that shows the tree through ov
// (nil: as it is).
func OpenRootOverlay(path string, ov *Overlay) (Root, error) {
	r, err := os.OpenRoot(path)
	if err != nil {
		// os.OpenRoot reports a file with an error of its own making;
		// make it ENOTDIR as on Linux.
		if fi, serr := os.Stat(path); serr == nil && !fi.IsDir() {
			return Root{}, &fs.PathError{Op: "open", Path: path, Err: syscall.ENOTDIR}
		}
		return Root{}, err
	}
	return Root{r: r, ov: ov}, nil
}

// Close closes the root.
func (r Root) Close() error {
	if r.r == nil {
		return nil
	}
	return r.r.Close()
}

// Open opens the file rel for reading (non-blocking where the system has
// O_NONBLOCK, so a fifo put in the place of a listed file cannot block). It
// does not check the file's type: callers Stat the File.
func (r Root) Open(rel string) (File, error) {
	f, subst, err := r.open(rel, os.O_RDONLY)
	if err != nil {
		return File{}, err
	}
	return File{f: f, subst: subst}, nil
}

// OpenFile opens rel as Open does, but with the access mode of flag
// (os.O_RDONLY or os.O_RDWR; any other bit is refused), as an *os.File:
// for the few files a caller must lock or write in place, never create.
func (r Root) OpenFile(rel string, flag int) (*os.File, error) {
	if flag != os.O_RDONLY && flag != os.O_RDWR {
		return nil, &fs.PathError{Op: "open", Path: rel, Err: syscall.EINVAL}
	}
	f, _, err := r.open(rel, flag)
	return f, err
}

// open opens rel, or what the overlay shows in its place.
func (r Root) open(rel string, flag int) (*os.File, bool, error) {
	switch target, k := r.ov.lookup(rel); k {
	case substituted:
		f, err := openSubst(target, flag)
		if err != nil {
			return nil, false, substError("open", rel, target, err)
		}
		return f, true, nil
	case gone:
		return nil, false, r.ov.errGone("open", rel)
	}
	dir, base, err := r.parent(rel)
	if err != nil {
		return nil, false, err
	}
	defer closeDir(r, dir)
	fi, err := dir.Lstat(base)
	if err != nil {
		return nil, false, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, false, &fs.PathError{Op: "open", Path: rel, Err: syscall.ELOOP}
	}
	f, err := dir.OpenFile(base, flag|nonblock, 0)
	if err != nil {
		return nil, false, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, false, err
	}
	if !os.SameFile(fi, st) {
		f.Close()
		return nil, false, &fs.PathError{Op: "open", Path: rel, Err: errSwapped}
	}
	return f, false, nil
}

// openSubst opens an overlay's substitute, refusing a symlink.
func openSubst(target string, flag int) (*os.File, error) {
	fi, err := os.Lstat(target)
	if err != nil {
		return nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, syscall.ELOOP
	}
	f, err := os.OpenFile(target, flag|nonblock, 0)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !os.SameFile(fi, st) {
		f.Close()
		return nil, errSwapped
	}
	return f, nil
}

// lstatSubst returns the Info of target, the substitute for rel.
func lstatSubst(rel, target string) (Info, error) {
	fi, err := os.Lstat(target)
	if err != nil {
		return Info{}, substError("stat", rel, target, err)
	}
	info := infoOf(fi)
	info.Overlay = true
	return info, nil
}

// Stat returns the Info of rel, which is not followed if it is a symlink;
// no component of rel is.
func (r Root) Stat(rel string) (Info, error) {
	switch target, k := r.ov.lookup(rel); k {
	case substituted:
		return lstatSubst(rel, target)
	case gone:
		return Info{}, r.ov.errGone("stat", rel)
	}
	if rel == "" {
		fi, err := r.r.Stat(".")
		if err != nil {
			return Info{}, err
		}
		return infoOf(fi), nil
	}
	dir, base, err := r.parent(rel)
	if err != nil {
		return Info{}, err
	}
	defer closeDir(r, dir)
	fi, err := dir.Lstat(base)
	if err != nil {
		return Info{}, err
	}
	return infoOf(fi), nil
}

// Lstat is Stat: the portable implementation has no cheaper safe form.
func (r Root) Lstat(rel string) (Info, error) { return r.Stat(rel) }

// ReadDir lists the directory rel ("" for the root) and returns its
// entries (an overlay's substitutes last) and the directory's own Info.
func (r Root) ReadDir(rel string) ([]Entry, Info, error) {
	if _, k := r.ov.lookup(rel); k != live {
		return nil, Info{}, r.ov.errGone("open", rel)
	}
	dir, err := r.dir(rel)
	if err != nil {
		return nil, Info{}, err
	}
	defer closeDir(r, dir)
	d, err := dir.Open(".")
	if err != nil {
		return nil, Info{}, err
	}
	defer d.Close()
	fi, err := d.Stat()
	if err != nil {
		return nil, Info{}, err
	}
	if !fi.IsDir() {
		return nil, Info{}, &fs.PathError{Op: "readdir", Path: rel, Err: syscall.ENOTDIR}
	}
	list, err := d.ReadDir(-1)
	if err != nil {
		return nil, Info{}, err
	}
	ents := make([]Entry, 0, len(list))
	for _, e := range list {
		ents = append(ents, Entry{Name: e.Name(), Type: e.Type()})
	}
	return r.ov.list(rel, ents), infoOf(fi), nil
}

// Read reads from the file (io.Reader).
func (f File) Read(b []byte) (int, error) { return f.f.Read(b) }

// Stat returns the Info of the open file.
func (f File) Stat() (Info, error) {
	fi, err := f.f.Stat()
	if err != nil {
		return Info{}, err
	}
	info := infoOf(fi)
	info.Overlay = f.subst
	return info, nil
}

// Close closes the file.
func (f File) Close() error {
	if f.f == nil {
		return nil
	}
	return f.f.Close()
}

// IsGone reports whether err means that a path vanished or is no longer
// what the walker saw (a symlink or a file where a directory was), which a
// walk of a changing tree treats as "not there".
func IsGone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) ||
		errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EXDEV) || errors.Is(err, errSwapped) ||
		errors.Is(err, errNotSymlink)
}

// parent opens the directory holding rel and returns it with rel's last
// component.
func (r Root) parent(rel string) (*os.Root, string, error) {
	dirPath, base := "", rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		dirPath, base = rel[:i], rel[i+1:]
	}
	switch base {
	case "", ".":
		return nil, "", &fs.PathError{Op: "open", Path: rel, Err: syscall.EINVAL}
	case "..":
		return nil, "", &fs.PathError{Op: "open", Path: rel, Err: syscall.EXDEV} // as RESOLVE_BENEATH
	}
	dir, err := r.dir(dirPath)
	return dir, base, err
}

// dir opens the directory rel one component at a time, never through a
// symlink. For "" it returns the root itself (see closeDir).
func (r Root) dir(rel string) (*os.Root, error) {
	cur := r.r
	for c := range strings.SplitSeq(rel, "/") {
		if c == "" || c == "." {
			continue
		}
		next, err := child(cur, c)
		if cur != r.r {
			cur.Close()
		}
		if err != nil {
			return nil, err
		}
		cur = next
	}
	return cur, nil
}

func child(dir *os.Root, name string) (*os.Root, error) {
	if name == ".." {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EXDEV} // as RESOLVE_BENEATH
	}
	fi, err := dir.Lstat(name)
	if err != nil {
		return nil, err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ELOOP}
	case !fi.IsDir():
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ENOTDIR}
	}
	next, err := dir.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	st, err := next.Stat(".")
	if err == nil && !os.SameFile(fi, st) {
		err = &fs.PathError{Op: "open", Path: name, Err: errSwapped}
	}
	if err != nil {
		next.Close()
		return nil, err
	}
	return next, nil
}

func closeDir(r Root, dir *os.Root) {
	if dir != nil && dir != r.r {
		dir.Close()
	}
}

func infoOf(fi fs.FileInfo) Info {
	return Info{Size: fi.Size(), Mtime: fi.ModTime().UnixNano(), Mode: fi.Mode(), Nlink: linksOf(fi)}
}

// Readlink returns the target of the symlink rel, verbatim, and the
// symlink's own Info; no component of rel is followed, nor the link
// itself. A path that is no longer a symlink (or an overlay's substitute,
// a regular file) is an error IsGone matches.
func (r Root) Readlink(rel string) (string, Info, error) {
	switch _, k := r.ov.lookup(rel); k {
	case substituted:
		return "", Info{}, &fs.PathError{Op: "readlink", Path: rel, Err: errNotSymlink}
	case gone:
		return "", Info{}, r.ov.errGone("readlink", rel)
	}
	dir, base, err := r.parent(rel)
	if err != nil {
		return "", Info{}, err
	}
	defer closeDir(r, dir)
	fi, err := dir.Lstat(base)
	if err != nil {
		return "", Info{}, err
	}
	if fi.Mode().Type() != fs.ModeSymlink {
		return "", Info{}, &fs.PathError{Op: "readlink", Path: rel, Err: errNotSymlink}
	}
	target, err := dir.Readlink(base)
	if err != nil {
		return "", Info{}, err
	}
	// The link read must be the one looked at: a link swapped in between
	// would pair one link's target with another's time.
	if again, err := dir.Lstat(base); err != nil || !os.SameFile(fi, again) || !again.ModTime().Equal(fi.ModTime()) {
		return "", Info{}, &fs.PathError{Op: "readlink", Path: rel, Err: errSwapped}
	}
	if len(target) > MaxSymlinkLen {
		return "", Info{}, &fs.PathError{Op: "readlink", Path: rel, Err: ErrSymlinkTarget}
	}
	return target, infoOf(fi), nil
}
