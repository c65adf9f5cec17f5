package repo

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/fsys"
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

// TestRestoreHardLinks: a brain with two files of two names each restores
// them as links (one inode per file); a restore of a directory holding a
// second name whose first is elsewhere writes the content there instead;
// the trees say which names are links, with their targets' content.
func TestRestoreHardLinks(t *testing.T) {
	if !fsys.Inodes {
		t.Log("the portable walker stores each name of a file as a file")
	}
	brain := richBrain(t)
	f := newFx(t, 4<<20)
	res := f.snap(brain, nil)
	dir, got := f.restore()
	mustEqualTree(t, brain, dir)
	want := 0
	if fsys.Inodes {
		want = 2
	}
	if got.Links != want || len(got.Stripped) != 1 || got.Stripped[0].Path != "bin/tool" || got.Stripped[0].Restored != 0o755 {
		t.Fatalf("restored %+v", got)
	}
	r := f.open()
	for p, target := range map[string]string{"system.md": "skills/alias.md", "patterns/p00.md": "emoji/again.md", "skills/alias.md": ""} {
		e, err := Lookup(context.Background(), r, res.Commit.Root, p)
		if err != nil {
			t.Fatal(err)
		}
		if !fsys.Inodes {
			target = ""
		}
		if e.Link != target || e.Size == 0 {
			t.Errorf("%s: link %q (size %d), want %q", p, e.Link, e.Size, target)
		}
	}
	// patterns/p00.md's first name is emoji/again.md: restoring patterns
	// alone writes its content; restoring the root links it.
	part := filepath.Join(t.TempDir(), "part")
	pr, err := r.Restore(context.Background(), part, RestoreOptions{Path: "patterns"})
	if err != nil {
		t.Fatal(err)
	}
	if pr.Links != 0 {
		t.Errorf("a partial restore made %d links to files it did not restore", pr.Links)
	}
	diffTrees(t, readTree(t, brain).within("patterns"), readTree(t, part))
	b, err := os.ReadFile(filepath.Join(part, "patterns", "p00.md"))
	if want, _ := os.ReadFile(filepath.Join(brain, "emoji", "again.md")); err != nil || !bytes.Equal(b, want) {
		t.Errorf("patterns/p00.md: %v", err)
	}
}
