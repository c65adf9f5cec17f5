package repo

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/fsys"
)

// TestFileReads: reads of more than the largest block each come back whole from
// their entries (path, size, SHA-256) and their own stat and start, in
// the order added, after Add's; Drain yields the same and empties the
// list; All stops when its caller does.
func TestFileReads(t *testing.T) {
	const n = 2*readBlock + 7
	root := &dirNode{tree: &Tree{}}
	sub := &dirNode{path: "a/b", tree: &Tree{}}
	start := time.Unix(1_700_000_000, 123)
	var r FileReads
	r.Add(FileRead{Path: "made/elsewhere", Size: 3})
	var want []FileRead
	for i := range n {
		d := root
		if i%2 == 1 {
			d = sub
		}
		name := fmt.Sprintf("f%05d", i)
		sum := sha256.Sum256([]byte(name))
		d.tree.Entries = append(d.tree.Entries, Entry{Name: name, Type: EntryFile, Size: int64(i), SHA256: sum})
		st := fsys.Info{Size: int64(i), Mtime: int64(i) * 10, Ctime: int64(i)*10 + 1, Ino: uint64(i) + 5, Dev: 9,
			Nlink: 1 + uint64(i%3), Mode: 0o640 | fs.ModeSetgid, Overlay: i%5 == 0}
		r.add(d, name, st, start.Add(time.Duration(i)))
		path := name
		if d == sub {
			path = "a/b/" + name
		}
		want = append(want, FileRead{Path: path, Stat: st, Start: start.Add(time.Duration(i)), Size: int64(i), SHA256: sum})
	}
	if r.Len() != n+1 {
		t.Fatalf("Len %d, want %d", r.Len(), n+1)
	}
	// Blocks grow with the reads: a few take a small one, none exceed readBlock.
	total := 0
	for i, b := range r.blocks {
		if i == 0 && cap(b) != firstReadBlock || cap(b) > readBlock || i > 0 && cap(b) < min(readBlock, total) {
			t.Fatalf("block %d holds %d after %d reads", i, cap(b), total)
		}
		total += len(b)
	}
	var got []FileRead
	for f := range r.All() {
		got = append(got, f)
	}
	if len(got) != n+1 || got[0].Path != "made/elsewhere" || got[0].Size != 3 {
		t.Fatalf("%d reads, the first %+v", len(got), got[0])
	}
	for i, w := range want {
		g := got[i+1]
		if g.Path != w.Path || g.Stat != w.Stat || !g.Start.Equal(w.Start) || g.Size != w.Size || g.SHA256 != w.SHA256 {
			t.Fatalf("read %d: %+v, want %+v", i, g, w)
		}
	}
	var drained []FileRead
	for f := range r.Drain() {
		drained = append(drained, f)
	}
	if r.Len() != 0 || len(drained) != len(got) || drained[len(drained)-1] != got[len(got)-1] {
		t.Fatalf("Drain: %d reads, %d left", len(drained), r.Len())
	}
	for range want {
		r.add(root, "f00000", fsys.Info{}, start)
	}
	seen := 0
	for range r.All() {
		if seen++; seen == readBlock+1 {
			break
		}
	}
	if seen != readBlock+1 {
		t.Fatalf("All went on to %d after its caller stopped", seen)
	}
}
