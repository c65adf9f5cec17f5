//go:build unix

package repo

import (
	"errors"
	"io"
	"io/fs"

	"golang.org/x/sys/unix"
)

// The brain walker works on raw descriptors, one path component at a time
// relative to an open directory, with O_NOFOLLOW: a symlink anywhere below
// the root is never followed, and a tree changing under the walker cannot
// make it read outside the root. (os.File costs three extra syscalls per
// open on Linux, a visible share of a small file's budget.)

func retry[T any](f func() (T, error)) (T, error) {
	for {
		v, err := f()
		if err != unix.EINTR {
			return v, err
		}
	}
}

// openRootDir opens the brain directory itself; like the hasher, the root
// may be reached through a symlink.
func openRootDir(path string) (int, error) {
	fd, err := retry(func() (int, error) {
		return unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, nil
}

func openDirAt(dirfd int, name string) (int, error) {
	return retry(func() (int, error) {
		return unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
}

// openFileAt opens a regular file for reading. O_NONBLOCK: a file swapped
// for a fifo after the listing cannot block the open.
func openFileAt(dirfd int, name string) (int, error) {
	return retry(func() (int, error) {
		return unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	})
}

func closeFD(fd int) { unix.Close(fd) }

// statInfo is the part of a stat the builder needs.
type statInfo struct {
	mode fs.FileMode // type bits and permission bits
	size int64
}

func toStatInfo(st *unix.Stat_t) statInfo {
	perm := fs.FileMode(st.Mode & 0o777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return statInfo{mode: perm, size: st.Size}
	case unix.S_IFDIR:
		return statInfo{mode: fs.ModeDir | perm}
	}
	return statInfo{mode: fs.ModeIrregular | perm}
}

func statAt(dirfd int, name string) (statInfo, error) {
	var st unix.Stat_t
	_, err := retry(func() (struct{}, error) {
		return struct{}{}, unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	})
	if err != nil {
		return statInfo{}, err
	}
	return toStatInfo(&st), nil
}

func fstat(fd int) (statInfo, error) {
	var st unix.Stat_t
	_, err := retry(func() (struct{}, error) { return struct{}{}, unix.Fstat(fd, &st) })
	if err != nil {
		return statInfo{}, err
	}
	return toStatInfo(&st), nil
}

// listDir returns the entries of the directory fd (without "." and
// ".."), at most max of them, with the type the directory itself records
// where the system and filesystem give one (a brain walk then needs no
// stat for a file it does not read).
func listDir(fd int, buf []byte, max int) ([]dirent, error) {
	var ents []dirent
	for {
		n, err := retry(func() (int, error) { return unix.ReadDirent(fd, buf) })
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return ents, nil
		}
		ents = parseDirents(buf[:n], ents)
		if len(ents) > max {
			return nil, errTooManyEntries
		}
	}
}

var errTooManyEntries = errors.New("too many directory entries")

// fdReader reads a file descriptor.
type fdReader int

func (r fdReader) Read(p []byte) (int, error) {
	n, err := retry(func() (int, error) { return unix.Read(int(r), p) })
	if n < 0 {
		n = 0
	}
	if err != nil {
		return n, err
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// isVanished reports whether err means the path is gone or is no longer
// what the listing said (a symlink or a file where a directory was).
func isVanished(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)
}
