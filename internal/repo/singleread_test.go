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

	"github.com/hermesd/hermesd/internal/fsys"
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

// learned collects what Learn hears.
type learned struct {
	mu    sync.Mutex
	paths []string
	sums  map[string][32]byte
}

func (l *learned) add(path string, _ fsys.Info, _ time.Time, _ int64, sum [32]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.paths = append(l.paths, path)
	if l.sums == nil {
		l.sums = map[string][32]byte{}
	}
	l.sums[path] = sum
}

// A snapshot without Want is the hash: each file of the tree is read once
// and learned once (the lock and receipts, kept beside the tree, are not);
// a hash cache that adopts what it learned equals one that hashed the
// brain itself, and its next pass reads nothing.
func TestSingleReadLearns(t *testing.T) {
	brain := singleReadBrain(t)
	f := newFx(t, 10<<20)
	f.b.now = func() time.Time { return time.Now().Add(time.Hour) } // nothing racy
	cache := hash.NewCache(brain, hash.Options{})
	learner := cache.Learner(nil)
	var got learned
	res := f.snap(brain, func(in *SnapshotInput) {
		in.Want, in.Known = hash.Digest{}, nil
		in.Learn = func(p string, st fsys.Info, start time.Time, size int64, sum [32]byte) {
			got.add(p, st, start, size, sum)
			learner.Add(p, st, start, size, sum)
		}
	})
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
		if got.sums[fl.Path] != fl.SHA256 {
			t.Errorf("%s learned with SHA-256 %x, want %x", fl.Path, got.sums[fl.Path], fl.SHA256)
		}
	}
	slices.Sort(wantPaths)
	slices.Sort(got.paths)
	if !slices.Equal(got.paths, wantPaths) {
		t.Fatalf("learned %q, want %q", got.paths, wantPaths)
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
	_, err := f.trySnap(brain, func(in *SnapshotInput) {
		in.Want, in.Known = hash.Digest{}, nil
		in.Learn = func(p string, _ fsys.Info, _ time.Time, _ int64, _ [32]byte) {
			if p == "skills/a.md" {
				once.Do(func() { os.WriteFile(filepath.Join(brain, "skills/a.md"), []byte("skill A\n"), 0o644) })
			}
		}
	})
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

// Seal runs once the trees are final, with their bundle hash, before the
// lock and receipts are read: what it writes is what the commit keeps,
// with the version it returns. With a Want the trees do not match, Seal is
// never called.
func TestSealAfterTrees(t *testing.T) {
	brain := singleReadBrain(t)
	want, err := hash.Dir(context.Background(), brain, hash.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := newFx(t, 10<<20)
	lock := []byte(`{"sealed":"` + want.Digest.String() + `"}` + "\n")
	var sealed hash.Digest
	res := f.snap(brain, func(in *SnapshotInput) {
		in.LockVersion = 0
		in.Seal = func(_ context.Context, bundle hash.Digest) (int64, error) {
			sealed = bundle
			return 7, os.WriteFile(filepath.Join(brain, LockFile), lock, 0o644)
		}
	})
	if sealed != want.Digest || res.Commit.LockVersion != 7 || res.Commit.Lock == nil || res.Commit.Lock.Size != int64(len(lock)) {
		t.Fatalf("sealed %s, commit lock %+v version %d", sealed, res.Commit.Lock, res.Commit.LockVersion)
	}
	dir, _ := f.restore()
	if b, err := os.ReadFile(filepath.Join(dir, LockFile)); err != nil || string(b) != string(lock) {
		t.Fatalf("restored lock %q, %v", b, err)
	}

	called := false
	_, err = f.trySnap(brain, func(in *SnapshotInput) {
		in.Want = hash.Digest{1}
		in.Seal = func(context.Context, hash.Digest) (int64, error) { called = true; return 1, nil }
	})
	if !errors.Is(err, ErrChanged) || called {
		t.Fatalf("snapshot with a wrong Want = %v, Seal called %v", err, called)
	}
}
