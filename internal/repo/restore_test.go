package repo

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestRestoreSharedChunks restores a brain whose files share chunks every
// way the plan tells apart: one chunk in several files of one chunk, a
// file of several chunks repeating one chunk (read once, written at each
// place), two files of several chunks with the same content, and a chunk
// both a whole small file and a piece of a large one. Files sit beside
// and below subdirectories, several packs deep. One Reader serves every
// restore: each lets its trees go, the next reads them again.
func TestRestoreSharedChunks(t *testing.T) {
	brain := t.TempDir()
	small := string(randomBytes(1, 3000))
	big := randomBytes(2, 2<<20+333)
	writeFiles(t, brain, map[string]string{
		"dup.md":            small,
		"a/dup.md":          small,
		"a/b/c/dup.md":      small,
		"a/b/z.md":          "beside a subdirectory, after it",
		"a/y/":              "",
		"a/zz":              "",
		"x/big.bin":         string(big),
		"x/q/big-copy.bin":  string(big),
		"x/q/r/s/deep.md":   "deep",
		"x/r.md":            "after x/q",
		"zeros.bin":         strings.Repeat("\x00", 3<<20+5),
		"bundle.lock.json":  `{"bundleHash":"0x00","version":1}`,
		"receipts.ndjson":   `{"callId":"a"}`,
		"zz/last/of/all.md": small,
	})
	f := newFx(t, MinPackSize)
	res := f.snap(brain, nil)
	if len(res.Commit.Packs) == 0 {
		t.Fatal("one pack, want several")
	}
	// A small file holding exactly the second chunk of x/big.bin: the
	// next snapshot stores no new chunk for it.
	r := f.open()
	e, err := Lookup(context.Background(), r, res.Commit.Root, "x/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Chunks) < 3 {
		t.Fatalf("x/big.bin has %d chunks, want several", len(e.Chunks))
	}
	var off int64
	for i, id := range e.Chunks[:2] {
		ref, err := r.locate(Handle{TypeChunk, id})
		if err != nil {
			t.Fatal(err)
		}
		n := r.entry(ref).Length - Overhead
		if i == 1 {
			writeFiles(t, brain, map[string]string{"a/piece.bin": string(big[off : off+n])})
		}
		off += n
	}
	res = f.snap(brain, nil)
	r = f.open()
	distinct := map[ID]bool{}
	if err := r.Walk(context.Background(), func(p string, e *Entry) error {
		for _, id := range e.Chunks {
			distinct[id] = true
		}
		if p == "a/piece.bin" && (len(e.Chunks) != 1 || e.Chunks[0] != e.SHA256) {
			t.Errorf("a/piece.bin has chunks %v", e.Chunks)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []*FileRef{res.Commit.Lock, res.Commit.Receipts} {
		for _, id := range ref.Chunks {
			distinct[id] = true
		}
	}

	dir := filepath.Join(t.TempDir(), "all")
	got, err := r.Restore(context.Background(), dir, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mustEqualTree(t, brain, dir)
	if got.Files != int(res.Commit.Files)+2 || got.Bytes != res.Commit.Bytes+res.Commit.Lock.Size+res.Commit.Receipts.Size {
		t.Errorf("restored %d files of %d bytes; the commit has %d of %d, with lock and receipts", got.Files, got.Bytes, res.Commit.Files, res.Commit.Bytes)
	}

	for _, p := range []string{"a", "x/q", "a/b/c/dup.md", "a/piece.bin", "zeros.bin", "a/zz", "a/y"} {
		dir := filepath.Join(t.TempDir(), "part")
		if _, err := r.Restore(context.Background(), dir, RestoreOptions{Path: p}); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		diffTrees(t, readTree(t, brain).within(p), readTree(t, dir))
	}

	rep, err := r.Check(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Chunks != len(distinct) || rep.Files != got.Files || rep.Bytes != got.Bytes {
		t.Errorf("check: %d chunks, %d files, %d bytes; want %d, %d, %d", rep.Chunks, rep.Files, rep.Bytes, len(distinct), got.Files, got.Bytes)
	}
}
