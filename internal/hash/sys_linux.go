//go:build linux

package hash

import (
	"errors"
	"io/fs"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file holds the few system calls the walker needs, on raw file
// descriptors: os.Open costs three extra syscalls per file on Linux (it
// tries to register every descriptor with the poller), which is a
// noticeable share of the ~5 µs budget per small file.

// handle is an open file descriptor.
type handle int

const noHandle handle = -1

// noOpenat2 is set once openat2 turned out to be unavailable (old kernel, or
// a seccomp filter that refuses it); we then fall back to openat.
var noOpenat2 atomic.Bool

// openRoot opens the directory at path. The root itself may be reached
// through a symlink, as with the reference (it stats and lists the path).
func openRoot(path string) (handle, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return noHandle, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return handle(fd), nil
	}
}

// openBeneath opens rel (relative to root, "" for root itself) without
// following any symlink on the way and without leaving root, so a tree that
// changes under the walker can never make it read a file outside root.
func openBeneath(root handle, rel string, flags int) (handle, error) {
	if rel == "" {
		rel = "."
	}
	if flags&unix.O_PATH != 0 {
		flags |= unix.O_CLOEXEC | unix.O_NOFOLLOW // openat2 refuses other flags with O_PATH
	} else {
		flags |= unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NOCTTY
	}
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
			case unix.EINTR, unix.EAGAIN: // EAGAIN: a concurrent rename raced the lookup
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

func (h handle) stat() (fileStat, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstat(int(h), &st)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fileStat{}, err
		}
		return statFromUnix(&st), nil
	}
}

// lstatAt stats rel relative to root without following a final symlink.
func lstatAt(root handle, rel string) (fileStat, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstatat(int(root), rel, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fileStat{}, err
		}
		return statFromUnix(&st), nil
	}
}

// statBeneath is lstatAt that also refuses symlinks in the middle of rel
// (used for paths named by a caller rather than found by our own walk).
func statBeneath(root handle, rel string) (fileStat, error) {
	h, err := openBeneath(root, rel, unix.O_PATH)
	if err != nil {
		return fileStat{}, err
	}
	defer h.close()
	return h.stat()
}

func statFromUnix(st *unix.Stat_t) fileStat {
	return fileStat{
		size:  int64(st.Size),
		mtime: st.Mtim.Nano(),
		ctime: st.Ctim.Nano(),
		ino:   uint64(st.Ino),
		dev:   uint64(st.Dev),
		mode:  modeFromUnix(uint32(st.Mode)),
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

// readDir lists the directory rel (relative to root) and returns its
// entries (without "." and "..") and the directory's own stat. buf is
// scratch space for getdents.
func readDir(root handle, rel string, buf []byte) ([]dirent, fileStat, error) {
	dir, err := openBeneath(root, rel, unix.O_DIRECTORY)
	if err != nil {
		return nil, fileStat{}, err
	}
	defer dir.close()
	dst, err := dir.stat()
	if err != nil {
		return nil, fileStat{}, err
	}
	var ents []dirent
	for {
		n, err := unix.Getdents(int(dir), buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fileStat{}, err
		}
		if n <= 0 {
			break
		}
		b := buf[:n]
		for len(b) > 0 {
			d := (*unix.Dirent)(unsafe.Pointer(&b[0]))
			reclen := int(d.Reclen)
			if reclen == 0 || reclen > len(b) {
				return nil, fileStat{}, errors.New("getdents: malformed record")
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
				e.kind = kindFile
			case unix.DT_DIR:
				e.kind = kindDir
			case unix.DT_UNKNOWN:
				// Some filesystems do not report types in getdents.
				var st unix.Stat_t
				if err := unix.Fstatat(int(dir), e.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					if isVanished(err) {
						continue
					}
					return nil, fileStat{}, err
				}
				e.kind = kindOf(modeFromUnix(uint32(st.Mode)))
			default:
				e.kind = kindOther
			}
			ents = append(ents, e)
		}
	}
	return ents, dst, nil
}

// isVanished reports whether err means the path is gone or is no longer
// what the walker saw (a symlink or a file where a directory was).
func isVanished(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV)
}

// openFileFlags: O_NONBLOCK so that a file swapped for a fifo after the
// directory listing cannot block the open; it has no effect on regular
// files.
const openFileFlags = unix.O_NONBLOCK

// statFromFileInfo extracts the cache's stat fields from an os.FileInfo
// (its Sys() is a *syscall.Stat_t on Linux).
func statFromFileInfo(fi fs.FileInfo) (fileStat, bool) {
	if fi == nil {
		return fileStat{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st == nil {
		return fileStat{}, false
	}
	return fileStat{
		size:  int64(st.Size),
		mtime: st.Mtim.Nano(),
		ctime: st.Ctim.Nano(),
		ino:   uint64(st.Ino),
		dev:   uint64(st.Dev),
		mode:  modeFromUnix(uint32(st.Mode)),
	}, true
}
