//go:build unix

package fsys

import (
	"io/fs"
	"os"
	"syscall"
)

// owner returns the user id that owns fi.
func owner(fi fs.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}

// euid is the user hermesd runs as.
func euid() (uint32, bool) { return uint32(os.Geteuid()), true }

// rootOnly reports whether only root can have made or can change the link
// st in dir: the link is root's, and so is dir, which nobody else may
// write.
func rootOnly(st fs.FileInfo, dir string) bool {
	if uid, ok := owner(st); !ok || uid != 0 {
		return false
	}
	ds, err := os.Stat(dir)
	if err != nil {
		return false
	}
	uid, ok := owner(ds)
	return ok && uid == 0 && ds.Mode().Perm()&0o022 == 0
}
