//go:build linux

package repo

import (
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermesd/hermesd/internal/fsys"
)

// retry calls f again while it fails with EINTR.
func retry[T any](f func() (T, error)) (T, error) {
	for {
		v, err := f()
		if err != unix.EINTR {
			return v, err
		}
	}
}

// noOpenat2 is set once openat2 turned out to be unavailable (an old
// kernel, or a seccomp filter refusing it).
var noOpenat2 atomic.Bool

// restoreDir writes restored files below a directory. On Linux a file is
// opened with one openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) call
// relative to the directory, instead of os.Root's walk component by
// component: for a brain of many small files that is most of the cost.
type restoreDir struct {
	root *os.Root
	fd   int

	mu     sync.Mutex
	retime []Retimed
}

func openRestoreDir(root *os.Root, dir string) (*restoreDir, error) {
	fd, err := retry(func() (int, error) {
		return unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	return &restoreDir{root: root, fd: fd}, nil
}

func (d *restoreDir) close() { unix.Close(d.fd) }

// create creates the file at path, exclusively, for writing.
func (d *restoreDir) create(path string) (*os.File, error) {
	if noOpenat2.Load() {
		return d.createRoot(path)
	}
	how := unix.OpenHow{
		Flags:   unix.O_WRONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_CREAT | unix.O_EXCL,
		Mode:    0o600,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	fd, err := retry(func() (int, error) { return unix.Openat2(d.fd, path, &how) })
	switch err {
	case nil:
		return os.NewFile(uintptr(fd), path), nil
	case unix.ENOSYS, unix.EPERM:
		noOpenat2.Store(true)
		return d.createRoot(path)
	}
	return nil, &fs.PathError{Op: "open", Path: path, Err: err}
}

// writeAt writes data at off in the file at path (created, exclusively,
// when create is set) and, when f is not nil, gives it f's mode and time.
func (d *restoreDir) writeAt(path string, create bool, data []byte, off int64, f *rfile) error {
	if noOpenat2.Load() {
		return d.writeAtRoot(path, create, data, off, f)
	}
	how := unix.OpenHow{
		Flags:   unix.O_WRONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	if create {
		how.Flags |= unix.O_CREAT | unix.O_EXCL
		how.Mode = 0o600 // openat2 refuses a mode without O_CREAT
	}
	fd, err := retry(func() (int, error) { return unix.Openat2(d.fd, path, &how) })
	switch err {
	case nil:
	case unix.ENOSYS, unix.EPERM:
		noOpenat2.Store(true)
		return d.writeAtRoot(path, create, data, off, f)
	default:
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	for len(data) > 0 {
		n, err := retry(func() (int, error) { return unix.Pwrite(fd, data, off) })
		if err != nil {
			return &fs.PathError{Op: "write", Path: path, Err: err}
		}
		data, off = data[n:], off+int64(n)
	}
	if f == nil {
		return nil
	}
	if _, err := retry(func() (struct{}, error) { return struct{}{}, unix.Fchmod(fd, fsys.UnixMode(f.mode)) }); err != nil {
		return &fs.PathError{Op: "chmod", Path: path, Err: err}
	}
	if !f.timed {
		return nil
	}
	if err := fsys.FutimensFD(fd, time.Unix(0, f.mtime)); err != nil {
		return &fs.PathError{Op: "futimens", Path: path, Err: err}
	}
	if !fsys.CommonTime(f.mtime) {
		var st unix.Stat_t
		if _, err := retry(func() (struct{}, error) { return struct{}{}, unix.Fstat(fd, &st) }); err != nil {
			return &fs.PathError{Op: "stat", Path: path, Err: err}
		}
		d.retimed(path, f.mtime, st.Mtim.Nano())
	}
	return nil
}
