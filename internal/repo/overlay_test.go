package repo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/hash"
)

// TestSnapshotOverlay: a snapshot taken through an overlay (the consistent
// copy of a live SQLite database in place of the file a writer keeps
// changing, its side files hidden) stores exactly the view the hasher saw
// through the same overlay, not the live files.
func TestSnapshotOverlay(t *testing.T) {
	brain := t.TempDir()
	writeFiles(t, brain, map[string]string{
		"system.md":        "agent",
		"memory.db":        "live pages, mid-transaction",
		"memory.db-wal":    "wal frames",
		"memory.db-shm":    "shared memory",
		"skills/a.md":      "a",
		"bundle.lock.json": "{}",
	})
	frozen := filepath.Join(t.TempDir(), "memory.db")
	copyContent := string(randomBytes(3, 300<<10)) // several chunks
	if err := os.WriteFile(frozen, []byte(copyContent), 0o600); err != nil {
		t.Fatal(err)
	}
	ov, err := fsys.NewOverlay(map[string]string{"memory.db": frozen}, []string{"memory.db-wal", "memory.db-shm"})
	if err != nil {
		t.Fatal(err)
	}
	hr, err := hash.Dir(context.Background(), brain, hash.Options{Overlay: ov})
	if err != nil {
		t.Fatal(err)
	}
	f := newFx(t, MinPackSize)
	res, err := f.b.Snapshot(context.Background(), SnapshotInput{Brain: brain, Index: f.index, Known: hash.Files(hr.Files), Want: hr.Digest, Overlay: ov})
	if err != nil {
		t.Fatalf("snapshot through the overlay: %v", err)
	}
	f.last, f.head = res, res.Head.BlobID
	if res.Commit.BundleHash != hr.Digest || res.Commit.Files != 3 {
		t.Fatalf("commit %s with %d files, the overlay hashes to %s (3 files)", res.Commit.BundleHash, res.Commit.Files, hr.Digest)
	}
	dir, _ := f.restore()
	got, err := os.ReadFile(filepath.Join(dir, "memory.db"))
	if err != nil || string(got) != copyContent {
		t.Fatalf("restored memory.db is not the frozen copy (%d bytes, %v)", len(got), err)
	}
	for _, side := range []string{"memory.db-wal", "memory.db-shm"} {
		if _, err := os.Lstat(filepath.Join(dir, side)); err == nil {
			t.Errorf("%s, hidden by the overlay, was stored", side)
		}
	}
	// The same brain without the overlay is another state: asking for the
	// overlay's hash then fails as a change, never stores a mix.
	_, err = f.b.Snapshot(context.Background(), SnapshotInput{Brain: brain, Index: f.index, Want: hr.Digest})
	if !errors.Is(err, ErrChanged) {
		t.Fatalf("a snapshot of the live files asked for the overlay's hash: %v, want ErrChanged", err)
	}
}
