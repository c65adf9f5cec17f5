//go:build linux

package tarball

import (
	"errors"
	"io/fs"
	"path"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Raw descriptors for the writer's read path: os.Open costs three extra
// syscalls per file on Linux (poller registration attempts), a visible
// share of the per-file budget of a tree of many small files.

type handle int

const noHandle handle = -1

var noOpenat2 atomic.Bool

func openRoot(p string) (handle, error) {
	for {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return noHandle, &fs.PathError{Op: "open", Path: p, Err: err}
		}
		return handle(fd), nil
	}
}

// openBeneath opens rel below root without following any symlink and
// without leaving root (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), so a
// tree changing under the writer cannot make it archive a file from
// elsewhere. Without openat2 it falls back to openat with O_NOFOLLOW.
func openBeneath(root handle, rel string, flags int) (handle, error) {
	if rel == "" {
		rel = "."
	}
	flags |= unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NOCTTY
	for {
		var fd int
		var err error
		if !noOpenat2.Load() {
			how := unix.OpenHow{
				Flags:   uint64(flags),
				Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
			}
			fd, err = unix.Openat2(int(root), rel, &how)
			switch err {
			case unix.ENOSYS, unix.EPERM:
				noOpenat2.Store(true)
				continue
			case unix.EINTR, unix.EAGAIN:
				continue
			}
		} else {
			fd, err = unix.Openat(int(root), rel, flags, 0)
			if err == unix.EINTR {
				continue
			}
		}
		if err != nil {
			return noHandle, err
		}
		return handle(fd), nil
	}
}

// openFileFlags: O_NONBLOCK so a file swapped for a fifo cannot block the
// open; no effect on regular files.
const openFileFlags = unix.O_NONBLOCK

func (h handle) close() { _ = unix.Close(int(h)) }

func (h handle) read(b []byte) (int, error) {
	for {
		n, err := unix.Read(int(h), b)
		if err == unix.EINTR {
			continue
		}
		if n < 0 {
			n = 0
		}
		return n, err
	}
}

// fileInfo is an fs.FileInfo over a raw stat; Sys returns *syscall.Stat_t
// like os.File.Stat, so consumers (hash.Cache.Record) can read it.
type fileInfo struct {
	name string
	st   syscall.Stat_t
}

func (fi *fileInfo) Name() string       { return path.Base(fi.name) }
func (fi *fileInfo) Size() int64        { return int64(fi.st.Size) }
func (fi *fileInfo) Mode() fs.FileMode  { return modeFromUnix(uint32(fi.st.Mode)) }
func (fi *fileInfo) ModTime() time.Time { return time.Unix(0, fi.st.Mtim.Nano()) }
func (fi *fileInfo) IsDir() bool        { return fi.Mode().IsDir() }
func (fi *fileInfo) Sys() any           { return &fi.st }

func (h handle) stat(name string, fi *fileInfo) error {
	fi.name = name
	for {
		err := syscall.Fstat(int(h), &fi.st)
		if err == syscall.EINTR {
			continue
		}
		return err
	}
}

func modeFromUnix(m uint32) fs.FileMode {
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
	return mode
}

// dirent is one directory entry; typ holds only the type bits.
type dirent struct {
	name string
	typ  fs.FileMode
}

// readDir lists the directory rel below root and stats it.
func readDir(root handle, rel string, buf []byte, dfi *fileInfo) ([]dirent, error) {
	dir, err := openBeneath(root, rel, unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	defer dir.close()
	if err := dir.stat(rel, dfi); err != nil {
		return nil, err
	}
	var ents []dirent
	for {
		n, err := unix.Getdents(int(dir), buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return ents, nil
		}
		b := buf[:n]
		for len(b) > 0 {
			d := (*unix.Dirent)(unsafe.Pointer(&b[0]))
			reclen := int(d.Reclen)
			if reclen == 0 || reclen > len(b) {
				return nil, errors.New("getdents: malformed record")
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
			e := dirent{name: string(name)}
			switch d.Type {
			case unix.DT_REG:
			case unix.DT_DIR:
				e.typ = fs.ModeDir
			case unix.DT_LNK:
				e.typ = fs.ModeSymlink
			case unix.DT_FIFO:
				e.typ = fs.ModeNamedPipe
			case unix.DT_SOCK:
				e.typ = fs.ModeSocket
			case unix.DT_CHR:
				e.typ = fs.ModeDevice | fs.ModeCharDevice
			case unix.DT_BLK:
				e.typ = fs.ModeDevice
			default: // DT_UNKNOWN: some filesystems do not report types
				var st unix.Stat_t
				if err := unix.Fstatat(int(dir), e.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					if isVanished(err) {
						continue
					}
					return nil, err
				}
				e.typ = modeFromUnix(uint32(st.Mode)).Type()
			}
			ents = append(ents, e)
		}
	}
}

func isVanished(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV)
}
