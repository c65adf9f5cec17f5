package repo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/hash"
)

// singleReadBrain has files of one chunk and of several, in nested
// directories, and a lock and receipts beside them.
func singleReadBrain(t *testing.T) string {
	brain := t.TempDir()
	writeFiles(t, brain, map[string]string{
		"system.md":            "You are a test agent.\n",
		"skills/a.md":          "skill a\n",
		"skills/deep/b.md":     "skill b\n",
		"patterns/":            "",
		"empty":                "",
		"bundle.lock.json":     "{}\n",
		"receipts.ndjson":      "{\"r\":1}\n",
		"patterns/p.md":        "pattern\n",
		"skills/deep/c/d/e.md": "deep\n",
	})
	if err := os.WriteFile(filepath.Join(brain, "memory.db"), randomBytes(7, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	return brain
}

// A snapshot without Want is the hash: each file of the tree is read once
// and in Result.Reads once (the lock and receipts, kept beside the tree,
// are not);
// a hash cache that adopts what it learned equals one that hashed the
// brain itself, and its next pass reads nothing.
func TestSingleReadLearns(t *testing.T) {
	brain := singleReadBrain(t)
	f := newFx(t, 10<<20)
	// A second name of a file: its entry keeps no mode or time of its
	// own (resolveLinks), its read keeps the stat read.
	if err := os.Link(filepath.Join(brain, "skills/a.md"), filepath.Join(brain, "skills/deep/a-link.md")); err != nil {
		t.Fatal(err)
	}
	f.b.now = func() time.Time { return time.Now().Add(time.Hour) } // nothing racy
	cache := hash.NewCache(brain, hash.Options{})
	learner := cache.Learner(nil)
	res := f.snap(brain, func(in *SnapshotInput) { in.Want, in.Known = hash.Digest{}, nil })
	if n := res.Reads.Len(); n != 8 {
		t.Errorf("%d reads, want 8", n)
	}
	var paths []string
	sums := map[string][32]byte{}
	for r := range res.Reads.All() {
		paths = append(paths, r.Path)
		sums[r.Path] = r.SHA256
		learner.Add(r.Path, r.Stat, r.Start, r.Size, r.SHA256)
	}
	want, err := hash.Dir(context.Background(), brain, hash.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit.BundleHash != want.Digest {
		t.Fatalf("bundle %s, want %s", res.Commit.BundleHash, want.Digest)
	}
	var wantPaths []string
	for _, fl := range want.Files {
		wantPaths = append(wantPaths, fl.Path)
		if sums[fl.Path] != fl.SHA256 {
			t.Errorf("%s read with SHA-256 %x, want %x", fl.Path, sums[fl.Path], fl.SHA256)
		}
	}
	slices.Sort(wantPaths)
	slices.Sort(paths)
	if !slices.Equal(paths, wantPaths) {
		t.Fatalf("reads %q, want %q", paths, wantPaths)
	}
	// Every tree file, then the lock and the receipts: each read once.
	if res.Stats.FilesRead != len(wantPaths)+2 {
		t.Errorf("read %d files, want %d", res.Stats.FilesRead, len(wantPaths)+2)
	}
	ar, err := learner.Adopt(res.Commit.BundleHash)
	if err != nil {
		t.Fatal(err)
	}
	if ar.Digest != want.Digest || ar.Count != len(want.Files) || !cache.Validated() || !slices.Equal(cache.Files(), want.Files) {
		t.Fatalf("adopted %+v, cache files %v", ar, cache.Files())
	}
	again, err := cache.Rescan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest != want.Digest || again.Read != 0 {
		t.Errorf("the pass after adopting read %d files (digest %s)", again.Read, again.Digest)
	}
	mustEqualTreeRestored(t, f, brain)
}

// mustEqualTreeRestored restores f's head and compares it with brain.
func mustEqualTreeRestored(t *testing.T, f *fx, brain string) {
	t.Helper()
	dir, _ := f.restore()
	mustEqualTree(t, brain, dir)
}

// A file written within the timestamp granularity of its read is read
// again before the commit; changed by then, the snapshot is ErrChanged and
// references nothing.
func TestSingleReadRacyFileChanged(t *testing.T) {
	brain := singleReadBrain(t) // just written: every file is racy
	f := newFx(t, 10<<20)
	var once sync.Once
	f.b.afterRead = func(p string) {
		if p == "skills/a.md" {
			once.Do(func() { os.WriteFile(filepath.Join(brain, "skills/a.md"), []byte("skill A\n"), 0o644) })
		}
	}
	_, err := f.trySnap(brain, func(in *SnapshotInput) { in.Want, in.Known = hash.Digest{}, nil })
	f.b.afterRead = nil
	if !errors.Is(err, ErrChanged) {
		t.Fatalf("snapshot = %v, want ErrChanged", err)
	}
	if len(f.index.Packs()) != 0 {
		t.Error("the failed snapshot left packs in the index")
	}
	// Racy files that held still pass: the same brain, untouched now.
	res := f.snap(brain, func(in *SnapshotInput) { in.Want, in.Known = hash.Digest{}, nil })
	want, err := hash.Dir(context.Background(), brain, hash.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit.BundleHash != want.Digest {
		t.Errorf("commit hashes to %s, the brain to %s", res.Commit.BundleHash, want.Digest)
	}
	mustEqualTreeRestored(t, f, brain)
}

// Stage returns with the trees' bundle hash before it reads the lock and
// receipts: what the caller writes into them before Commit is what the
// commit keeps, with the version Commit is given. With a Want the trees do
// not match, Stage fails.
func TestStageThenCommit(t *testing.T) {
	brain := singleReadBrain(t)
	want, err := hash.Dir(context.Background(), brain, hash.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := newFx(t, 10<<20)
	s, err := f.b.Stage(context.Background(), SnapshotInput{Brain: brain, Index: f.index})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Abort()
	if s.Bundle() != want.Digest {
		t.Fatalf("staged bundle %s, want %s", s.Bundle(), want.Digest)
	}
	if len(f.index.Packs()) != 0 {
		t.Fatal("the index changed before the commit")
	}
	lock := []byte(`{"sealed":"` + s.Bundle().String() + `"}` + "\n")
	if err := os.WriteFile(filepath.Join(brain, LockFile), lock, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := s.Commit(context.Background(), 7)
	if err != nil {
		t.Fatal(err)
	}
	f.last, f.head = res, res.Head.BlobID
	if res.Commit.BundleHash != want.Digest || res.Commit.LockVersion != 7 || res.Commit.Lock == nil || res.Commit.Lock.Size != int64(len(lock)) {
		t.Fatalf("commit bundle %s, lock %+v, version %d", res.Commit.BundleHash, res.Commit.Lock, res.Commit.LockVersion)
	}
	if f.index.Head() != res.Head.BlobID {
		t.Fatalf("index head %q after the commit of %q", f.index.Head(), res.Head.BlobID)
	}
	if _, err := s.Commit(context.Background(), 7); err == nil {
		t.Fatal("a second Commit of one staged snapshot succeeded")
	}
	dir, _ := f.restore()
	if b, err := os.ReadFile(filepath.Join(dir, LockFile)); err != nil || string(b) != string(lock) {
		t.Fatalf("restored lock %q, %v", b, err)
	}

	if _, err := f.b.Stage(context.Background(), SnapshotInput{Brain: brain, Index: f.index, Want: hash.Digest{1}}); !errors.Is(err, ErrChanged) {
		t.Fatalf("stage with a wrong Want = %v", err)
	}
}

// An aborted staged snapshot references nothing: the index is as it was
// and the spool directory empty; the next snapshot goes on from the last
// commit.
func TestStageAbort(t *testing.T) {
	brain := singleReadBrain(t)
	f := newFx(t, MinPackSize) // several packs: some uploaded before the abort
	f.snap(brain, nil)
	head, packs := f.index.Head(), len(f.index.Packs())
	if err := os.WriteFile(filepath.Join(brain, "memory.db"), randomBytes(8, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	hr, err := hash.Dir(context.Background(), brain, hash.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := SnapshotInput{Brain: brain, Index: f.index, Known: hash.Files(hr.Files), Want: hr.Digest,
		Prev: f.last.Commit, Trees: f.last.Trees, Parent: f.head, ParentFormat: ParentV3}
	stored := len(f.store.stored)
	s, err := f.b.Stage(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if s.Bundle() != hr.Digest || len(f.store.stored) == stored {
		t.Fatalf("staged bundle %s (want %s) after %d uploads", s.Bundle(), hr.Digest, len(f.store.stored)-stored)
	}
	s.Abort()
	s.Abort()
	if _, err := s.Commit(context.Background(), 1); err == nil {
		t.Fatal("Commit after Abort succeeded")
	}
	if f.index.Head() != head || len(f.index.Packs()) != packs {
		t.Fatalf("index head %q with %d packs after the abort, was %q with %d", f.index.Head(), len(f.index.Packs()), head, packs)
	}
	if ents, err := os.ReadDir(f.b.SpoolDir); err != nil || len(ents) != 0 {
		t.Fatalf("spool holds %d files after the abort (%v)", len(ents), err)
	}
	f.snap(brain, nil)
	mustEqualTreeRestored(t, f, brain)
}
