//go:build unix

package fsys

import (
	"os"
	"path"
	"time"

	"golang.org/x/sys/unix"
)

// SetSymlinkMtime sets the modification time of the symlink name below
// root, the link itself and not what it names (utimensat with
// AT_SYMLINK_NOFOLLOW relative to its directory, opened through root).
// Its access time becomes the same (not every system can leave it alone,
// and a link's access time means nothing).
func SetSymlinkMtime(root *os.Root, name string, mtime time.Time) error {
	dir, base := path.Split(name)
	parent := root
	if dir != "" {
		r, err := root.OpenRoot(path.Clean(dir))
		if err != nil {
			return err
		}
		defer r.Close()
		parent = r
	}
	d, err := parent.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	rc, err := d.SyscallConn()
	if err != nil {
		return err
	}
	t := unix.NsecToTimespec(mtime.UnixNano())
	ts := []unix.Timespec{t, t}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = unix.UtimesNanoAt(int(fd), base, ts, unix.AT_SYMLINK_NOFOLLOW)
			if serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "lutimes", Path: name, Err: serr}
	}
	return nil
}
