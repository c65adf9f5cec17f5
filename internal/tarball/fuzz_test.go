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
// exactly what is on disk, symlinks included (made, never followed), and
// no directory is made writable by everyone. The committed corpus (testdata/fuzz/FuzzExtract)
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
	// Symlinks (made last, never followed), the epoch as a time, a
	// world-writable directory, times out of range.
	sym := func(name, target string, when time.Time) member {
		return member{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, ModTime: when}}
	}
	f.Add(archive(f, reg("a", "x"), sym("l", "/etc", time.Unix(0, 0)), sym("d/up", "../../..", time.Unix(7, 0)),
		member{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "d/", Mode: 0o3777, ModTime: time.Unix(0, 0)}},
		hardlink("h", "l"), sym("bundle.lock.json", "/dev/zero", time.Unix(9, 0))))
	f.Add(archive(f, member{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "far", Format: tar.FormatPAX, ModTime: time.Date(3000, 1, 1, 0, 0, 0, 1, time.UTC)}, body: "x"},
		sym("s", "", time.Unix(1, 0)), sym("s2", "x", time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC))))
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
		for _, l := range m.Symlinks {
			if err := fsys.CheckName(l.Path); err != nil || fsys.CheckSymlinkTarget(l.Target) != nil {
				t.Errorf("made symlink %+v", l)
			}
		}
		for _, d := range m.Dirs {
			if fi, err := os.Lstat(filepath.Join(target, d.Path)); err == nil && fi.Mode().Perm()&0o002 != 0 {
				t.Errorf("directory %s made writable by everyone", d.Path)
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
