//go:build unix

package state

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hermesd/hermesd/internal/fsys"
)

// lockFile takes an exclusive flock without waiting; a lock held elsewhere
// is ErrLocked.
func lockFile(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return ErrLocked
	}
	return err
}

// unlockFile drops the flock. Closing our descriptor alone is not enough:
// the lock belongs to the open file description, which a child forked at
// that moment (between fork and exec, where close-on-exec has not acted
// yet) still references, so the lock would outlive Close by as long as
// the child takes to exec.
func unlockFile(f *os.File) error {
	return unix.Flock(int(f.Fd()), unix.LOCK_UN)
}

// openNoFollow opens a file of the state directory without following a
// symbolic link planted at its name.
func openNoFollow(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%w: %s is a symbolic link", ErrUnsafe, path)
	}
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrUnsafe, path)
	}
	return f, nil
}

// checkPrivate refuses a directory that another user owns (fsys.CheckOwner:
// neither hermesd's user nor root, the rule secret files follow too) or
// that its group or everyone can write: whoever can write there can plant
// files hermesd would trust (its state, its receipt log, links to follow).
func checkPrivate(dir string) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		if st.Mode()&os.ModeSymlink != 0 {
			// Allowed by the caller; judge what it points at.
			if st, err = os.Stat(dir); err != nil {
				return err
			}
		}
		if !st.IsDir() {
			return fmt.Errorf("%w: %s is not a directory", ErrUnsafe, dir)
		}
	}
	if err := fsys.CheckOwner(dir, st); err != nil {
		return fmt.Errorf("%w: %w", ErrUnsafe, err)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%w: %s is writable by its group or by everyone (mode %04o); run: chmod 700 %s",
			ErrUnsafe, dir, st.Mode().Perm(), dir)
	}
	return nil
}
