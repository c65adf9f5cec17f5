package snapshot_test

import (
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hermesd/hermesd/internal/diskspace"
	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/smallfstest"
	"github.com/hermesd/hermesd/internal/snapshot"
)

// TestHardLinksFitSmallFilesystem: a v3 brain holding a 6 MiB file under
// three names, 18 MiB by its commit's totals, restores onto a 16 MiB
// filesystem: a hard link takes no space, and the free-space check counts
// what the restore writes.
func TestHardLinksFitSmallFilesystem(t *testing.T) {
	smallfstest.Run(t, 16<<20, func(t *testing.T, small string) {
		f := newFixture(t)
		db := filepath.Join(f.brain, "memory.db")
		big := make([]byte, 6<<20)
		rand.Read(big)
		if err := os.WriteFile(db, big, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"copy.db", "old.db"} {
			if err := os.Link(db, filepath.Join(f.brain, n)); err != nil {
				t.Fatal(err)
			}
		}
		p := f.pipeline("alpha.eth")
		p.Format, p.CacheDir = snapshot.FormatV3, t.TempDir()
		want := f.hash()
		res, err := p.Take(t.Context(), snapshot.Input{Want: want})
		if err != nil {
			t.Fatal(err)
		}
		r, err := p.Restore(t.Context(), res.BlobID, filepath.Join(small, "brain"))
		if !fsys.Inodes {
			// The portable walker stores every name as a file of its
			// own: 18 MiB that do not fit.
			if !errors.Is(err, diskspace.ErrNoSpace) {
				t.Fatalf("three copies of 6 MiB onto a 16 MiB filesystem: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("restore of 18 MiB in names, 6 MiB in bytes, onto 16 MiB: %v", err)
		}
		if !r.Verified || r.BundleHash != want || r.Links != 2 {
			t.Errorf("restored %+v", r)
		}
	})
}
