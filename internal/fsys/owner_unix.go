//go:build unix

package fsys

import (
	"io/fs"
	"os"
	"syscall"
)

// rootOnly reports whether only root can have made or can change the link
// st in dir: the link is root's, and so is dir, which nobody else may
// write.
func rootOnly(st fs.FileInfo, dir string) bool {
	ls, ok := st.Sys().(*syscall.Stat_t)
	if !ok || ls.Uid != 0 {
		return false
	}
	ds, err := os.Stat(dir)
	if err != nil {
		return false
	}
	d, ok := ds.Sys().(*syscall.Stat_t)
	return ok && d.Uid == 0 && ds.Mode().Perm()&0o022 == 0
}
