package walrus

import "syscall"

// diskSpace returns the bytes available to this user and the size of the
// filesystem holding dir.
func diskSpace(dir string) (avail, size uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	unit := uint64(st.Bsize)
	return st.Bavail * unit, st.Blocks * unit, nil
}
