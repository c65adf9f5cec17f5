//go:build unix && !linux

package repo

import "golang.org/x/sys/unix"

// parseDirents appends the names of the directory records in b to ents,
// with unknown types: the walker stats them.
func parseDirents(b []byte, ents []dirent) []dirent {
	_, _, names := unix.ParseDirent(b, -1, nil)
	for _, n := range names {
		ents = append(ents, dirent{name: n})
	}
	return ents
}
