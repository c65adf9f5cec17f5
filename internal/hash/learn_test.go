package hash

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/fsys"
)

// learnAll feeds l every regular file of dir, read through fsys as the
// snapshot reads them, with start an hour back (nothing racy) unless racy.
func learnAll(t *testing.T, l *Learner, dir string, keys []string, racy bool) {
	t.Helper()
	root, err := fsys.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	start := time.Now().Add(time.Hour)
	if racy {
		start = time.Now()
	}
	for _, k := range keys {
		f, err := root.Open(k)
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, k))
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		l.Add(k, st, start, int64(len(b)), sha256.Sum256(b))
	}
}

func TestLearnerAdopt(t *testing.T) {
	dir := t.TempDir()
	keys := []string{"b.md", "a/x.md", "a.md", "z/y/w.md"}
	for i, k := range keys {
		p := filepath.Join(dir, filepath.FromSlash(k))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte{byte('a' + i)}, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := Dir(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		keys   []string
		digest Digest
		racy   bool
		ok     bool
		reread int // files the next pass reads
	}{
		{"every file", keys, want.Digest, false, true, 0},
		{"every file, racy", keys, want.Digest, true, true, len(keys)},
		{"a file missing", keys[1:], want.Digest, false, false, 0},
		{"a file twice", append([]string{keys[0]}, keys...), want.Digest, false, false, 0},
		{"another digest", keys, Null, false, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCache(dir, Options{})
			if _, err := c.Rescan(context.Background()); err != nil { // something to replace
				t.Fatal(err)
			}
			l := c.Learner(nil)
			learnAll(t, l, dir, tc.keys, tc.racy)
			res, err := l.Adopt(tc.digest)
			if !tc.ok {
				if err == nil {
					t.Fatal("adopted")
				}
				if c.Validated() || c.Digest() != Null || len(c.Files()) != 0 {
					t.Fatalf("a refused adoption left the cache validated %v, digest %s, %d files", c.Validated(), c.Digest(), len(c.Files()))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Digest != want.Digest || res.Count != len(keys) || res.Read != len(keys) || !c.Validated() {
				t.Fatalf("adopted %+v", res)
			}
			next, err := c.Rescan(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if next.Digest != want.Digest || next.Read != tc.reread {
				t.Errorf("next pass read %d files (want %d), digest %s", next.Read, tc.reread, next.Digest)
			}
		})
	}
}

// Paths lists, without reading them, exactly the files Dir hashes, in
// the same order: not the lock, the receipts, symlinks or directories.
func TestPaths(t *testing.T) {
	dir := t.TempDir()
	for _, k := range []string{"b.md", "a/x.md", "a.md", "z/y/w.md", "bundle.lock.json", "receipts.ndjson", "empty/"} {
		p := filepath.Join(dir, filepath.FromSlash(k))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if k == "empty/" {
			continue
		}
		if err := os.WriteFile(p, []byte(k), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("b.md", filepath.Join(dir, "link.md")); err != nil {
		t.Fatal(err)
	}
	want, err := Dir(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Paths(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want.Files) || len(got) != 4 {
		t.Fatalf("Paths %q, Dir hashed %d files", got, len(want.Files))
	}
	for i, f := range want.Files {
		if got[i] != f.Path {
			t.Fatalf("Paths %q, Dir %v", got, want.Files)
		}
	}
	if none, err := Paths(context.Background(), filepath.Join(dir, "missing")); err != nil || none != nil {
		t.Fatalf("missing root: %q, %v", none, err)
	}
}
