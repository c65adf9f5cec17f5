package fsys

import (
	"io/fs"
	"os"
	"time"
)

// Special is the setuid, setgid and sticky bits of an fs.FileMode.
const Special = fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// Meta is what hermesd records of a file's or directory's mode: its
// permission bits and its special bits.
const Meta = fs.ModePerm | Special

// The special bits as stat(2) and tar headers spell them.
const (
	unixSetuid = 0o4000
	unixSetgid = 0o2000
	unixSticky = 0o1000
)

// UnixMode returns the permission and special bits of m in the layout of
// stat(2), chmod(2) and tar headers (setuid 04000, setgid 02000, sticky
// 01000); m's other bits are dropped.
func UnixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= unixSetuid
	}
	if m&fs.ModeSetgid != 0 {
		u |= unixSetgid
	}
	if m&fs.ModeSticky != 0 {
		u |= unixSticky
	}
	return u
}

// FromUnixMode is UnixMode's inverse for the low 12 bits of u (the rest
// are ignored).
func FromUnixMode(u uint32) fs.FileMode {
	m := fs.FileMode(u & 0o777)
	if u&unixSetuid != 0 {
		m |= fs.ModeSetuid
	}
	if u&unixSetgid != 0 {
		m |= fs.ModeSetgid
	}
	if u&unixSticky != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// Restorable is the mode a restore gives a file or directory whose
// recorded mode is m (permission and special bits), and the special bits
// it strips: setuid and setgid on regular files. A snapshot is input from
// elsewhere (another machine, another operator, an agent that chmods its
// own files); a restore that recreated a set-id executable could hand
// whoever runs it the restoring user's (or, for a daemon running as root,
// root's) privileges. Directories keep every bit (setgid only decides the
// group of new files, sticky who may delete them), and so does the
// sticky bit on files (Linux ignores it there).
func Restorable(m fs.FileMode, dir bool) (keep, stripped fs.FileMode) {
	m &= Meta
	if dir {
		return m, 0
	}
	stripped = m & (fs.ModeSetuid | fs.ModeSetgid)
	return m &^ stripped, stripped
}

// SpecialString names special bits for a report: "setuid", "setgid",
// "setuid+setgid", "sticky", ...
func SpecialString(m fs.FileMode) string {
	s := ""
	for _, b := range []struct {
		bit  fs.FileMode
		name string
	}{{fs.ModeSetuid, "setuid"}, {fs.ModeSetgid, "setgid"}, {fs.ModeSticky, "sticky"}} {
		if m&b.bit != 0 {
			if s != "" {
				s += "+"
			}
			s += b.name
		}
	}
	return s
}

// SetMtime sets the modification time of f, an open file that is path
// below root, leaving its access time alone: on Linux through the
// descriptor (futimens), elsewhere through root.
func SetMtime(root *os.Root, f *os.File, path string, mtime time.Time) error {
	if err := futimens(f, mtime); err != errNoFutimens {
		return err
	}
	return root.Chtimes(path, time.Time{}, mtime)
}

// The times every Unix file system holds exactly enough (ext4, XFS and
// tmpfs from 1901-12-14, 32-bit times up to 2038-01-19): from 1902-01-01
// to 2038-01-01, in ns since the epoch.
const (
	commonMin = -2145916800 * int64(time.Second)
	commonMax = 2145916800 * int64(time.Second)
)

// CommonTime reports whether every Unix file system can hold the
// modification time ns (ns since the epoch). The kernel clamps a time
// outside a file system's range to that range without an error, so a
// restore that sets a time outside checks afterwards what it got.
func CommonTime(ns int64) bool { return ns >= commonMin && ns <= commonMax }
