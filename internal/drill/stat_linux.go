package drill

import (
	"io/fs"
	"syscall"
	"time"
)

// changed is when an entry last changed: its status change time (ctime),
// which a write, a chmod, a rename and the creation all set and no
// ordinary tool sets back (unlike the modification time).
func changed(info fs.FileInfo) time.Time {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		sec, nsec := st.Ctim.Unix()
		return time.Unix(sec, nsec)
	}
	return info.ModTime()
}

// fileID tells the names of one file apart from other files.
type fileID struct{ dev, ino uint64 }

// linked returns the identity of a regular file that has several names.
func linked(info fs.FileInfo) (fileID, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || st.Nlink < 2 {
		return fileID{}, false
	}
	return fileID{uint64(st.Dev), st.Ino}, true
}
