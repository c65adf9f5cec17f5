package repo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hermesd/hermesd/internal/diskspace"
	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/smallfstest"
)

// TestRestoreSmallFilesystem restores onto a real 16 MiB filesystem: a
// 3 MiB brain restores (a fixed 64 MiB margin would refuse it forever),
// one that would leave less than the filesystem's margin is
// refused before anything is written, with the numbers and the rule, and
// a 6 MiB file under three names (18 MiB declared) restores: a hard link
// takes no space, so its bytes count once (where the walker knows inodes;
// the portable one stores three files, which do not fit).
func TestRestoreSmallFilesystem(t *testing.T) {
	smallfstest.Run(t, 16<<20, func(t *testing.T, small string) {
		snap := func(size int, names ...string) *fx {
			brain := t.TempDir()
			writeFiles(t, brain, map[string]string{
				"system.md":        "You are a test agent.\n",
				"memory.db":        string(randomBytes(uint64(size), size)),
				"bundle.lock.json": "{}",
			})
			for _, n := range names {
				if err := os.Link(filepath.Join(brain, "memory.db"), filepath.Join(brain, n)); err != nil {
					t.Fatal(err)
				}
			}
			f := newFx(t, 4<<20)
			f.snap(brain, nil)
			return f
		}
		target := filepath.Join(small, "brain")

		f := snap(3 << 20)
		if _, err := f.open().Restore(context.Background(), target, RestoreOptions{}); err != nil {
			t.Fatalf("a 3 MiB restore onto a 16 MiB filesystem: %v", err)
		}
		src, _ := f.restore()
		diffTrees(t, readTree(t, src), readTree(t, target))
		if err := os.RemoveAll(target); err != nil {
			t.Fatal(err)
		}

		big := snap(15 << 20)
		_, err := big.open().Restore(context.Background(), target, RestoreOptions{})
		if !errors.Is(err, diskspace.ErrNoSpace) || !strings.Contains(err.Error(), "5% of its") {
			t.Fatalf("a 15 MiB restore onto a 16 MiB filesystem: %v", err)
		}
		t.Logf("refused: %v", err)
		if ents, _ := os.ReadDir(small); len(ents) != 0 {
			t.Fatalf("a refused restore left %d entries", len(ents))
		}

		linked := snap(6<<20, "copy.db", "old.db")
		if c := linked.open().Commit(); c.Files != 4 || c.Bytes < 18<<20 {
			t.Fatalf("the commit declares %d files of %d bytes", c.Files, c.Bytes)
		}
		res, err := linked.open().Restore(context.Background(), target, RestoreOptions{})
		if !fsys.Inodes {
			// The portable walker stores every name as a file of its
			// own: 18 MiB that do not fit.
			if !errors.Is(err, diskspace.ErrNoSpace) {
				t.Fatalf("three copies of 6 MiB onto a 16 MiB filesystem: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("a 6 MiB file under three names onto a 16 MiB filesystem: %v", err)
		}
		if res.Links != 2 || res.Bytes >= 7<<20 {
			t.Errorf("restored %d links, %d bytes written", res.Links, res.Bytes)
		}
		var first *syscall.Stat_t
		for _, n := range []string{"copy.db", "memory.db", "old.db"} {
			st, err := os.Stat(filepath.Join(target, n))
			if err != nil {
				t.Fatal(err)
			}
			if s := st.Sys().(*syscall.Stat_t); first == nil {
				first = s
			} else if s.Ino != first.Ino || s.Nlink != 3 {
				t.Errorf("%s: inode %d (%d links), want %d (3)", n, s.Ino, s.Nlink, first.Ino)
			}
		}
	})
}
