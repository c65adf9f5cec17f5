package hash

import "io/fs"

// fileStat is the part of a stat result the cache compares to decide
// whether a file may have changed since its contents were read.
type fileStat struct {
	size  int64
	mtime int64 // ns since the epoch
	ctime int64 // ns since the epoch; 0 where the platform has none
	ino   uint64
	dev   uint64
	mode  fs.FileMode
}

func (s fileStat) isRegular() bool { return s.mode.IsRegular() }
func (s fileStat) isDir() bool     { return s.mode.IsDir() }

type kind uint8

const (
	kindOther kind = iota // symlink, socket, fifo, device: skipped
	kindFile
	kindDir
)

func kindOf(m fs.FileMode) kind {
	switch {
	case m.IsRegular():
		return kindFile
	case m.IsDir():
		return kindDir
	}
	return kindOther
}

// dirent is one directory entry as listed by readDir.
type dirent struct {
	name string
	kind kind
}
