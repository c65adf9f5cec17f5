package repo

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermesd/hermesd/internal/hash"
)

// symlinkBrain is a brain with symlinks of every kind a brain may hold:
// relative, absolute, climbing out of it, dangling, to a directory, to a
// directory outside the brain (whose file must not be snapshotted), not
// UTF-8, and of the longest target Linux allows; each with its own time.
// It returns the brain, the directory outside and the bundle hash of the
// brain before the links were made.
func symlinkBrain(t *testing.T) (brain, outside string, before hash.Digest) {
	t.Helper()
	outside = t.TempDir()
	writeFiles(t, outside, map[string]string{"secret": "not the brain's"})
	brain = t.TempDir()
	writeFiles(t, brain, map[string]string{
		"system.md":   "You are a test agent.\n",
		"skills/x.md": "x",
		"notes/":      "",
	})
	h, err := hash.Dir(context.Background(), brain, hash.Options{})
	if err != nil {
		t.Fatal(err)
	}
	links := []struct{ path, target string }{
		{"rel", "system.md"},
		{"abs", "/etc/passwd"},
		{"up", "../../../outside/evil"},
		{"dangling", "nowhere/at/all"},
		{"dir", "skills"},
		{"out", outside},
		{"skills/back", "../system.md"},
		{"skills/secret", filepath.Join(outside, "secret")},
		{"notes/bytes", "\xff\xfe not UTF-8 \x01"},
		{"notes/long", strings.Repeat("a/", 2047) + "b"}, // 4095 bytes
	}
	for i, l := range links {
		p := filepath.Join(brain, filepath.FromSlash(l.path))
		if err := os.Symlink(l.target, p); err != nil {
			t.Fatal(err)
		}
		lutimes(t, p, time.Unix(1_600_000_000+int64(i), int64(i)))
	}
	return brain, outside, h.Digest
}

// lutimes sets a symlink's own times.
func lutimes(t *testing.T, p string, when time.Time) {
	t.Helper()
	ts := unix.NsecToTimespec(when.UnixNano())
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatal(err)
	}
}

// TestSymlinksKept: a snapshot stores every symlink as a symlink, its
// target verbatim and its time, never following it (the directory
// outside the brain a link names is not snapshotted), and the bundle hash,
// file count and size ignore symlinks as the hasher (and the reference's
// hashBundleDir) does. A restore gives every link back as the same link,
// writes nothing through one, and a snapshot of the restored brain is the
// same tree.
func TestSymlinksKept(t *testing.T) {
	brain, outside, before := symlinkBrain(t)
	f := newFx(t, 4<<20)
	res := f.snap(brain, nil)
	if res.Commit.BundleHash != before || res.Commit.Files != 2 || res.Commit.Bytes != int64(len("You are a test agent.\nx")) {
		t.Errorf("commit: %s, %d files, %d bytes; want the brain's without its links, %s, 2 files", res.Commit.BundleHash, res.Commit.Files, res.Commit.Bytes, before)
	}
	err := Walk(context.Background(), res.Trees, res.Commit.Root, func(p string, e *Entry) error {
		if strings.HasPrefix(p, "out/") || strings.HasPrefix(p, "dir/") {
			t.Errorf("the snapshot went through a symlink: %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	dir, _ := f.restore()
	mustEqualTree(t, brain, dir)
	if ents, err := os.ReadDir(outside); err != nil || len(ents) != 1 {
		t.Errorf("the directory a restored link names holds %v (%v): the restore wrote through a link", ents, err)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(b) != "not the brain's" {
		t.Errorf("outside/secret: %q %v", b, err)
	}

	// A snapshot of the restored brain reads the links and follows none:
	// the same root tree.
	g := newFx(t, 4<<20)
	if again := g.snap(dir, nil); again.Commit.Root != res.Commit.Root {
		t.Errorf("the restored brain snapshots to root tree %s, the brain to %s", again.Commit.Root.Short(), res.Commit.Root.Short())
	}
}

// TestSymlinkReport: Restored counts the links; a restore of one path
// restores a link by itself, refuses a path through one, and a hard link
// naming a symlink is corrupt.
func TestSymlinkReport(t *testing.T) {
	brain, _, _ := symlinkBrain(t)
	f := newFx(t, 4<<20)
	f.snap(brain, nil)
	_, rr := f.restore()
	if rr.Symlinks != 10 || rr.Files != 2 {
		t.Errorf("restored %d symlinks and %d files, want 10 and 2", rr.Symlinks, rr.Files)
	}
	r := f.open()
	for _, tt := range []struct {
		path string
		ok   bool
	}{{"skills/back", true}, {"dir/x.md", false}, {"out/secret", false}} {
		dir := filepath.Join(t.TempDir(), "one")
		_, err := r.Restore(context.Background(), dir, RestoreOptions{Path: tt.path})
		switch {
		case tt.ok && err != nil:
			t.Errorf("restore --path %s: %v", tt.path, err)
		case tt.ok:
			if got, err := os.Readlink(filepath.Join(dir, "skills", "back")); err != nil || got != "../system.md" {
				t.Errorf("restore --path %s: %q %v", tt.path, got, err)
			}
		case !errors.Is(err, ErrNotFound):
			t.Errorf("restore --path %s (through a symlink): %v, want ErrNotFound", tt.path, err)
		}
	}

	rewriteTreeAndSums(t, f, func(tr *Tree) {
		s := tr.Find("system.md")
		tr.Entries = append(tr.Entries, Entry{Name: "zz", Type: EntryFile, Size: s.Size, SHA256: s.SHA256, Link: "rel"})
	})
	if err := restoreErr(t, f); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "not a file") {
		t.Errorf("a hard link to a symlink: %v", err)
	}
}

// TestSymlinkBound: a symlink counts toward none of the commit's totals,
// and a tree may be shared by any number of directories; a restore makes
// at most MaxSymlinks, and refuses more before writing anything.
func TestSymlinkBound(t *testing.T) {
	f := smallRepo(t)
	shared := &Tree{}
	for i := range 1024 {
		shared.Entries = append(shared.Entries, Entry{Name: fmt.Sprintf("l%04d", i), Type: EntrySymlink, Link: "t"})
	}
	rewriteHead(t, f, func(h *Header, ix *PackIndex, data *[]byte) {
		c, err := DecodeCommit(ix.Commit)
		if err != nil {
			t.Fatal(err)
		}
		root := *f.last.Trees[c.Root]
		root.Entries = append([]Entry(nil), root.Entries...)
		sid, err := shared.ID()
		if err != nil {
			t.Fatal(err)
		}
		for i := range MaxSymlinks/1024 + 1 {
			root.Entries = append(root.Entries, DirEntry(fmt.Sprintf("zz%05d", i), 0o755, sid))
		}
		trees := TreeMap{sid: shared}
		for tid, tr := range f.last.Trees {
			trees[tid] = tr
		}
		for _, tr := range []*Tree{shared, &root} {
			plain, err := tr.Encode()
			if err != nil {
				t.Fatal(err)
			}
			id := ID(sha256.Sum256(plain))
			sealed, err := f.keys.sealTo(nil, TypeTree, plain)
			if err != nil {
				t.Fatal(err)
			}
			ix.Entries = append(ix.Entries, IndexEntry{Type: TypeTree, ID: id, Offset: int64(len(*data)), Length: int64(len(sealed))})
			*data = append(*data, sealed...)
			trees[id], c.Root = tr, id
		}
		s, err := Summarize(context.Background(), trees, c.Root)
		if err != nil {
			t.Fatal(err)
		}
		c.BundleHash, c.Files, c.Bytes = s.BundleHash, s.Files, s.Bytes
		if ix.Commit, err = c.Encode(); err != nil {
			t.Fatal(err)
		}
	})
	if err := restoreErr(t, f); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "symlinks") {
		t.Errorf("restore of %d symlinks: %v", (MaxSymlinks/1024+1)*1024, err)
	}
}

// TestSubdirNotWorldWritable: a directory of the brain that records o+w
// (a revision 2 tree, mode 3777) is restored without it, as a brain
// directory is, and listed; allow_unsafe_dirs (PublicDirs) keeps it.
func TestSubdirNotWorldWritable(t *testing.T) {
	brain := t.TempDir()
	writeFiles(t, brain, map[string]string{"pub/x": "x", "pub/deeper/": ""})
	for _, p := range []string{"pub", "pub/deeper"} {
		if err := os.Chmod(filepath.Join(brain, p), 0o777|fs.ModeSetgid|fs.ModeSticky); err != nil {
			t.Fatal(err)
		}
	}
	f := newFx(t, 4<<20)
	f.snap(brain, nil)
	for _, public := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "restored")
		rr, err := f.open().Restore(context.Background(), dir, RestoreOptions{PublicDirs: public})
		if err != nil {
			t.Fatal(err)
		}
		want := 0o777 | fs.ModeSetgid | fs.ModeSticky
		if !public {
			want &^= 0o002
			if len(rr.Narrowed) != 2 || rr.Narrowed[0].Path != "pub" || rr.Narrowed[0].Mode != 0o777|fs.ModeSetgid|fs.ModeSticky ||
				rr.Narrowed[0].Restored != want || rr.Narrowed[1].Path != "pub/deeper" {
				t.Errorf("narrowed: %+v", rr.Narrowed)
			}
		} else if len(rr.Narrowed) != 0 {
			t.Errorf("narrowed with PublicDirs: %+v", rr.Narrowed)
		}
		for _, p := range []string{"pub", "pub/deeper"} {
			st, err := os.Stat(filepath.Join(dir, p))
			if err != nil || st.Mode()&(fs.ModePerm|fs.ModeSetgid|fs.ModeSticky|fs.ModeSetuid) != want {
				t.Errorf("public %v: %s restored %v (%v), want %v", public, p, st.Mode(), err, want)
			}
		}
	}
}

// TestExtremeTimes: a revision 2 entry may record any int64 time,
// −2^63 ns and the epoch included (neither is "no time", which is
// revision 1's alone); a restore sets exactly what is recorded, and lists
// what the file system could not hold (the kernel clamps a time out of
// its range).
func TestExtremeTimes(t *testing.T) {
	f := smallRepo(t)
	times := map[string]int64{"system.md": -1 << 63, "notes": 0, "skills": 999_999_999}
	rewriteTreeAndSums(t, f, func(tr *Tree) {
		for name, mt := range times {
			tr.Find(name).Mtime = mt
		}
	})
	dir := filepath.Join(t.TempDir(), "restored")
	rr, err := f.open().Restore(context.Background(), dir, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	retimed := map[string]Retimed{}
	for _, r := range rr.Retimed {
		retimed[r.Path] = r
	}
	for name, want := range times {
		st, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		got := st.ModTime().UnixNano()
		r, listed := retimed[name]
		switch {
		case got == want && !listed:
		case got != want && listed && r.Recorded == want && r.Kept == got:
			t.Logf("%s: the file system keeps %d for %d (listed)", name, got, want)
		default:
			t.Errorf("%s: mtime %d, recorded %d; listed %v %+v", name, got, want, listed, r)
		}
	}
	if _, ok := retimed["notes"]; ok {
		t.Error("the epoch, which every file system holds, listed as not kept")
	}
}

// TestDecodeTreeRejectsSymlinks: a symlink entry is checked when decoded:
// a target of 1 to 4095 bytes without NUL (anything else is kept
// verbatim, "..", absolute and not UTF-8 included), no mode, not in a
// revision 1 tree; an encoder refuses to write what a decoder refuses.
func TestDecodeTreeRejectsSymlinks(t *testing.T) {
	sym := func(target string, mode uint16) []byte {
		b := []byte{0, 0, 0, 1, 0, 1, 'l', codeSymlink, byte(mode >> 8), byte(mode)}
		b = append(b, 0x17, 0x97, 0x9c, 0xff, 0x9b, 0xca, 0xbc, 0)
		b = append(b, byte(len(target)>>8), byte(len(target)))
		return append(b, target...)
	}
	for _, target := range []string{"a", "/etc/passwd", "../../x", "\xff\xfe", strings.Repeat("x", 4095)} {
		tr, err := DecodeTree(sym(target, 0))
		if err != nil || tr.Entries[0].Type != EntrySymlink || tr.Entries[0].Link != target {
			t.Errorf("target %.20q: %v %+v", target, err, tr)
		}
	}
	// A revision 1 directory "a", then the symlink "l".
	rev1 := []byte{0, 0, 0, 2, 0, 1, 'a', codeDir1, 0x01, 0xed}
	rev1 = append(rev1, make([]byte, 32)...)
	rev1 = append(rev1, sym("x", 0)[4:]...)
	for name, b := range map[string][]byte{
		"empty target":        sym("", 0),
		"NUL in target":       sym("a\x00b", 0),
		"target of 4096":      sym(strings.Repeat("x", 4096), 0),
		"mode":                sym("a", 0o777),
		"truncated target":    sym("abc", 0)[:len(sym("abc", 0))-1],
		"truncated time":      sym("", 0)[:14],
		"with revision 1 dir": rev1,
	} {
		if _, err := DecodeTree(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	for name, e := range map[string]Entry{
		"empty target": {Name: "l", Type: EntrySymlink},
		"NUL":          {Name: "l", Type: EntrySymlink, Link: "a\x00"},
		"mode":         {Name: "l", Type: EntrySymlink, Link: "a", Mode: 0o777},
		"untimed":      {Name: "l", Type: EntrySymlink, Link: "a", Untimed: true},
		"size":         {Name: "l", Type: EntrySymlink, Link: "a", Size: 1},
	} {
		if _, err := (&Tree{Entries: []Entry{e}}).Encode(); err == nil {
			t.Errorf("encoded a symlink with %s", name)
		}
	}
}
