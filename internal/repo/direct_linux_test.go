//go:build linux

package repo

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// directDir opens a restore directory in a fresh temporary directory and
// reports the alignment direct writes get there (0: none, so the restore
// writes buffered).
func directDir(t *testing.T) (*restoreDir, string, int64) {
	t.Helper()
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	rd, err := openRestoreDir(root, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rd.close)
	probe := filepath.Join(dir, ".probe")
	fd, err := unix.Open(probe, unix.O_WRONLY|unix.O_CREAT|unix.O_DIRECT|unix.O_CLOEXEC, 0o600)
	var align int64
	if err == nil {
		align = dioAlign(fd)
		unix.Close(fd)
	}
	os.Remove(probe)
	return rd, dir, align
}

// createFor creates the file name in rd, as a restore does before its
// chunks arrive, and returns a fresh writer that probed it; until the test
// ends, files of any size go direct.
func createFor(t *testing.T, rd *restoreDir, name string) *directWriter {
	t.Helper()
	fh, err := rd.create(name)
	if err != nil {
		t.Fatal(err)
	}
	fh.Close()
	old := directMin
	directMin = 0
	t.Cleanup(func() { directMin = old })
	w := newDirectWriter(rd)
	if err := w.probe(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.close)
	return w
}

// split cuts size bytes into chunks of random lengths, some of a byte,
// some inside one block, some spanning many bounce buffers, in order.
func split(r *rand.Rand, size int64) []int64 {
	var out []int64
	for off := int64(0); off < size; {
		var n int64
		switch r.IntN(4) {
		case 0:
			n = 1 + r.Int64N(8)
		case 1:
			n = 1 + r.Int64N(5000)
		default:
			n = 1 + r.Int64N(3<<20)
		}
		n = min(n, size-off)
		out = append(out, n)
		off += n
	}
	return out
}

// TestDirectWriterAppends: files of every shape relative to the blocks
// and the bounce buffers, appended in chunks of any length from unaligned
// memory, read back the same; where the file system takes direct writes,
// every byte went that way.
func TestDirectWriterAppends(t *testing.T) {
	rd, dir, align := directDir(t)
	sizes := []int64{1, 4095, 4096, 4097, 3*4096 + 123, directBounce - 1, directBounce, directBounce + 1,
		3 * directBounce, 5<<20 + 4321}
	for si, size := range sizes {
		for rep := range 3 {
			r := rand.New(rand.NewPCG(uint64(si), uint64(rep)))
			data := randomBytes(uint64(si)+1, int(size))
			var chunks []int64
			switch rep {
			case 0:
				chunks = []int64{size} // one piece
			default:
				chunks = split(r, size)
			}
			name := fmt.Sprintf("f%d-%d", si, rep)
			w := createFor(t, rd, name)
			if !w.wants(size) != (align == 0) {
				t.Fatalf("wants %v with alignment %d", w.wants(size), align)
			}
			var off int64
			for _, n := range chunks {
				// A chunk's plaintext sits at any address: copy it to one
				// that is not aligned.
				buf := make([]byte, n+1)[1:]
				copy(buf, data[off:off+n])
				if err := w.append(3, name, size, buf); err != nil {
					t.Fatalf("size %d: append %d bytes at %d: %v", size, n, off, err)
				}
				off += n
			}
			if err := w.done(3); err != nil {
				t.Fatalf("size %d: done: %v", size, err)
			}
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("size %d (%d chunks): the file differs (%d bytes read)", size, len(chunks), len(got))
			}
			want := int64(0)
			if align > 0 {
				want = size
			}
			if w.direct != want {
				t.Fatalf("size %d: %d bytes written direct, want %d (alignment %d)", size, w.direct, want, align)
			}
		}
	}
}

func TestDirectWriterRefusesBadChunks(t *testing.T) {
	rd, _, align := directDir(t)
	if align == 0 {
		t.Fatal("the test directory takes no direct writes; this test needs a file system that does (ext4, xfs, btrfs)")
	}
	tests := []struct {
		name string
		run  func(w *directWriter, name string) error
		want string
	}{
		{"past the size", func(w *directWriter, name string) error {
			if err := w.append(1, name, 9000, make([]byte, 8995)); err != nil {
				return err
			}
			return w.append(1, name, 9000, make([]byte, 10))
		}, "past the size"},
		{"bytes missing", func(w *directWriter, name string) error {
			if err := w.append(1, name, 9000, make([]byte, 5000)); err != nil {
				return err
			}
			return w.done(1)
		}, "5000 of 9000 bytes written"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "bad" + string(rune('a'+i))
			w := createFor(t, rd, name)
			err := tt.run(w, name)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// TestRestoreDirect restores a brain whose large files go direct: the
// same bytes, hash and modes come back, and the large files' pages are
// not left in the page cache.
func TestRestoreDirect(t *testing.T) {
	old := directMin
	directMin = 1 << 20
	t.Cleanup(func() { directMin = old })
	brain := t.TempDir()
	writeFiles(t, brain, map[string]string{"system.md": "small: buffered\n"})
	// Random bytes: several chunks each, so both go through restoreInOrder.
	sizes := map[string]int{"memory.db": 6<<20 + 777, "aligned.bin": 12 << 20}
	for name, n := range sizes {
		if err := os.WriteFile(filepath.Join(brain, name), randomBytes(uint64(n), n), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	f := newFx(t, 4<<20)
	f.snap(brain, nil)
	_, _, align := directDir(t)
	dir, res := f.restore()
	for name := range sizes {
		resident := residentPages(t, filepath.Join(dir, name))
		switch {
		case align > 0 && resident > 1:
			t.Errorf("%s: %d pages in the page cache after a direct restore", name, resident)
		case align == 0 && resident == 0:
			t.Errorf("%s: no page cached, though the file system takes no direct writes", name)
		}
	}
	mustEqualTree(t, brain, dir)
	if res.BundleHash != f.last.Commit.BundleHash {
		t.Fatalf("restore verified %s, want %s", res.BundleHash, f.last.Commit.BundleHash)
	}
}

// residentPages counts the pages of the file at path in the page cache.
func residentPages(t *testing.T, path string) int {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(fh.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}
