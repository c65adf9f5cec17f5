//go:build !unix

package state

import (
	"errors"
	"os"
)

// errUnsupported: hermesd's crash safety rests on POSIX file semantics
// (flock, O_NOFOLLOW, rename over open files); it runs on Linux and macOS.
var errUnsupported = errors.New("hermesd runs on Linux and macOS only")

func lockFile(*os.File) error { return errUnsupported }

func unlockFile(*os.File) error { return nil }

func openNoFollow(path string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(path, flag, perm)
}

func checkPrivate(string) error { return errUnsupported }
