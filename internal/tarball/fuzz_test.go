package tarball

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/fsys"
)

// FuzzExtract feeds arbitrary bytes to Extract. It must never panic, never
// write outside its target, never put more file bytes on disk than the
// input holds (success or not), and whatever it reports on success must be
// exactly what is on disk. The committed corpus (testdata/fuzz/FuzzExtract)
// holds archives from our writer and from GNU tar, and hostile ones:
// sparse bombs in every GNU encoding, names the hasher refuses.
func FuzzExtract(f *testing.F) {
	f.Add(archive(f, dirm("d/"), reg("d/a", "hello"), reg("b", "")))
	f.Add(archive(f, member{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: "l", Linkname: "/tmp"}}, reg("l/x", "evil")))
	f.Add(archive(f, reg("../x", "evil")))
	f.Add(archive(f, reg("a", "1"), dirm("a/")))
	f.Add([]byte{})
	for _, a := range sparseArchives() {
		f.Add(a)
	}
	f.Add(archive(f, reg(`a\b`, "x")))
	f.Add(archive(f, reg("a", "x"), hardlink("d/b", "a"), hardlink("c", "d/b")))
	f.Add(archive(f, dirm("d/"), hardlink("h", "d"), hardlink("../h", "a")))
	f.Add(archive(f, member{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "s", Mode: 0o6755, ModTime: time.Unix(1, 5)}, body: "x"},
		member{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o1700, ModTime: time.Unix(-5, 0)}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		target, _, check := sandbox(t)
		m, err := Extract(t.Context(), bytes.NewReader(data), target, ExtractOptions{MaxEntrySize: 1 << 20, MaxTotalSize: 4 << 20, MaxEntries: 200})
		check()
		if n := diskBytes(t, target); n > int64(len(data)) {
			t.Fatalf("%d file bytes on disk from %d bytes of input", n, len(data))
		}
		if err != nil {
			return
		}
		checkManifest(t, target, m)
		// Whatever was extracted, the hasher accepts its names.
		for _, f := range m.Files {
			if err := fsys.CheckName(f.Path); err != nil {
				t.Errorf("extracted %v", err)
			}
		}
		for _, d := range m.Dirs {
			if err := fsys.CheckName(d.Path); err != nil {
				t.Errorf("extracted directory %v", err)
			}
		}
		for _, s := range m.Skipped {
			if _, err := os.Lstat(filepath.Join(target, s.Path)); err == nil && !isListedDir(m, s.Path) {
				t.Errorf("skipped %s exists on disk", s.Path)
			}
		}
	})
}

func isListedDir(m Manifest, p string) bool {
	for _, d := range m.Dirs {
		if d.Path == p {
			return true
		}
	}
	return false
}
