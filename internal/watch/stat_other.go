//go:build !linux

package watch

import "io/fs"

func statExtra(fs.FileInfo) (ctime int64, ino uint64) { return 0, 0 }

func openFileLimit() (uint64, bool) { return 0, false }
