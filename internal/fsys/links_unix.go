//go:build unix && (!linux || fsys_portable)

package fsys

import (
	"io/fs"
	"syscall"
)

// linksOf is the link count of a stat result (the portable
// implementation's Info.Nlink).
func linksOf(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 0
}
