//go:build !unix

package fsys

import "io/fs"

// rootOnly cannot tell ownership here: every link counts.
func rootOnly(fs.FileInfo, string) bool { return false }

// linksOf cannot tell the link count here.
func linksOf(fs.FileInfo) uint64 { return 0 }
