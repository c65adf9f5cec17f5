//go:build !unix

package fsys

import "io/fs"

// linksOf cannot tell the link count here.
func linksOf(fs.FileInfo) uint64 { return 0 }
