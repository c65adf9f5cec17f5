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
