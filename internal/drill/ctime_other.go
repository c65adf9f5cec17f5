//go:build !linux

package drill

import (
	"io/fs"
	"time"
)

// changed is when an entry last changed: its modification time, where the
// status change time is not at hand.
func changed(info fs.FileInfo) time.Time { return info.ModTime() }
