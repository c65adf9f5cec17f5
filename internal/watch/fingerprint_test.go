package watch

import (
	"errors"
	"hash/maphash"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The digest moves with content, names and inodes, and not with what the
// consumer ignores: ignored files, directory times.
func TestFingerprint(t *testing.T) {
	old := time.Now().Add(-time.Hour)
	tests := []struct {
		name  string
		f     func(t *testing.T, root string)
		moved bool
	}{
		{"nothing", func(*testing.T, string) {}, false},
		{"same size, mtime kept", func(t *testing.T, root string) {
			// Only the change time tells (as after rsync -t); rewrite
			// until the coarse kernel clock has ticked past the setup's.
			p := filepath.Join(root, "skills", "a.md")
			c0 := ctimeOf(t, p)
			if c0 == 0 {
				t.Skip("no change time on this platform")
			}
			deadline := time.Now().Add(30 * time.Second)
			for ctimeOf(t, p) == c0 {
				if time.Now().After(deadline) {
					t.Fatal("change time never moved")
				}
				write(t, p, "A")
				chtimes(t, p, old)
			}
		}, true},
		{"new file", func(t *testing.T, root string) { write(t, filepath.Join(root, "b.md"), "b") }, true},
		{"new empty directory", func(t *testing.T, root string) { mkdir(t, filepath.Join(root, "empty")) }, true},
		{"rename", func(t *testing.T, root string) {
			rename(t, filepath.Join(root, "skills", "a.md"), filepath.Join(root, "skills", "c.md"))
		}, true},
		{"remove", func(t *testing.T, root string) { remove(t, filepath.Join(root, "skills", "a.md")) }, true},
		{"ignored file", func(t *testing.T, root string) { write(t, filepath.Join(root, "bundle.lock.json"), "{}") }, false},
		{"directory times", func(t *testing.T, root string) {
			chtimes(t, root, time.Now())
			chtimes(t, filepath.Join(root, "skills"), time.Now())
		}, false},
	}
	seed := maphash.MakeSeed()
	ignore := func(rel string) bool { return rel == "bundle.lock.json" }
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			write(t, filepath.Join(root, "skills", "a.md"), "a")
			chtimes(t, filepath.Join(root, "skills", "a.md"), old)
			write(t, filepath.Join(root, "bundle.lock.json"), "{ }")
			before, err := fingerprint(root, ignore, seed, time.Now(), -1)
			if err != nil {
				t.Fatal(err)
			}
			if before.dirs != 2 || before.racy {
				t.Errorf("scan = %+v, want 2 directories, not racy", before)
			}
			tc.f(t, root)
			after, err := fingerprint(root, ignore, seed, time.Now(), -1)
			if err != nil {
				t.Fatal(err)
			}
			if moved := after.sum != before.sum; moved != tc.moved {
				t.Errorf("digest moved = %v, want %v", moved, tc.moved)
			}
		})
	}
}

func TestFingerprintRacyAndMissing(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "a.md"), "a")
	seed := maphash.MakeSeed()
	never := func(string) bool { return false }
	sc, err := fingerprint(root, never, seed, time.Now(), time.Hour)
	if err != nil || !sc.racy {
		t.Errorf("fresh file: racy %v, err %v; want racy", sc.racy, err)
	}
	// ctime cannot be set back, so look from an hour later.
	if sc, err := fingerprint(root, never, seed, time.Now().Add(time.Hour), time.Minute); err != nil || sc.racy {
		t.Errorf("old file: racy %v, err %v; want not racy", sc.racy, err)
	}
	if _, err := fingerprint(filepath.Join(root, "nope"), never, seed, time.Now(), -1); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing root: %v, want not-exist", err)
	}
}

func ctimeOf(t *testing.T, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := statExtra(fi)
	return c
}

func chtimes(t *testing.T, p string, at time.Time) {
	t.Helper()
	if err := os.Chtimes(p, at, at); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func rename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, p string) {
	t.Helper()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
}
