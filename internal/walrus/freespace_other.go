//go:build !linux && !darwin

package walrus

// diskSpace cannot tell free space here; CheckFreeSpace then passes.
func diskSpace(string) (avail, size uint64, err error) { return 0, 0, errSpaceUnknown }
