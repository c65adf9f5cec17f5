//go:build linux

package fsys

import (
	"errors"
	"io/fs"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

var errNoFutimens = errors.New("fsys: no futimens")

// Futimens sets f's modification time through its descriptor
// (utimensat(fd, NULL, ...), which is futimens(3)), the access time left
// as it is.
func Futimens(f *os.File, mtime time.Time) error { return futimens(f, mtime) }

func futimens(f *os.File, mtime time.Time) error {
	ts := [2]unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(mtime.UnixNano())}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, fd, 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
			if e == unix.EINTR {
				continue
			}
			if e != 0 {
				serr = e
			}
			return
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &fs.PathError{Op: "futimens", Path: f.Name(), Err: serr}
	}
	return nil
}

// FutimensFD is futimens on a raw descriptor.
func FutimensFD(fd int, mtime time.Time) error {
	ts := [2]unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(mtime.UnixNano())}
	for {
		_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		return nil
	}
}
