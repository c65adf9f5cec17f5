//go:build linux && !fsys_portable

package fsys

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Inodes reports whether an Info carries the inode and device that tell
// the names of one file (hard links) apart from copies.
const Inodes = true

// Root is an open directory, the root of a walk; Close releases it. The
// zero Root holds nothing (its Close does nothing).
type Root struct {
	sys int // descriptor + 1, so that the zero value holds none
	ov  *Overlay
}

// File is a file opened for reading by Root.Open. The zero File holds
// nothing (its Close does nothing).
type File struct {
	sys   int  // descriptor + 1
	subst bool // opened in place of the path by an Overlay
}

func (r Root) fd() int { return r.sys - 1 }
func (f File) fd() int { return f.sys - 1 }

// direntBufSize is the getdents scratch space per ReadDir: one call lists
// about two thousand entries.
const direntBufSize = 64 << 10

var direntBufs = sync.Pool{New: func() any { b := make([]byte, direntBufSize); return &b }}

// maxRetries bounds the retries of a lookup that a concurrent rename
// raced (openat2's EAGAIN): a tree renamed in a loop must not stall a walk
// forever.
const maxRetries = 64

// noOpenat2 is set once openat2 turned out to be unavailable; lookups then
// go one component at a time.
var noOpenat2 atomic.Bool

// OpenRoot opens the directory at path. The path itself may lead through
// symlinks (the reference stats and lists it the same way); nothing below
// it is followed.
func OpenRoot(path string) (Root, error) { return OpenRootOverlay(path, nil) }

// OpenRootOverlay is OpenRoot for a Root that shows the tree through ov
// (nil: as it is).
func OpenRootOverlay(path string, ov *Overlay) (Root, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return Root{}, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return Root{sys: fd + 1, ov: ov}, nil
	}
}

// Close closes the root.
func (r Root) Close() error { return closeFD(r.fd()) }

// Open opens the file rel for reading, with O_NONBLOCK so that a fifo put
// in the place of a listed file cannot block. It does not check the file's
// type: callers Stat the File.
func (r Root) Open(rel string) (File, error) {
	fd, subst, err := r.open(rel, unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK)
	if err != nil {
		return File{}, err
	}
	return File{sys: fd + 1, subst: subst}, nil
}

// OpenFile opens rel as Open does, but with the access mode of flag
// (os.O_RDONLY or os.O_RDWR; any other bit is refused), as an *os.File:
// for the few files a caller must lock or write in place, never create.
func (r Root) OpenFile(rel string, flag int) (*os.File, error) {
	if flag != os.O_RDONLY && flag != os.O_RDWR {
		return nil, &fs.PathError{Op: "open", Path: rel, Err: unix.EINVAL}
	}
	fd, _, err := r.open(rel, flag|unix.O_NOCTTY|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// open opens rel, or what the overlay shows in its place.
func (r Root) open(rel string, flags int) (fd int, subst bool, err error) {
	switch target, k := r.ov.lookup(rel); k {
	case substituted:
		fd, err := openat(unix.AT_FDCWD, target, flags|unix.O_CLOEXEC|unix.O_NOFOLLOW)
		if err != nil {
			return -1, false, substError("open", rel, target, err)
		}
		return fd, true, nil
	case gone:
		return -1, false, r.ov.errGone("open", rel)
	}
	fd, err = r.openBeneath(rel, flags)
	return fd, false, err
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
	fd, err := r.openBeneath(rel, unix.O_PATH)
	if err != nil {
		return Info{}, err
	}
	defer closeFD(fd)
	return fstat(fd)
}

// Lstat is the cheap form of Stat, one fstatat(2) call: the final component
// is not followed but, unlike Stat, the ones before it are resolved as
// usual. Use it only to compare with an Info taken through Open or Stat,
// which it can only match if it found the very same file.
func (r Root) Lstat(rel string) (Info, error) {
	switch target, k := r.ov.lookup(rel); k {
	case substituted:
		return lstatSubst(rel, target)
	case gone:
		return Info{}, r.ov.errGone("stat", rel)
	}
	if rel == "" {
		rel = "."
	}
	var st unix.Stat_t
	for {
		err := unix.Fstatat(r.fd(), rel, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return Info{}, err
		}
		return infoOf(&st), nil
	}
}

// ReadDir lists the directory rel ("" for the root) and returns its
// entries, without "." and "..", in directory order (an overlay's
// substitutes last), and the directory's own Info.
func (r Root) ReadDir(rel string) ([]Entry, Info, error) {
	if _, k := r.ov.lookup(rel); k != live {
		return nil, Info{}, r.ov.errGone("open", rel)
	}
	dir, err := r.openBeneath(rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, Info{}, err
	}
	defer closeFD(dir)
	info, err := fstat(dir)
	if err != nil {
		return nil, Info{}, err
	}
	bp := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(bp)
	buf := *bp
	var ents []Entry
	for {
		n, err := unix.Getdents(dir, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, Info{}, err
		}
		if n <= 0 {
			return r.ov.list(rel, ents), info, nil
		}
		b := buf[:n]
		for len(b) > 0 {
			d := (*unix.Dirent)(unsafe.Pointer(&b[0]))
			reclen := int(d.Reclen)
			if reclen == 0 || reclen > len(b) {
				return nil, Info{}, errors.New("getdents: malformed record")
			}
			rec := b[:reclen]
			b = b[reclen:]
			const nameOff = int(unsafe.Offsetof(unix.Dirent{}.Name))
			name := rec[nameOff:]
			for i, c := range name {
				if c == 0 {
					name = name[:i]
					break
				}
			}
			if len(name) == 0 || string(name) == "." || string(name) == ".." {
				continue
			}
			e := Entry{Name: string(name)}
			switch d.Type {
			case unix.DT_REG:
			case unix.DT_DIR:
				e.Type = fs.ModeDir
			case unix.DT_LNK:
				e.Type = fs.ModeSymlink
			case unix.DT_FIFO:
				e.Type = fs.ModeNamedPipe
			case unix.DT_SOCK:
				e.Type = fs.ModeSocket
			case unix.DT_CHR:
				e.Type = fs.ModeDevice | fs.ModeCharDevice
			case unix.DT_BLK:
				e.Type = fs.ModeDevice
			default: // DT_UNKNOWN: some file systems do not report types
				var st unix.Stat_t
				if err := unix.Fstatat(dir, e.Name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					if IsGone(err) {
						continue
					}
					return nil, Info{}, err
				}
				e.Type = modeOf(uint32(st.Mode)).Type()
			}
			ents = append(ents, e)
		}
	}
}

// Read reads from the file (io.Reader).
func (f File) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(f.fd(), b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 && len(b) > 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

// Stat returns the Info of the open file.
func (f File) Stat() (Info, error) {
	info, err := fstat(f.fd())
	info.Overlay = f.subst && err == nil
	return info, err
}

// Close closes the file.
func (f File) Close() error { return closeFD(f.fd()) }

// IsGone reports whether err means that a path vanished or is no longer
// what the walker saw (a symlink or a file where a directory was), which a
// walk of a changing tree treats as "not there".
func IsGone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) ||
		errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) || errors.Is(err, errNotSymlink)
}

func closeFD(fd int) error {
	if fd < 0 {
		return nil
	}
	// Linux releases the descriptor even when close reports EINTR: never
	// retry.
	return unix.Close(fd)
}

func fstat(fd int) (Info, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstat(fd, &st)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return Info{}, err
		}
		return infoOf(&st), nil
	}
}

// openBeneath opens rel ("" for the root itself) without following any
// symlink and without leaving the root. flags must not hold O_CREAT.
func (r Root) openBeneath(rel string, flags int) (int, error) {
	if rel == "" {
		rel = "."
	}
	flags |= unix.O_CLOEXEC | unix.O_NOFOLLOW
	for try := 0; !noOpenat2.Load(); try++ {
		how := unix.OpenHow{
			Flags:   uint64(flags),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		}
		fd, err := unix.Openat2(r.fd(), rel, &how)
		switch err {
		case nil:
			return fd, nil
		case unix.ENOSYS, unix.EPERM: // no openat2, or seccomp refuses it
			noOpenat2.Store(true)
		case unix.EINTR:
		case unix.EAGAIN: // a concurrent rename raced the lookup
			if try >= maxRetries {
				return -1, err
			}
		default:
			return -1, err
		}
	}
	return r.openSteps(rel, flags)
}

// openSteps is openBeneath without openat2: one openat per component, each
// with O_NOFOLLOW, so a symlink anywhere on the way fails (ELOOP, or
// ENOTDIR for a directory component) instead of being followed.
func (r Root) openSteps(rel string, flags int) (int, error) {
	root := r.fd()
	dir := root
	defer func() {
		if dir != root {
			closeFD(dir)
		}
	}()
	for {
		c, rest, more := strings.Cut(rel, "/")
		if c == ".." {
			return -1, unix.EXDEV // RESOLVE_BENEATH's answer
		}
		if !more {
			return openat(dir, c, flags)
		}
		rel = rest
		if c == "" || c == "." {
			continue
		}
		next, err := openat(dir, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
		if err != nil {
			return -1, err
		}
		if dir != root {
			closeFD(dir)
		}
		dir = next
	}
}

func openat(dir int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dir, name, flags, 0)
		if err == unix.EINTR {
			continue
		}
		return fd, err
	}
}

// lstatSubst returns the Info of target, the substitute for rel.
func lstatSubst(rel, target string) (Info, error) {
	var st unix.Stat_t
	for {
		err := unix.Lstat(target, &st)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return Info{}, substError("stat", rel, target, err)
		}
		info := infoOf(&st)
		info.Overlay = true
		return info, nil
	}
}

func infoOf(st *unix.Stat_t) Info {
	return Info{
		Size:  int64(st.Size),
		Mtime: st.Mtim.Nano(),
		Ctime: st.Ctim.Nano(),
		Ino:   uint64(st.Ino),
		Dev:   uint64(st.Dev),
		Nlink: uint64(st.Nlink),
		Mode:  modeOf(uint32(st.Mode)),
	}
}

func modeOf(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	default:
		mode |= fs.ModeIrregular
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
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
	// O_PATH|O_NOFOLLOW opens the link itself (openat2 allows that for
	// the last component even with RESOLVE_NO_SYMLINKS).
	fd, err := r.openBeneath(rel, unix.O_PATH)
	if err != nil {
		return "", Info{}, err
	}
	defer closeFD(fd)
	info, err := fstat(fd)
	if err != nil {
		return "", Info{}, err
	}
	if info.Mode.Type() != fs.ModeSymlink {
		return "", Info{}, &fs.PathError{Op: "readlink", Path: rel, Err: errNotSymlink}
	}
	buf := make([]byte, MaxSymlinkLen+1)
	for {
		n, err := unix.Readlinkat(fd, "", buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return "", Info{}, &fs.PathError{Op: "readlink", Path: rel, Err: err}
		}
		if n > MaxSymlinkLen {
			return "", Info{}, &fs.PathError{Op: "readlink", Path: rel, Err: ErrSymlinkTarget}
		}
		return string(buf[:n]), info, nil
	}
}
