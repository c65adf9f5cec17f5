package tarball

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Hand-made archives: archive/tar's writer cannot produce sparse entries.

// block is a tar header block with the fields the tests need.
type block [512]byte

func octal(dst []byte, v int64) {
	s := fmt.Sprintf("%0*o", len(dst)-1, v)
	copy(dst, s)
	dst[len(dst)-1] = 0
}

// header returns a header block: GNU magic ("ustar  \0") when gnu, else
// POSIX ustar.
func header(name string, typeflag byte, size int64, gnu bool) *block {
	var b block
	copy(b[0:100], name)
	octal(b[100:108], 0o644)
	octal(b[108:116], 0)
	octal(b[116:124], 0)
	octal(b[124:136], size)
	octal(b[136:148], 1_700_000_000)
	b[156] = typeflag
	if gnu {
		copy(b[257:265], "ustar  \x00")
	} else {
		copy(b[257:265], "ustar\x0000")
	}
	return &b
}

func (b *block) seal() []byte {
	copy(b[148:156], "        ")
	var sum int64
	for _, c := range b {
		sum += int64(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b[:]
}

func pad(data []byte) []byte {
	if r := len(data) % 512; r != 0 {
		data = append(data, make([]byte, 512-r)...)
	}
	return data
}

// paxRecords formats PAX extended header records ("%d %s=%s\n", the length
// counting itself).
func paxRecords(kv ...string) []byte {
	var out []byte
	for i := 0; i < len(kv); i += 2 {
		rec := " " + kv[i] + "=" + kv[i+1] + "\n"
		n := len(rec) + 1
		for len(fmt.Sprint(n))+len(rec) != n {
			n++
		}
		out = append(out, fmt.Sprint(n)+rec...)
	}
	return out
}

func paxEntry(kv ...string) []byte {
	recs := paxRecords(kv...)
	return append(header("././@PaxHeader", tar.TypeXHeader, int64(len(recs)), false).seal(), pad(recs)...)
}

const (
	bombData = 512      // bytes the archive stores
	bombSize = 16 << 20 // bytes archive/tar would expand them to
)

var endMarker = make([]byte, 1024)

// sparseArchives returns sparse "bombs" in each GNU encoding: a few KiB of
// archive that archive/tar reads as a bombSize-byte file named "bomb".
func sparseArchives() map[string][]byte {
	data := bytes.Repeat([]byte("x"), bombData)
	offset := int64(bombSize - bombData)

	// Old GNU format: typeflag 'S', the sparse map in the header.
	old := header("bomb", tar.TypeGNUSparse, bombData, true)
	octal(old[386:398], offset)   // sparse[0].offset
	octal(old[398:410], bombData) // sparse[0].numbytes
	octal(old[483:495], bombSize) // realsize
	gnuOld := append(old.seal(), data...)

	// PAX 1.0: the map leads the entry's data.
	m := pad([]byte(fmt.Sprintf("1\n%d\n%d\n", offset, bombData)))
	pax10 := paxEntry("GNU.sparse.major", "1", "GNU.sparse.minor", "0", "GNU.sparse.name", "bomb",
		"GNU.sparse.realsize", fmt.Sprint(bombSize))
	pax10 = append(pax10, header("GNUSparseFile.0/bomb", tar.TypeReg, int64(len(m)+bombData), false).seal()...)
	pax10 = append(append(pax10, m...), data...)

	// PAX 0.1: the map in the records.
	pax01 := paxEntry("GNU.sparse.numblocks", "1", "GNU.sparse.map", fmt.Sprintf("%d,%d", offset, bombData),
		"GNU.sparse.size", fmt.Sprint(bombSize), "GNU.sparse.name", "bomb")
	pax01 = append(append(pax01, header("GNUSparseFile.0/bomb", tar.TypeReg, bombData, false).seal()...), data...)

	// PAX 0.0: offset/numbytes record pairs.
	pax00 := paxEntry("GNU.sparse.size", fmt.Sprint(bombSize), "GNU.sparse.numblocks", "1",
		"GNU.sparse.offset", fmt.Sprint(offset), "GNU.sparse.numbytes", fmt.Sprint(bombData), "GNU.sparse.name", "bomb")
	pax00 = append(append(pax00, header("GNUSparseFile.0/bomb", tar.TypeReg, bombData, false).seal()...), data...)

	out := map[string][]byte{}
	for name, a := range map[string][]byte{"gnu-old": gnuOld, "pax-1.0": pax10, "pax-0.1": pax01, "pax-0.0": pax00} {
		// A plain file first, so the bomb is not the first entry.
		lead := append(header("a", tar.TypeReg, 2, true).seal(), pad([]byte("ok"))...)
		out[name] = append(append(lead, a...), endMarker...)
	}
	return out
}

// diskBytes is the total size of the regular files below root.
func diskBytes(t testing.TB, root string) int64 {
	t.Helper()
	var n int64
	seen := map[uint64]bool{} // a file of several names (hard links) once
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok {
					if seen[st.Ino] {
						return nil
					}
					seen[st.Ino] = true
				}
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func TestExtractRefusesSparse(t *testing.T) {
	for name, data := range sparseArchives() {
		t.Run(name, func(t *testing.T) {
			// The archive really is a bomb: archive/tar expands it.
			tr := tar.NewReader(bytes.NewReader(data))
			var expanded int64
			for {
				hdr, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("archive/tar: %v", err)
				}
				n, err := io.Copy(io.Discard, tr)
				if err != nil {
					t.Fatalf("archive/tar: read %s: %v", hdr.Name, err)
				}
				expanded += n
			}
			if expanded < bombSize {
				t.Fatalf("test archive expands to %d bytes only", expanded)
			}

			target, _, check := sandbox(t)
			defer check()
			_, err := Extract(t.Context(), bytes.NewReader(data), target, ExtractOptions{})
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), `"bomb"`) || !strings.Contains(err.Error(), "sparse") {
				t.Fatalf("err = %v, want ErrFormat naming the sparse entry bomb", err)
			}
			if _, err := os.Lstat(filepath.Join(target, "bomb")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("bomb exists on disk: %v", err)
			}
			if n := diskBytes(t, target); n > int64(len(data)) {
				t.Errorf("%d bytes on disk from a %d-byte archive", n, len(data))
			}
		})
	}
}

// TestExtractWritesNoMoreThanItReads checks the last line of defence,
// beneath the sparse check: a file entry whose reader hands out more bytes
// than the archive stream carried (as archive/tar does for a sparse entry)
// is stopped before the excess reaches the disk.
func TestExtractWritesNoMoreThanItReads(t *testing.T) {
	data := sparseArchives()["pax-1.0"]
	target := t.TempDir()
	root, err := os.OpenRoot(target)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	br := &blockReader{r: bytes.NewReader(data)}
	x := newExtractor(root, ExtractOptions{}, br)
	defer x.close()
	tr := tar.NewReader(br)
	for {
		hdr, err := tr.Next()
		if err != nil {
			t.Fatalf("no sparse entry found: %v", err)
		}
		if !isSparse(hdr) {
			continue
		}
		// Bypass entry()'s refusal and write the file.
		err = x.file(t.Context(), "bomb", hdr, tr)
		if !errors.Is(err, ErrFormat) {
			t.Fatalf("err = %v, want ErrFormat", err)
		}
		break
	}
	if n := diskBytes(t, target); n > int64(len(data)) {
		t.Errorf("%d bytes on disk from a %d-byte archive", n, len(data))
	}
}
