//go:build !linux

package drill

import (
	"io/fs"
	"time"
)

// changed is when an entry last changed: its modification time, where the
// status change time is not at hand.
func changed(info fs.FileInfo) time.Time { return info.ModTime() }

// fileID tells the names of one file apart from other files.
type fileID struct{ dev, ino uint64 }

// linked reports no file of several names where the drill does not read
// inodes: hard links are then compared as the files they are.
func linked(fs.FileInfo) (fileID, bool) { return fileID{}, false }
