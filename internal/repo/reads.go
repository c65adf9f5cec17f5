package repo

import (
	"io/fs"
	"iter"
	"time"

	"github.com/hermesd/hermesd/internal/fsys"
)

// FileReads are the files a snapshot read, each once (All). A first
// snapshot holds every file's read at the moment its memory peaks (with
// the trees being built, the new objects' index and the pack being
// sealed), so a read keeps only what its tree entry does not: the
// directory and name that find the entry (its size and SHA-256, the
// entry's own), the stat fields that prove the file unchanged later, and
// when its read began. 80 bytes a file, in blocks never grown (each as
// large as all before it, up to readBlock: a small brain's reads take
// little room, a large one's waste at most a block), where a FileRead
// held by an appended slice took 136 (up to a quarter more while it grew)
// and its path another 32.
type FileReads struct {
	blocks [][]fileRead
	n      int        // reads in blocks
	files  []FileRead // Add's
}

// fileRead is one read of a file of the tree: the entry named name in
// dir's tree holds its size and SHA-256 (the read checked that the stat's
// size is the size read).
type fileRead struct {
	dir                 *dirNode
	name                string
	start, mtime, ctime int64
	ino, dev, nlink     uint64
	mode                fs.FileMode
	overlay             bool
}

// readBlock is the most records a block holds: 40 KiB, ten pages. The
// first holds firstReadBlock: a daemon of 1,000 agents holds the reads
// of hundreds of small first snapshots at once (their packs wait for a
// quilt), and blocks of 512 there took 40 MiB more at its start.
const (
	readBlock      = 512
	firstReadBlock = 8
)

func (r *FileReads) add(dir *dirNode, name string, st fsys.Info, start time.Time) {
	if n := len(r.blocks); n == 0 || len(r.blocks[n-1]) == cap(r.blocks[n-1]) {
		r.blocks = append(r.blocks, make([]fileRead, 0, min(readBlock, max(firstReadBlock, r.n))))
	}
	r.n++
	b := &r.blocks[len(r.blocks)-1]
	*b = append(*b, fileRead{dir: dir, name: name, start: start.UnixNano(), mtime: st.Mtime, ctime: st.Ctime,
		ino: st.Ino, dev: st.Dev, nlink: st.Nlink, mode: st.Mode, overlay: st.Overlay})
}

// Add records a read made outside a snapshot's trees (a pipeline that
// hashes without them).
func (r *FileReads) Add(f FileRead) { r.files = append(r.files, f) }

// Len is the number of reads.
func (r *FileReads) Len() int { return r.n + len(r.files) }

// All yields every read, in no order. Each tree read is made whole from
// its entry, so All is for after the snapshot (Result.Reads): its trees
// are final then.
func (r *FileReads) All() iter.Seq[FileRead] {
	return func(yield func(FileRead) bool) {
		for _, f := range r.files {
			if !yield(f) {
				return
			}
		}
		for _, b := range r.blocks {
			for i := range b {
				if !yield(b[i].file()) {
					return
				}
			}
		}
	}
}

// Drain is All for a caller that takes the reads over: each block is let
// go once yielded, so that the reads' memory goes while the caller's
// grows (a hash cache adopting a first snapshot's reads), and r is empty
// after.
func (r *FileReads) Drain() iter.Seq[FileRead] {
	return func(yield func(FileRead) bool) {
		files, blocks := r.files, r.blocks
		*r = FileReads{}
		for i, f := range files {
			files[i] = FileRead{}
			if !yield(f) {
				return
			}
		}
		for i, b := range blocks {
			blocks[i] = nil
			for j := range b {
				if !yield(b[j].file()) {
					return
				}
			}
		}
	}
}

// file is the read as a FileRead. An entry that is not found (never: a
// read file stays in its tree) yields a zero SHA-256, which no cache
// adopts (hash.Learner.Adopt checks the bundle hash).
func (f *fileRead) file() FileRead {
	path := f.name
	if f.dir.path != "" {
		path = f.dir.path + "/" + f.name
	}
	fr := FileRead{Path: path, Start: time.Unix(0, f.start),
		Stat: fsys.Info{Mtime: f.mtime, Ctime: f.ctime, Ino: f.ino, Dev: f.dev, Nlink: f.nlink, Mode: f.mode, Overlay: f.overlay}}
	if e := f.dir.tree.Find(f.name); e != nil && e.Type == EntryFile {
		fr.Size, fr.Stat.Size, fr.SHA256 = e.Size, e.Size, e.SHA256
	}
	return fr
}
