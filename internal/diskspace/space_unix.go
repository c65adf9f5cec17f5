//go:build linux || darwin

package diskspace

import "golang.org/x/sys/unix"

// space returns the bytes available to this user and the size of the
// filesystem holding dir.
func space(dir string) (avail, size uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	unit := uint64(st.Bsize)
	return uint64(st.Bavail) * unit, uint64(st.Blocks) * unit, nil
}
