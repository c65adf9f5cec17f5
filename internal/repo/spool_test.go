package repo

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// A snapshot of many packs writes them through a few spool files, each
// reused once its pack is uploaded (and cut to the new pack's length:
// the round trip checks every byte), and leaves none behind.
func TestSpoolReuse(t *testing.T) {
	f := newFx(t, MinPackSize)
	brain := t.TempDir()
	for i := range 16 {
		if err := os.WriteFile(filepath.Join(brain, fmt.Sprintf("f%02d", i)), randomBytes(uint64(i), 1300<<10-i*40000), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	paths := map[string]int{}
	packs := 0
	f.store.fail = func(p *Pack) error {
		mu.Lock()
		defer mu.Unlock()
		paths[p.Path]++
		packs++
		return nil
	}
	f.snap(brain, nil)
	mustEqualTree(t, brain, func() string { d, _ := f.restore(); return d }())
	// In use at once: one filling, one being finished, one ready, one per
	// uploader; a file comes back after its upload.
	if limit := 4 + f.b.uploads(); packs < 8 || len(paths) >= packs || len(paths) > limit {
		t.Fatalf("%d packs through %d spool files (want fewer files than packs, at most %d)", packs, len(paths), limit)
	}
	if left, _ := os.ReadDir(f.b.SpoolDir); len(left) != 0 {
		t.Fatalf("%d spool files left", len(left))
	}
}

// The two ways a large file's chunk ids are computed (paired with the
// file's digest on the hashing goroutine, with two workers or fewer and
// SHA-NI; else by the sealers) give the same trees, and each restores.
func TestChunkIDPaths(t *testing.T) {
	brain := t.TempDir()
	for i := range 3 {
		if err := os.WriteFile(filepath.Join(brain, fmt.Sprintf("big%d", i)), randomBytes(uint64(40+i), 3<<20+i*777), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var roots []ID
	for _, workers := range []int{1, 2, 4} {
		f := newFx(t, 16<<20)
		f.b.Workers = workers
		res := f.snap(brain, nil)
		mustEqualTree(t, brain, func() string { d, _ := f.restore(); return d }())
		roots = append(roots, res.Commit.Root)
	}
	if roots[0] != roots[1] || roots[1] != roots[2] {
		t.Fatalf("root trees %v differ with the workers", roots)
	}
}
