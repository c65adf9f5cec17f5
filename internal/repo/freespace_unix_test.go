//go:build unix

package repo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hermesd/hermesd/internal/diskspace"
)

// TestAmplifiedBeyondFreeSpace: a commit declaring more than the target's
// filesystem holds (a 16 MiB chunk, the largest a reader accepts, listed
// until it does) is refused before a byte is written or the chunk is
// downloaded, with the numbers.
func TestAmplifiedBeyondFreeSpace(t *testing.T) {
	parent := t.TempDir()
	avail := freeBytes(t, parent)
	// Were the check gone, the restore would fill the disk: files stop
	// at 256 MiB instead (EFBIG; Go ignores SIGXFSZ).
	limitFileSize(t, 256<<20)
	f := smallRepo(t)
	// Half as much again as the free space: other processes free space
	// meanwhile (in CI a test package running beside this one once freed
	// enough that 8 chunks past it were not past it any more).
	n := int((avail+avail/2)/MaxChunkLen) + 8
	amplify(t, f, randomBytes(16, MaxChunkLen), 0, n, ID{1})
	r := f.open()
	before, _ := r.Downloaded()
	_, err := r.Restore(context.Background(), filepath.Join(parent, "restored"), RestoreOptions{})
	if !errors.Is(err, diskspace.ErrNoSpace) || !strings.Contains(err.Error(), "the snapshot declares") {
		t.Fatalf("restore of %d × 16 MiB: %v", n, err)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 0 {
		t.Fatalf("a refused restore left %v", ents)
	}
	if down, _ := r.Downloaded(); down-before >= MaxChunkLen {
		t.Errorf("downloaded %d bytes before refusing", down-before)
	}
}

// freeBytes is what the filesystem holding dir has free for this user.
func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// limitFileSize caps the size of any file this process writes at n bytes
// until the test ends.
func limitFileSize(t *testing.T, n uint64) {
	t.Helper()
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = min(n, old.Max)
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_FSIZE, &old) })
}
