//go:build !unix

package fsys

import "io/fs"

// rootOnly cannot tell ownership here: every link counts.
func rootOnly(fs.FileInfo, string) bool { return false }
