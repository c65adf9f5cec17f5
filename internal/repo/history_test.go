package repo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/hermesd/hermesd/internal/hash"
)

func TestWalkAndSummarize(t *testing.T) {
	brain := richBrain(t)
	f := newFx(t, MinPackSize)
	res := f.snap(brain, nil)
	r := f.open()
	var paths []string
	if err := r.Walk(context.Background(), func(p string, e *Entry) error {
		if e.Type == EntryDir {
			p += "/"
		}
		paths = append(paths, p)
		if p == "skills/a/" {
			return fs.SkipDir
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"empty/nested/", "patterns/p39.md", "skills/a/", "ünïcødé/日本語.md", "zero"} {
		if !slices.Contains(paths, want) {
			t.Errorf("walk misses %s", want)
		}
	}
	for _, not := range []string{"skills/a/b/", "bundle.lock.json", "receipts.ndjson"} {
		if slices.Contains(paths, not) {
			t.Errorf("walk visits %s", not)
		}
	}
	// Summaries from the downloaded trees and from the builder's trees agree
	// with the hasher, without any chunk read.
	before, _ := r.Downloaded()
	for _, src := range []TreeSource{r, res.Trees} {
		s, err := Summarize(context.Background(), src, res.Commit.Root)
		if err != nil {
			t.Fatal(err)
		}
		want, err := hash.Dir(context.Background(), brain, hash.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if s.BundleHash != want.Digest || s.Files != int64(want.Count) || s.Bytes != want.Bytes {
			t.Errorf("summary %+v, hasher %s %d %d", s, want.Digest, want.Count, want.Bytes)
		}
	}
	after, _ := r.Downloaded()
	if after != before {
		t.Errorf("summarizing downloaded %d bytes", after-before)
	}
}

func TestDiff(t *testing.T) {
	brain := richBrain(t)
	f := newFx(t, MinPackSize)
	a := f.snap(brain, nil)
	ra := f.open()
	editBrain(t, brain)
	os.Chmod(filepath.Join(brain, "zero"), 0o644)
	os.RemoveAll(filepath.Join(brain, "empty"))
	writeFiles(t, brain, map[string]string{"added/dir/x.md": "x"})
	b := f.snap(brain, nil)
	rb := f.open()
	var got []string
	err := Diff(context.Background(), ra, a.Commit.Root, rb, b.Commit.Root, func(c Change) error {
		got = append(got, fmt.Sprintf("%s %s", c.Kind, c.Path))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"added added", "added added/dir", "added added/dir/x.md",
		"removed empty", "removed empty/nested",
		"modified memory.db", "removed patterns/p07.md", "added skills/new.md", "modified zero",
	}
	if !slices.Equal(got, want) {
		t.Errorf("diff:\n got %q\nwant %q", got, want)
	}
	// Same trees: nothing, and nothing loaded.
	n := 0
	if err := Diff(context.Background(), a.Trees, a.Commit.Root, a.Trees, a.Commit.Root, func(Change) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("self diff: %d changes, %v", n, err)
	}
	// A file replaced by a directory is removed, then added.
	x := TreeMap{}
	t1 := &Tree{Entries: []Entry{{Name: "p", Type: EntryFile, Mode: 0o644}}}
	sub := &Tree{}
	subID, _ := sub.ID()
	t2 := &Tree{Entries: []Entry{DirEntry("p", 0o755, subID)}}
	id1, _ := t1.ID()
	id2, _ := t2.ID()
	x[id1], x[id2], x[subID] = t1, t2, sub
	got = nil
	Diff(context.Background(), x, id1, x, id2, func(c Change) error { got = append(got, fmt.Sprintf("%s %s", c.Kind, c.Path)); return nil })
	if !slices.Equal(got, []string{"removed p", "added p"}) {
		t.Errorf("type change: %q", got)
	}
}

func TestSubtreeRestore(t *testing.T) {
	brain := richBrain(t)
	f := newFx(t, MinPackSize)
	f.snap(brain, nil)
	r := f.open()
	for _, p := range []string{"skills", "skills/a/b/c/deep.md", "memory.db", "empty"} {
		dir := filepath.Join(t.TempDir(), "sub")
		res, err := r.Restore(context.Background(), dir, RestoreOptions{Path: p})
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		diffTrees(t, readTree(t, brain).within(p), readTree(t, dir))
		if res.BundleHash != (hash.Digest{}) {
			t.Errorf("%s: a partial restore reports a bundle hash", p)
		}
	}
	for _, p := range []string{"nope", "system.md/x", "../etc", "bundle.lock.json"} {
		_, err := r.Restore(context.Background(), filepath.Join(t.TempDir(), "sub"), RestoreOptions{Path: p})
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%q: got %v, want ErrNotFound", p, err)
		}
	}
	_, err := r.Restore(context.Background(), filepath.Join(t.TempDir(), "sub"), RestoreOptions{Path: "memory.db", MaxBytes: 1 << 20})
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("MaxBytes: got %v", err)
	}
}

func TestRestoreTarget(t *testing.T) {
	f := smallRepo(t)
	r := f.open()
	full := t.TempDir()
	writeFiles(t, full, map[string]string{"x": "x"})
	if _, err := r.Restore(context.Background(), full, RestoreOptions{}); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("non-empty target: %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if _, err := r.Restore(context.Background(), file, RestoreOptions{}); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("file target: %v", err)
	}
	empty := t.TempDir()
	if _, err := r.Restore(context.Background(), empty, RestoreOptions{}); err != nil {
		t.Errorf("empty directory target: %v", err)
	}
}

func TestCheck(t *testing.T) {
	brain := richBrain(t)
	f := newFx(t, MinPackSize)
	f.snap(brain, nil)
	editBrain(t, brain)
	res := f.snap(brain, nil)
	for _, readData := range []bool{false, true} {
		r := f.open()
		rep, err := r.Check(context.Background(), readData)
		if err != nil {
			t.Fatalf("check(%v): %v", readData, err)
		}
		if rep.Files != int(res.Commit.Files)+2 || rep.Packs != len(res.Commit.Packs)+1 || rep.ReadData != readData {
			t.Errorf("check(%v): %+v", readData, rep)
		}
		var stored int64
		for _, p := range res.Commit.Packs {
			stored += p.Size
		}
		if readData && rep.Downloaded < res.Commit.Bytes || !readData && rep.Downloaded > stored/4 {
			t.Errorf("check(%v) downloaded %d bytes of a %d-byte brain", readData, rep.Downloaded, res.Commit.Bytes)
		}
	}
	// A chunk damaged in place: only read-data finds it.
	r := f.open()
	e, err := Lookup(context.Background(), r, res.Commit.Root, "memory.db")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := r.locate(Handle{TypeChunk, e.Chunks[2]})
	if err != nil {
		t.Fatal(err)
	}
	p := r.packs[ref.pack]
	b := f.store.blob(t, p.ref.BlobID)
	b[p.hdr.DataOffset()+r.entry(ref).Offset+NonceSize+5] ^= 1
	f.store.put(t, p.ref.BlobID, b)
	if _, err := f.open().Check(context.Background(), false); err != nil {
		t.Errorf("structural check: %v", err)
	}
	if _, err := f.open().Check(context.Background(), true); !errors.Is(err, ErrAuth) {
		t.Errorf("read-data check: got %v, want ErrAuth", err)
	}
}

func TestLineage(t *testing.T) {
	brain := richBrain(t)
	f := newFx(t, 4<<20)
	var heads []string
	for i := range 3 {
		writeFiles(t, brain, map[string]string{"skills/gen.md": fmt.Sprint(i)})
		f.snap(brain, nil)
		heads = append(heads, f.head)
	}
	// Walk back from the newest head, as hermesd log does.
	var seen []string
	for id := f.head; id != ""; {
		h, err := ReadCommit(context.Background(), f.store, f.keys, id)
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, id)
		id = h.Commit.Parent
	}
	slices.Reverse(seen)
	if !slices.Equal(seen, heads) {
		t.Errorf("lineage %v, want %v", seen, heads)
	}
	// Every older head is still restorable (its packs live).
	for _, id := range heads {
		r, err := Open(context.Background(), f.store, f.keys, id, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Check(context.Background(), true); err != nil {
			t.Errorf("check %s: %v", id, err)
		}
	}
}

func TestCoalescing(t *testing.T) {
	brain := t.TempDir()
	for i := range 300 {
		writeFiles(t, brain, map[string]string{fmt.Sprintf("f%03d", i): string(randomBytes(uint64(i), 2000))})
	}
	f := newFx(t, 4<<20)
	f.snap(brain, nil)
	for _, tt := range []struct {
		opts      ReadOptions
		maxRanges int64
	}{
		{ReadOptions{}, 6}, // header + index + root tree + a few coalesced ranges
		{ReadOptions{Gap: -1, MaxRange: 64 << 10}, 20 + 3}, // 600 KB in 64 KiB ranges
	} {
		r, err := Open(context.Background(), f.store, f.keys, f.head, tt.opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Restore(context.Background(), filepath.Join(t.TempDir(), "r"), RestoreOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, n := r.Downloaded(); n > tt.maxRanges {
			t.Errorf("%+v: %d range reads, want at most %d", tt.opts, n, tt.maxRanges)
		}
	}
}

// cuttingReader cuts every other read after half its bytes: the reader
// must resume from the first missing byte.
type cuttingReader struct {
	src   RangeReader
	mu    sync.Mutex
	calls int
	cuts  int
}

func (c *cuttingReader) ReadRange(ctx context.Context, id string, off, n int64, w io.Writer) (int64, error) {
	c.mu.Lock()
	c.calls++
	cut := c.calls%2 == 1 && n > 1
	if cut {
		c.cuts++
	}
	c.mu.Unlock()
	if cut {
		total, err := c.src.ReadRange(ctx, id, off, n/2, w)
		if err != nil {
			return total, err
		}
		return total, errors.New("connection reset")
	}
	return c.src.ReadRange(ctx, id, off, n, w)
}

func TestResumedRanges(t *testing.T) {
	f := smallRepo(t)
	fr := &cuttingReader{src: f.store}
	r, err := Open(context.Background(), fr, f.keys, f.head, ReadOptions{Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "r")
	if _, err := r.Restore(context.Background(), dir, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	if fr.cuts == 0 {
		t.Error("no read was cut")
	}
}
