package hash

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/fsys"
)

func overlay(t *testing.T, subst map[string]string, hide ...string) *fsys.Overlay {
	t.Helper()
	ov, err := fsys.NewOverlay(subst, hide)
	if err != nil {
		t.Fatal(err)
	}
	return ov
}

// TestDirOverlay: Dir through an overlay hashes exactly the tree the
// overlay shows, as if it had been written out.
func TestDirOverlay(t *testing.T) {
	ctx := t.Context()
	live, subs, want := t.TempDir(), t.TempDir(), t.TempDir()
	for _, d := range []string{live, want} {
		writeFile(t, d, "system.md", systemMD)
		writeFile(t, d, "skills/reentrancy.md", reentrancy)
	}
	writeFile(t, live, "memory.db", "live, changing")
	writeFile(t, live, "memory.db-shm", "index")
	writeFile(t, subs, "db", "frozen copy")
	writeFile(t, subs, "wal", "frozen wal")
	writeFile(t, want, "memory.db", "frozen copy")
	writeFile(t, want, "memory.db-wal", "frozen wal")
	ov := overlay(t, map[string]string{"memory.db": filepath.Join(subs, "db"), "memory.db-wal": filepath.Join(subs, "wal")},
		"memory.db-shm", "memory.db-journal")

	got, err := Dir(ctx, live, Options{Overlay: ov})
	if err != nil {
		t.Fatal(err)
	}
	if w := naiveDir(t, want); got.Digest != w || got.Count != 4 {
		t.Errorf("Dir with overlay = %s (%d files), want %s (4 files)", got.Digest, got.Count, w)
	}
	if plain, _ := Dir(ctx, live, Options{}); plain.Digest != naiveDir(t, live) || plain.Digest == got.Digest {
		t.Errorf("Dir without overlay = %s, want the live tree's %s", plain.Digest, naiveDir(t, live))
	}
}

// TestCacheOverlay: the cache hashes through a pass's overlay, never
// trusts a substitute's digest later, and comes back to the tree's own
// files once the overlay is gone, even when no change is reported.
func TestCacheOverlay(t *testing.T) {
	ctx := t.Context()
	// Nothing is racy by age: only the overlay can cause a re-read.
	defer func(old func() time.Time) { now = old }(now)
	now = func() time.Time { return time.Now().Add(time.Hour) }

	live, subs := t.TempDir(), t.TempDir()
	writeFile(t, live, "system.md", systemMD)
	writeFile(t, live, "memory.db", "live-1")
	writeFile(t, live, "memory.db-shm", "index")
	c := NewCache(live, Options{})
	first, err := c.Rescan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	liveDigest := naiveDir(t, live)
	if first.Digest != liveDigest {
		t.Fatalf("Rescan = %s, want %s", first.Digest, liveDigest)
	}

	writeFile(t, subs, "a", "copy-1")
	ova := overlay(t, map[string]string{"memory.db": filepath.Join(subs, "a")}, "memory.db-shm")
	viewA := func() Digest {
		d := t.TempDir()
		writeFile(t, d, "system.md", systemMD)
		writeFile(t, d, "memory.db", "copy-1")
		return naiveDir(t, d)
	}()
	// Nothing reported changed: the overlay's paths are looked at anyway.
	res, err := c.UpdateOverlay(ctx, []string{}, ova)
	if err != nil || res.Digest != viewA || res.Count != 2 || res.Read != 1 {
		t.Fatalf("UpdateOverlay = %+v, %v; want %s, 2 files, 1 read", res, err, viewA)
	}
	// Stat data alone cannot tell a substitute from a later file that
	// reuses its inode, or (once saved, which keeps no Overlay bit) from the
	// tree's own file: its entry is always one to re-read.
	if e := c.entries["memory.db"]; e == nil || !e.racy || !e.st.Overlay {
		t.Errorf("the substitute's entry is %+v, want it marked racy", e)
	}

	// A later substitute of the same size at the same path is read, not
	// taken for the earlier one.
	writeFile(t, subs, "b", "copy-2")
	ovb := overlay(t, map[string]string{"memory.db": filepath.Join(subs, "b")}, "memory.db-shm")
	res, err = c.UpdateOverlay(ctx, []string{}, ovb)
	if err != nil || res.Read != 1 || res.Digest == viewA {
		t.Fatalf("second overlay: %+v, %v; want the new copy read", res, err)
	}

	// Without an overlay, and with no change reported, the cache is back
	// on the live files: the substituted one re-read, the hidden one back.
	res, err = c.Update(ctx, []string{})
	if err != nil || res.Digest != liveDigest || res.Count != 3 {
		t.Fatalf("after the overlay: %+v, %v; want the live tree's %s with 3 files", res, err, liveDigest)
	}
	// ... and trusted again from then on.
	if res, err = c.Update(ctx, []string{}); err != nil || res.Read != 0 || res.Digest != liveDigest {
		t.Fatalf("next pass: %+v, %v; want nothing read", res, err)
	}

	// RescanOverlay, and a saved cache: a substitute's entry is saved as
	// one to re-read.
	if res, err = c.RescanOverlay(ctx, ova); err != nil || res.Digest != viewA {
		t.Fatalf("RescanOverlay = %+v, %v", res, err)
	}
	var buf strings.Builder
	if err := c.Save(&buf); err != nil {
		t.Fatal(err)
	}
	c2 := NewCache(live, Options{})
	if err := c2.Load(strings.NewReader(buf.String())); err != nil {
		t.Fatal(err)
	}
	if res, err = c2.Update(ctx, []string{}); err != nil || res.Digest != liveDigest {
		t.Fatalf("loaded cache: %+v, %v; want %s", res, err, liveDigest)
	}

	// A substitute that has gone fails the pass: the file must not silently
	// drop out of the hash.
	if err := os.Remove(filepath.Join(subs, "a")); err != nil {
		t.Fatal(err)
	}
	before := c.Digest()
	if _, err := c.UpdateOverlay(ctx, []string{}, ova); err == nil {
		t.Fatal("UpdateOverlay with a deleted substitute succeeded")
	}
	if c.Digest() != before {
		t.Error("a failed pass changed the cache")
	}
}

func TestNewCacheRefusesOverlay(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewCache accepted an Options.Overlay")
		}
	}()
	NewCache(t.TempDir(), Options{Overlay: overlay(t, nil, "x")})
}
