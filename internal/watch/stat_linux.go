package watch

import (
	"io/fs"
	"syscall"
)

// statExtra returns what a fingerprint needs beyond size and mtime: the
// change time (any write or rename moves it; utimes cannot set it) and the
// inode (an atomic replace gives a new one).
func statExtra(fi fs.FileInfo) (ctime int64, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ctim.Nano(), st.Ino
	}
	return 0, 0
}

// openFileLimit is the process's soft RLIMIT_NOFILE.
func openFileLimit() (uint64, bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, false
	}
	return r.Cur, true
}
