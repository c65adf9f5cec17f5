//go:build !unix

package repo

import (
	"errors"
	"io/fs"
)

// Snapshots read the brain with openat(2) and O_NOFOLLOW; other systems
// can read and restore v3 snapshots but not take them.

var errUnsupported = errors.New("repo: taking snapshots needs a unix system")

func openRootDir(string) (int, error)            { return -1, errUnsupported }
func openDirAt(int, string) (int, error)         { return -1, errUnsupported }
func openFileAt(int, string) (int, error)        { return -1, errUnsupported }
func closeFD(int)                                {}
func statAt(int, string) (statInfo, error)       { return statInfo{}, errUnsupported }
func fstat(int) (statInfo, error)                { return statInfo{}, errUnsupported }
func listDir(int, []byte, int) ([]dirent, error) { return nil, errUnsupported }
func isVanished(error) bool                      { return false }

type statInfo struct {
	mode fs.FileMode
	size int64
}

type fdReader int

func (fdReader) Read([]byte) (int, error) { return 0, errUnsupported }

var errTooManyEntries = errors.New("too many directory entries")
