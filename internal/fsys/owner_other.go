//go:build !unix

package fsys

import "io/fs"

// owner cannot tell ownership here.
func owner(fs.FileInfo) (uint32, bool) { return 0, false }

func euid() (uint32, bool) { return 0, false }

// rootOnly cannot tell ownership here: every link counts.
func rootOnly(fs.FileInfo, string) bool { return false }
