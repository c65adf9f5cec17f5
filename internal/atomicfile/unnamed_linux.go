//go:build linux

package atomicfile

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openUnnamed creates an unnamed regular file in dir (O_TMPFILE).
func openUnnamed(dir string, perm os.FileMode) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// linkUnnamed gives the unnamed file f the name path. linkat with
// AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; the /proc link works for
// anyone who owns the descriptor.
func linkUnnamed(f *os.File, path string) error {
	err := unix.Linkat(int(f.Fd()), "", unix.AT_FDCWD, path, unix.AT_EMPTY_PATH)
	if err == nil {
		return nil
	}
	return unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", f.Fd()), unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW)
}
