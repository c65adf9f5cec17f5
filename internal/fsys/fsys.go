package fsys

import "io/fs"

// Info is the part of a stat result the walkers use. Two Infos of one path
// are equal only if nothing the hash cache cares about changed.
type Info struct {
	Size  int64
	Mtime int64 // ns since the epoch
	Ctime int64 // ns since the epoch; 0 where the implementation has none
	Ino   uint64
	Dev   uint64
	// Nlink is the number of names of the file (hard links); 0 where the
	// implementation does not know (the portable one).
	Nlink uint64
	Mode  fs.FileMode // type and permission bits, setuid, setgid, sticky
	// Overlay is set when the Info is that of a file an Overlay shows in
	// place of the path, so that it never equals an Info of the tree's own.
	Overlay bool
}

// Entry is one directory entry: its name and type (fs.FileMode type bits:
// 0 for a regular file, fs.ModeDir, fs.ModeSymlink, ...).
type Entry struct {
	Name string
	Type fs.FileMode
}
