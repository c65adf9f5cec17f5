package arch

import (
	"os"
	"path/filepath"
	"testing"
)

// maxTracked is the largest file the repository keeps: sources, fixtures
// and documents are far smaller; build output (a stray `GOOS=windows go
// build` once committed a 30 MB hermesd.exe) and fetched artifacts are not
// kept at all.
const maxTracked = 2 << 20

func TestNoLargeTrackedFiles(t *testing.T) {
	for _, f := range trackedFiles(t) {
		fi, err := os.Stat(filepath.Join("..", "..", filepath.FromSlash(f)))
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > maxTracked {
			t.Errorf("%s: %d bytes tracked (at most %d); build output and fetched artifacts belong in .gitignore", f, fi.Size(), maxTracked)
		}
	}
}
