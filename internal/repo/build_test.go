package repo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/hash"
)

// TestManySmallFiles: many small files in a deep tree round-trip through
// a directory store. The 50,000-file acceptance brain runs through the
// pipeline and the local Walrus server (snapshot.TestV3RoundTrip); here
// 5,000 keep the package's tests quick.
func TestManySmallFiles(t *testing.T) {
	n := 5_000
	brain := t.TempDir()
	for d := range 100 {
		if err := os.MkdirAll(filepath.Join(brain, fmt.Sprintf("skills/d%02d", d%10), fmt.Sprintf("s%02d", d)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		p := filepath.Join(brain, fmt.Sprintf("skills/d%02d/s%02d/f%05d.md", i%100%10, i%100, i))
		if err := os.WriteFile(p, fmt.Appendf(nil, "skill %d\n%s", i, bytes.Repeat([]byte{byte('a' + i%26)}, i%700)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := newFx(t, 10<<20)
	start := time.Now()
	res := f.snap(brain, nil)
	took := time.Since(start)
	if res.Commit.Files != int64(n) || res.Stats.FilesRead != n {
		t.Fatalf("commit has %d files, read %d; want %d", res.Commit.Files, res.Stats.FilesRead, n)
	}
	start = time.Now()
	dir, rr := f.restore()
	t.Logf("%d files, %d bytes: snapshot %v (%d packs), restore %v (%d ranges)", n, res.Commit.Bytes, took, res.Stats.Packs, time.Since(start), rr.Ranges)
	mustEqualTree(t, brain, dir)
}

func TestMultiPack(t *testing.T) {
	brain := t.TempDir()
	for i := range 8 {
		if err := os.WriteFile(filepath.Join(brain, fmt.Sprintf("blob%d.bin", i)), randomBytes(uint64(100+i), 5<<20), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeFiles(t, brain, map[string]string{"system.md": "hi", "bundle.lock.json": "{}"})
	const cap = 10 << 20
	f := newFx(t, cap)
	res := f.snap(brain, nil)
	sizes := f.store.sizes(t)
	if len(sizes) < 4 {
		t.Errorf("40 MiB in packs of 10 MiB: %d packs", len(sizes))
	}
	var total int64
	for id, n := range sizes {
		if n > cap {
			t.Errorf("pack %s has %d bytes, over the cap of %d", id, n, cap)
		}
		total += n
	}
	if res.Stats.Packs != len(sizes) || res.Stats.BytesUploaded != total || len(res.Commit.Packs) != len(sizes)-1 {
		t.Errorf("stats: %d packs, %d bytes; store: %d packs, %d bytes; commit lists %d", res.Stats.Packs, res.Stats.BytesUploaded, len(sizes), total, len(res.Commit.Packs))
	}
	dir, _ := f.restore()
	mustEqualTree(t, brain, dir)
}

// TestPageEdit rewrites one 4 KiB page inside a 200 MB database: the
// second snapshot must upload well under 2% of the brain.
func TestPageEdit(t *testing.T) {
	size := 200_000_000
	if raceEnabled || testing.Short() {
		size = 80_000_000 // a chunk of up to 1 MiB is still well under 2%
	}
	brain := t.TempDir()
	db := filepath.Join(brain, "memory.db")
	if err := os.WriteFile(db, randomBytes(42, size), 0o644); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, brain, map[string]string{"system.md": "agent", "skills/x.md": "x"})
	f := newFx(t, 10<<20)
	f.snap(brain, nil)
	fh, err := os.OpenFile(db, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt(randomBytes(43, 4096), int64(size/4096/3*4096)); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	res := f.snap(brain, nil)
	ratio := float64(res.Stats.BytesUploaded) / float64(res.Commit.Bytes)
	t.Logf("brain %d bytes; page edit uploaded %d bytes in %d packs (%.3f%%): %d new chunks (%d bytes), %d trees, %d chunks reused",
		res.Commit.Bytes, res.Stats.BytesUploaded, res.Stats.Packs, 100*ratio, res.Stats.ChunksNew, res.Stats.BytesNew, res.Stats.TreesNew, res.Stats.ChunksReused)
	if ratio >= 0.02 {
		t.Errorf("uploaded %.2f%% of the brain, want well under 2%%", 100*ratio)
	}
	if res.Stats.ChunksNew < 1 || res.Stats.ChunksNew > 3 {
		t.Errorf("%d new chunks for one page", res.Stats.ChunksNew)
	}
	dir, _ := f.restore()
	mustEqualTree(t, brain, dir)
}

func TestUnchangedUploadsNothingNew(t *testing.T) {
	brain := withoutLinks(t, richBrain(t))
	f := newFx(t, 4<<20)
	first := f.snap(brain, nil)
	second := f.snap(brain, nil)
	st := second.Stats
	if st.ChunksNew != 0 || st.TreesNew != 0 || st.BytesNew != 0 || st.Packs != 1 || second.Commit.Added != 0 {
		t.Errorf("unchanged brain: %d new chunks, %d new trees, %d new bytes, %d packs, added %d",
			st.ChunksNew, st.TreesNew, st.BytesNew, st.Packs, second.Commit.Added)
	}
	// Only the lock and receipts are read again (they live beside the tree).
	if st.FilesRead != 2 || st.FilesReused != int(first.Commit.Files) {
		t.Errorf("read %d files and reused %d, want 2 and %d", st.FilesRead, st.FilesReused, first.Commit.Files)
	}
	if second.Commit.Root != first.Commit.Root || second.Commit.Parent != first.Head.BlobID || second.Commit.ParentFormat != ParentV3 {
		t.Errorf("root %s → %s, parent %q %q", first.Commit.Root.Short(), second.Commit.Root.Short(), second.Commit.Parent, second.Commit.ParentFormat)
	}
	// The head is one small pack: the commit, nothing else.
	if second.Head.Size > 64<<10 {
		t.Errorf("head pack of %d bytes for an unchanged brain", second.Head.Size)
	}
	dir, _ := f.restore()
	mustEqualTree(t, brain, dir)
}

func TestIncrementalReadsOnlyChanges(t *testing.T) {
	brain := withoutLinks(t, richBrain(t))
	f := newFx(t, 4<<20)
	first := f.snap(brain, nil)
	editBrain(t, brain)
	second := f.snap(brain, nil)
	st := second.Stats
	// memory.db, the new skill, the lock and the receipts.
	if st.FilesRead != 4 || st.FilesReused != int(first.Commit.Files)-2 {
		t.Errorf("read %d files, reused %d (first commit had %d)", st.FilesRead, st.FilesReused, first.Commit.Files)
	}
	if st.ChunksNew > 4 || st.ChunksNew == 0 {
		t.Errorf("%d new chunks", st.ChunksNew)
	}
	// Unchanged directories keep their tree: only root, skills and
	// patterns (a file removed) change.
	if st.TreesNew != 3 {
		t.Errorf("%d new trees, want 3", st.TreesNew)
	}
	if !slices.ContainsFunc(second.Commit.Packs, func(p PackRef) bool { return p.BlobID == first.Head.BlobID }) {
		t.Errorf("the previous head pack holds live objects but is not listed")
	}
	dir, _ := f.restore()
	mustEqualTree(t, brain, dir)

	// Without the hash cache's view, every file is read, but nothing
	// unchanged is stored again.
	third := f.snap(brain, func(in *SnapshotInput) { in.Known = nil })
	if third.Stats.FilesRead != int(third.Commit.Files)+2 || third.Stats.ChunksNew != 0 || third.Stats.TreesNew != 0 {
		t.Errorf("without Known: read %d of %d files, %d new chunks, %d new trees", third.Stats.FilesRead, third.Commit.Files, third.Stats.ChunksNew, third.Stats.TreesNew)
	}
}

// A directory exactly as in the previous commit keeps that commit's tree
// (the same *Tree, not a copy); one whose file only changed mode does not.
func TestUnchangedTreesShared(t *testing.T) {
	brain := withoutLinks(t, richBrain(t))
	f := newFx(t, 4<<20)
	first := f.snap(brain, nil)
	if err := os.Chmod(filepath.Join(brain, "skills/a/b/c/deep.md"), 0o600); err != nil {
		t.Fatal(err)
	}
	second := f.snap(brain, nil)
	r := f.open()
	subtree := func(res *Result, path string) ID {
		t.Helper()
		e, err := Lookup(context.Background(), res.Trees, res.Commit.Root, path)
		if err != nil {
			t.Fatal(err)
		}
		return e.Subtree()
	}
	for _, d := range []string{"patterns", "emoji", "empty/nested", "skills/a/b/c", "skills/a", "skills"} {
		id1, id2 := subtree(first, d), subtree(second, d)
		unchanged := !strings.HasPrefix(d, "skills")
		if (id1 == id2) != unchanged {
			t.Errorf("%s: tree %s then %s; want unchanged %v", d, id1.Short(), id2.Short(), unchanged)
		}
		if unchanged && second.Trees[id2] != first.Trees[id1] {
			t.Errorf("%s: unchanged, but its tree is a copy", d)
		}
	}
	if second.Stats.FilesRead != 2 || second.Stats.TreesNew != 5 { // lock, receipts; root, skills, a, b, c
		t.Errorf("read %d files, %d new trees", second.Stats.FilesRead, second.Stats.TreesNew)
	}
	dir, _ := f.restore()
	mustEqualTree(t, brain, dir)
	if e, err := Lookup(context.Background(), r, second.Commit.Root, "skills/a/b/c/deep.md"); err != nil || e.Mode != 0o600 {
		t.Fatalf("deep.md: %v, %v; want mode 0600", e, err)
	}

	// Nothing changed: the whole tree is the previous one.
	third := f.snap(brain, nil)
	if third.Commit.Root != second.Commit.Root || third.Trees[third.Commit.Root] != second.Trees[second.Commit.Root] || third.Stats.TreesNew != 0 {
		t.Errorf("unchanged brain: root %s (was %s), %d new trees", third.Commit.Root.Short(), second.Commit.Root.Short(), third.Stats.TreesNew)
	}
	if len(third.Trees) != len(second.Trees) || third.Commit.Files != second.Commit.Files || third.Commit.Bytes != second.Commit.Bytes {
		t.Errorf("unchanged brain: %d trees, %d files, %d bytes; was %d, %d, %d", len(third.Trees), third.Commit.Files, third.Commit.Bytes, len(second.Trees), second.Commit.Files, second.Commit.Bytes)
	}
}

func TestRepack(t *testing.T) {
	brain := richBrain(t)
	f := newFx(t, MinPackSize)
	first := f.snap(brain, nil)
	editBrain(t, brain)
	second := f.snap(brain, nil)
	old := append([]string{first.Head.BlobID}, blobIDs(first.Commit.Packs)...)
	third := f.snap(brain, func(in *SnapshotInput) { in.Repack = old })
	for _, id := range old {
		if third.Commit.Pack(id) != nil {
			t.Errorf("repacked pack %s is still listed", id)
		}
	}
	if third.Stats.ChunksNew == 0 || third.Commit.Root != second.Commit.Root {
		t.Errorf("repack wrote %d chunks; root %s → %s", third.Stats.ChunksNew, second.Commit.Root.Short(), third.Commit.Root.Short())
	}
	// The repacked blobs can expire: the head no longer needs them.
	for _, id := range old {
		if err := os.Remove(filepath.Join(f.store.dir, id)); err != nil {
			t.Fatal(err)
		}
	}
	dir, _ := f.restore()
	mustEqualTree(t, brain, dir)
	if _, err := f.open().Check(context.Background(), true); err != nil {
		t.Errorf("check after repack: %v", err)
	}

	// RepackBefore selects by end epoch: the store hands out epoch 200 now.
	f.store.epoch = 200
	fourth := f.snap(brain, func(in *SnapshotInput) { in.RepackBefore = 150 })
	for _, p := range fourth.Commit.Packs {
		if p.EndEpoch <= 150 {
			t.Errorf("pack %s ends at epoch %d, not repacked", p.BlobID, p.EndEpoch)
		}
	}
	if got := fourth.Commit.MinEndEpoch(); got != 200 {
		t.Errorf("min end epoch %d, want 200", got)
	}
	dir, _ = f.restore()
	mustEqualTree(t, brain, dir)
}

func blobIDs(packs []PackRef) []string {
	ids := make([]string, len(packs))
	for i, p := range packs {
		ids[i] = p.BlobID
	}
	return ids
}

// TestUploadFailureKeepsHead: a failed upload leaves the index and the
// previous head untouched; the retry succeeds.
func TestUploadFailureKeepsHead(t *testing.T) {
	brain := richBrain(t)
	f := newFx(t, MinPackSize)
	f.snap(brain, nil)
	head, indexLen, packs := f.head, f.index.Len(), f.index.Packs()
	editBrain(t, brain)
	for _, failAt := range []int{1, 2} { // a full pack, then the head
		n := 0
		f.store.fail = func(p *Pack) error {
			if n++; n == failAt || (failAt == 2 && p.Head) {
				return errors.New("publisher unavailable")
			}
			return nil
		}
		_, err := f.trySnap(brain, nil)
		if err == nil {
			t.Fatalf("fail at %d: snapshot succeeded", failAt)
		}
		if f.head != head || f.index.Head() != head || f.index.Len() != indexLen || !slices.Equal(f.index.Packs(), packs) {
			t.Fatalf("fail at %d: head or index changed after a failed snapshot", failAt)
		}
		dir, _ := f.restore() // the previous head is intact
		if _, err := os.Stat(filepath.Join(dir, "skills/new.md")); !os.IsNotExist(err) {
			t.Fatalf("the previous head restores the edit: %v", err)
		}
	}
	f.store.fail = nil
	f.snap(brain, nil)
	dir, _ := f.restore()
	mustEqualTree(t, brain, dir)
	leftovers, _ := os.ReadDir(f.b.SpoolDir)
	if len(leftovers) != 0 {
		t.Errorf("spool directory holds %d files after the snapshots", len(leftovers))
	}
}

func TestChangedDuringSnapshot(t *testing.T) {
	brain := richBrain(t)
	f := newFx(t, 4<<20)
	hr, err := hash.Dir(context.Background(), brain, hash.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A file appears after the hash was taken.
	writeFiles(t, brain, map[string]string{"late.md": "late"})
	_, err = f.b.Snapshot(context.Background(), SnapshotInput{Brain: brain, Index: f.index, Known: hash.Files(hr.Files), Want: hr.Digest})
	if !errors.Is(err, ErrChanged) {
		t.Fatalf("got %v, want ErrChanged", err)
	}
	if f.index.Len() != 0 {
		t.Errorf("the index holds %d objects after a failed snapshot", f.index.Len())
	}
}

func TestBadNames(t *testing.T) {
	for _, name := range []string{"a\\b", "bad\xffname"} {
		brain := t.TempDir()
		if err := os.WriteFile(filepath.Join(brain, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		f := newFx(t, 4<<20)
		_, err := f.b.Snapshot(context.Background(), SnapshotInput{Brain: brain, Index: f.index})
		if !errors.Is(err, ErrName) {
			t.Errorf("%q: got %v, want ErrName", name, err)
		}
	}
	brain := t.TempDir()
	writeFiles(t, brain, map[string]string{"bundle.lock.json/x": "a directory where the lock goes"})
	f := newFx(t, 4<<20)
	if _, err := f.b.Snapshot(context.Background(), SnapshotInput{Brain: brain, Index: f.index}); !errors.Is(err, ErrName) {
		t.Errorf("top-level lock directory: got %v, want ErrName", err)
	}
}

func TestBuilderConfig(t *testing.T) {
	keys := testKeys(t, testIdentity)
	st := newDirStore(t)
	brain := t.TempDir()
	tests := []struct {
		name string
		b    *Builder
		in   SnapshotInput
	}{
		{"small pack cap", &Builder{Keys: keys, Sink: st, SpoolDir: t.TempDir(), MaxPackSize: 1 << 20}, SnapshotInput{Brain: brain, Index: NewIndex()}},
		{"no index", &Builder{Keys: keys, Sink: st, SpoolDir: t.TempDir(), MaxPackSize: 4 << 20}, SnapshotInput{Brain: brain}},
		{"no sink", &Builder{Keys: keys, SpoolDir: t.TempDir(), MaxPackSize: 4 << 20}, SnapshotInput{Brain: brain, Index: NewIndex()}},
		{"bad parent", &Builder{Keys: keys, Sink: st, SpoolDir: t.TempDir(), MaxPackSize: 4 << 20}, SnapshotInput{Brain: brain, Index: NewIndex(), Parent: "a/b", ParentFormat: ParentV2}},
		{"parent without format", &Builder{Keys: keys, Sink: st, SpoolDir: t.TempDir(), MaxPackSize: 4 << 20}, SnapshotInput{Brain: brain, Index: NewIndex(), Parent: "abc"}},
		{"missing brain", &Builder{Keys: keys, Sink: st, SpoolDir: t.TempDir(), MaxPackSize: 4 << 20}, SnapshotInput{Brain: filepath.Join(brain, "nope"), Index: NewIndex()}},
	}
	for _, tt := range tests {
		if _, err := tt.b.Snapshot(context.Background(), tt.in); err == nil {
			t.Errorf("%s: snapshot succeeded", tt.name)
		}
	}
}

// TestFirstV3AfterV2 records a v2 parent blob in the first v3 commit.
func TestFirstV3AfterV2(t *testing.T) {
	brain := richBrain(t)
	f := newFx(t, 4<<20)
	res := f.snap(brain, func(in *SnapshotInput) {
		in.Parent, in.ParentFormat = "v2BlobIdOfTheLastTarSnapshot_xxxxxxxxxxxxx", ParentV2
	})
	h, err := ReadCommit(context.Background(), f.store, f.keys, f.head)
	if err != nil {
		t.Fatal(err)
	}
	if h.Commit.Parent != res.Commit.Parent || h.Commit.ParentFormat != ParentV2 || h.CommitID != res.CommitID {
		t.Errorf("read back parent %q (%s), commit id %s; want %q v2, %s", h.Commit.Parent, h.Commit.ParentFormat, h.CommitID.Short(), res.Commit.Parent, res.CommitID.Short())
	}
}

func TestIndexPersistence(t *testing.T) {
	brain := richBrain(t)
	f := newFx(t, MinPackSize)
	f.snap(brain, nil)
	editBrain(t, brain)
	res := f.snap(brain, nil)

	var buf bytes.Buffer
	if _, err := f.index.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	loaded, err := ReadIndex(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	rebuilt, err := f.open().Index(context.Background(), res.Head.EndEpoch)
	if err != nil {
		t.Fatal(err)
	}
	for name, ix := range map[string]*Index{"loaded": loaded, "rebuilt": rebuilt} {
		if ix.Head() != f.head || ix.Len() != f.index.Len() || !slices.Equal(ix.Packs(), f.index.Packs()) {
			t.Errorf("%s index: head %s, %d objects, packs %v; want %s, %d, %v", name, ix.Head(), ix.Len(), ix.Packs(), f.head, f.index.Len(), f.index.Packs())
		}
		for _, sl := range f.index.objects {
			h := sl.handle()
			b1, o1, n1, _ := f.index.Lookup(h)
			b2, o2, n2, ok := ix.Lookup(h)
			if !ok || b1 != b2 || o1 != o2 || n1 != n2 {
				t.Fatalf("%s index: %s at %s+%d (%v), want %s+%d", name, h, b2, o2, ok, b1, o1)
			}
		}
	}
	// A snapshot from the rebuilt index and the reader's trees (a restart).
	r := f.open()
	f.index = rebuilt
	f.last.Trees = nil
	next := f.snap(brain, func(in *SnapshotInput) { in.Trees = r })
	if next.Stats.ChunksNew != 0 || next.Stats.TreesNew != 0 {
		t.Errorf("after a restart: %d new chunks, %d new trees", next.Stats.ChunksNew, next.Stats.TreesNew)
	}

	b := buf.Bytes()
	for i, bad := range [][]byte{nil, b[:len(b)-1], append(slices.Clone(b[:40]), b[41:]...), func() []byte { c := slices.Clone(b); c[50] ^= 1; return c }()} {
		if _, err := ReadIndex(bytes.NewReader(bad)); !errors.Is(err, ErrIndexFile) {
			t.Errorf("damaged index %d: got %v, want ErrIndexFile", i, err)
		}
	}
}

func TestAgentKeyRedacted(t *testing.T) {
	k := DeriveAgentKey(testMaster, testIdentity)
	raw := k.Bytes()
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%q", "%d", "%08x"} {
		got := fmt.Sprintf(verb, k)
		if !bytes.Contains([]byte(got), []byte("[REDACTED]")) || bytes.Contains([]byte(got), []byte(fmt.Sprintf("%x", raw[:4]))) {
			t.Errorf("Sprintf(%q) = %q", verb, got)
		}
	}
	if got := fmt.Sprint(&k); got != "[REDACTED]" {
		t.Errorf("pointer prints %q", got)
	}
	if k.ID() != vecKeyID || NewAgentKey(raw).ID() != vecKeyID {
		t.Errorf("key id %s", k.ID())
	}
	if DeriveAgentKey(testMaster, "other.eth").ID() == k.ID() {
		t.Error("two agents share a key id")
	}
}

// TestSpooledPacks: packs above 16 MiB are spooled to disk, not held in
// memory; the result is the same format.
func TestSpooledPacks(t *testing.T) {
	brain := richBrain(t)
	f := newFx(t, 32<<20)
	res := f.snap(brain, nil)
	if res.Stats.Packs != 1 {
		t.Errorf("%d packs for a 6 MiB brain under a 32 MiB cap", res.Stats.Packs)
	}
	dir, _ := f.restore()
	mustEqualTree(t, brain, dir)
	if left, _ := os.ReadDir(f.b.SpoolDir); len(left) != 0 {
		t.Errorf("%d spool files left", len(left))
	}
}

// A pack's objects live in its spool file, which becomes the pack's: Open
// reads header, index and objects (any number of times, for the upload's
// retries and the read-back) and parse back; only a head pack is hashed;
// Discard and Abort leave nothing in the spool directory.
func TestPackSpool(t *testing.T) {
	keys := testKeys(t, testIdentity)
	dir := t.TempDir()
	pw, err := NewPackWriter(keys, dir, MinPackSize)
	if err != nil {
		t.Fatal(err)
	}
	var objs [][]byte
	for i := range 40 { // small objects, through the spool's write buffer, and a large one
		n := 100 + i
		if i == 39 {
			n = MaxChunk
		}
		id, obj, err := keys.Seal(TypeChunk, randomBytes(uint64(i), n))
		if err != nil {
			t.Fatal(err)
		}
		if err := pw.Add(TypeChunk, id, obj); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, obj)
	}
	p, err := pw.Finish(nil)
	if err != nil {
		t.Fatal(err)
	}
	var first []byte
	for range 2 {
		rc, err := p.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		if err != nil || rc.Close() != nil {
			t.Fatalf("read pack: %v", err)
		}
		if int64(len(b)) != p.Size || p.SHA256 != [32]byte{} {
			t.Fatalf("pack reads %d bytes (want %d); digest %x (a full pack has none)", len(b), p.Size, p.SHA256)
		}
		if first != nil && !bytes.Equal(b, first) {
			t.Fatal("a second Open reads other bytes")
		}
		first = b
	}
	h, err := DecodeHeader(first)
	if err != nil {
		t.Fatal(err)
	}
	_, ix, err := keys.OpenIndex(first[:HeaderSize], first[HeaderSize:HeaderSize+h.IndexLength])
	if err != nil {
		t.Fatal(err)
	}
	data := first[HeaderSize+h.IndexLength:]
	if len(ix.Entries) != len(objs) {
		t.Fatalf("index lists %d objects, want %d", len(ix.Entries), len(objs))
	}
	for i, e := range ix.Entries {
		if !bytes.Equal(data[e.Offset:e.Offset+e.Length], objs[i]) {
			t.Fatalf("object %d differs", i)
		}
	}
	p.Discard()
	if _, err := p.Open(); err == nil {
		t.Error("a discarded pack opens")
	}
	// A head pack (it carries a commit) is hashed: the daemon records its
	// digest.
	pw, err = NewPackWriter(keys, dir, MinPackSize)
	if err != nil {
		t.Fatal(err)
	}
	if err := pw.Add(TypeChunk, ID{2}, objs[39]); err != nil {
		t.Fatal(err)
	}
	hp, err := pw.Finish([]byte(`{"a commit":true}`))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := hp.Open()
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	if err != nil || rc.Close() != nil {
		t.Fatalf("read head pack: %v", err)
	}
	if !hp.Head || int64(len(b)) != hp.Size || sha256.Sum256(b) != hp.SHA256 {
		t.Fatalf("head pack of %d bytes (want %d) hashes to %x, its digest is %x", len(b), hp.Size, sha256.Sum256(b), hp.SHA256)
	}
	hp.Discard()
	// An aborted writer leaves nothing either.
	pw, err = NewPackWriter(keys, dir, MinPackSize)
	if err != nil {
		t.Fatal(err)
	}
	if err := pw.Add(TypeChunk, ID{1}, objs[0]); err != nil {
		t.Fatal(err)
	}
	pw.Abort()
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("spool directory holds %d files after Discard and Abort", len(left))
	}
}

// The bundle hash orders full paths in UTF-16 (docs/design.md §2), the trees
// order names bytewise: a directory "a" comes after the file "a.txt" in the
// bundle ("a/" > "a."), a BMP private-use name after a non-BMP one. The
// builder and Summarize walk in the bundle's order without sorting paths;
// the snapshot must hash exactly as the hasher did.
func TestBundleOrder(t *testing.T) {
	brain := t.TempDir()
	writeFiles(t, brain, map[string]string{
		"a/x":       "in a",
		"a.txt":     "beside a",
		"a-b":       "dash",
		"a b/c/d":   "space",
		"a!":        "bang",
		"a/b/c":     "deep",
		"a/b.md":    "file beside dir b",
		"\uE000/x":  "private use dir",
		"\uE000.md": "private use file",
		"𝔘":         "non-BMP file",
		"𝔘x/y":      "non-BMP dir",
		"z/\uFFFD":  "",
	})
	f := newFx(t, 10<<20)
	res := f.snap(brain, nil) // fails with ErrChanged when the orders disagree
	if leafOrder(res.Trees[res.Commit.Root]) == nil {
		t.Fatal("the root's bundle order is its name order: the test proves nothing")
	}
	hr, err := hash.Dir(context.Background(), brain, hash.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Summarize(context.Background(), res.Trees, res.Commit.Root)
	if err != nil {
		t.Fatal(err)
	}
	if s.BundleHash != hr.Digest || res.Commit.BundleHash != hr.Digest || s.Files != int64(len(hr.Files)) {
		t.Fatalf("summary %s (%d files), commit %s; the hasher says %s (%d files)", s.BundleHash, s.Files, res.Commit.BundleHash, hr.Digest, len(hr.Files))
	}
	dir, _ := f.restore()
	mustEqualTree(t, brain, dir)
}

// A Builder's free buffers are reused by its next snapshot but go to the
// GC while it is idle: a daemon of many agents keeps no set for each.
func TestIdleBuffersCollected(t *testing.T) {
	brain := t.TempDir()
	writeFiles(t, brain, map[string]string{"big.bin": string(randomBytes(3, 3<<20)), "small.md": "small"})
	f := newFx(t, 4<<20)
	f.snap(brain, nil)
	p := f.b.bufs.big
	made := 0
	// The pool is the process's: later tests get its own New back.
	defer func(fn func() any) { p.idle.New = fn }(p.idle.New)
	p.idle.New = func() any {
		made++
		b := make([]byte, p.size)
		return &b
	}
	b := p.idle.Get().(*[]byte)
	// (The race detector makes sync.Pool drop some buffers at random.)
	if made != 0 && !raceEnabled {
		t.Fatal("no free buffer kept after the snapshot")
	}
	p.idle.Put(b)
	made = 0
	runtime.GC()
	runtime.GC()
	p.idle.Get()
	if made != 1 {
		t.Fatal("the free buffers outlived two collections")
	}
}

// TestHeadWaitHoldsNoBuffers: a head pack may wait long for its quilt
// batch, beside many agents' heads. While it waits (in the sink) the
// snapshot holds no pooled buffer: they went idle, to the GC (1,000
// agents starting held ~290 MB of them through that wait).
func TestHeadWaitHoldsNoBuffers(t *testing.T) {
	brain := t.TempDir()
	writeFiles(t, brain, map[string]string{
		"system.md":        "You are a test agent.\n",
		"skills/a.md":      strings.Repeat("a", 100<<10), // big and small pools both used
		"bundle.lock.json": "{}",
	})
	f := newFx(t, 4<<20)
	heads := 0
	f.store.fail = func(p *Pack) error {
		if !p.Head {
			return nil
		}
		heads++
		x := f.b.bufs
		for name, pool := range map[string]*bufPool{"small": x.small, "big": x.big, "sealed": x.sealed, "sealedSm": x.sealedSm} {
			if n := len(pool.ch); n > 0 {
				t.Errorf("the %s pool holds %d buffers while the head is stored", name, n)
			}
		}
		return nil
	}
	f.snap(brain, nil)
	if heads != 1 {
		t.Fatalf("%d head packs stored", heads)
	}
}
