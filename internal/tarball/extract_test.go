package tarball

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// sandbox returns a target at TEMP/outer/target plus a canary directory
// outside it, and a check that nothing was written anywhere but the target.
func sandbox(t *testing.T) (target, canary string, check func()) {
	t.Helper()
	base := t.TempDir()
	outer := filepath.Join(base, "outer")
	canary = filepath.Join(base, "canary")
	if err := os.Mkdir(outer, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(canary, 0o755); err != nil {
		t.Fatal(err)
	}
	target = filepath.Join(outer, "target")
	makeRemovable(t, outer)
	return target, canary, func() {
		t.Helper()
		for dir, want := range map[string][]string{base: {"canary", "outer"}, outer: {"target"}, canary: nil} {
			ents, _ := os.ReadDir(dir)
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			if len(want) == 0 && len(names) == 0 {
				continue
			}
			if !slices.Equal(names, want) && !(dir == outer && len(names) == 0) {
				t.Errorf("%s holds %q, want %q: something was written outside the target", dir, names, want)
			}
		}
	}
}

func TestExtractHostile(t *testing.T) {
	symlink := func(name, target string) member {
		return member{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target}}
	}
	tests := []struct {
		name    string
		members func(canary string) []member
		opts    ExtractOptions
		wantErr error
		want    []string // paths on disk after success
		skipped []Skipped
	}{
		{name: "dot-dot", members: func(string) []member { return []member{reg("../x", "evil")} }, wantErr: ErrUnsafePath},
		{name: "absolute", members: func(c string) []member { return []member{reg(c+"/x", "evil")} }, wantErr: ErrUnsafePath},
		{name: "absolute etc", members: func(string) []member { return []member{reg("/etc/x", "evil")} }, wantErr: ErrUnsafePath},
		{name: "climb out", members: func(string) []member { return []member{dirm("a/"), reg("a/../../x", "evil")} }, wantErr: ErrUnsafePath},
		{name: "dot slash climb", members: func(string) []member { return []member{reg("./../x", "evil")} }, wantErr: ErrUnsafePath},
		{name: "symlink named out", members: func(string) []member { return []member{symlink("../l", "/tmp")} }, wantErr: ErrUnsafePath},
		{name: "write through symlink", members: func(c string) []member {
			return []member{symlink("link", c), reg("link/x", "evil")}
		}, wantErr: ErrUnsafePath},
		{name: "dir through symlink", members: func(c string) []member {
			return []member{symlink("link", c), dirm("link/sub/")}
		}, wantErr: ErrUnsafePath},
		{name: "symlink then dir of same name", members: func(c string) []member {
			return []member{symlink("link", c), dirm("link/")}
		}, wantErr: ErrDuplicate},
		{name: "duplicate file", members: func(string) []member { return []member{reg("a", "1"), reg("a", "2")} }, wantErr: ErrDuplicate},
		{name: "duplicate after normalisation", members: func(string) []member { return []member{reg("a", "1"), reg("./a", "2")} }, wantErr: ErrDuplicate},
		{name: "file then dir", members: func(string) []member { return []member{reg("a", "1"), dirm("a/")} }, wantErr: ErrDuplicate},
		{name: "dir then file", members: func(string) []member { return []member{dirm("a/"), reg("a", "1")} }, wantErr: ErrDuplicate},
		{name: "duplicate dir", members: func(string) []member { return []member{dirm("a/"), dirm("a/")} }, wantErr: ErrDuplicate},
		{name: "beneath a file", members: func(string) []member { return []member{reg("a", "1"), reg("a/b", "2")} }, wantErr: ErrDuplicate},
		{name: "file over implicit dir", members: func(string) []member { return []member{reg("a/b", "1"), reg("a", "2")} }, wantErr: ErrDuplicate},
		{name: "root as file", members: func(string) []member { return []member{reg(".", "x")} }, wantErr: ErrUnsafePath},
		{name: "root as symlink", members: func(string) []member { return []member{symlink("./", "/")} }, wantErr: ErrUnsafePath},
		{name: "invalid UTF-8", members: func(string) []member { return []member{reg("bad\xff", "x")} }, wantErr: ErrName},
		{name: "oversized entry", opts: ExtractOptions{MaxEntrySize: 10},
			members: func(string) []member { return []member{reg("a", "0123456789"), reg("b", "0123456789x")} }, wantErr: ErrLimit},
		{name: "total too big", opts: ExtractOptions{MaxTotalSize: 20},
			members: func(string) []member { return []member{reg("a", "0123456789abcde"), reg("b", "0123456789abcde")} }, wantErr: ErrLimit},
		{name: "too many entries", opts: ExtractOptions{MaxEntries: 3},
			members: func(string) []member { return []member{dirm("d/"), reg("d/a", "1"), reg("d/b", "2"), reg("d/c", "3")} }, wantErr: ErrLimit},

		{name: "hard link made", members: func(string) []member {
			return []member{reg("a", "hello"), hardlink("d/h", "a"), hardlink("./h2", "./d/h")}
		}, want: []string{"a", "d", "d/h", "h2"}},
		{name: "hard link out", members: func(string) []member {
			return []member{hardlink("h", "../../../etc/passwd")}
		}, wantErr: ErrUnsafePath},
		{name: "hard link absolute", members: func(c string) []member {
			return []member{hardlink("h", c+"/x")}
		}, wantErr: ErrUnsafePath},
		{name: "hard link to nothing", members: func(string) []member {
			return []member{hardlink("h", "a"), reg("a", "later")}
		}, wantErr: ErrUnsafePath},
		{name: "hard link to a directory", members: func(string) []member {
			return []member{dirm("d/"), hardlink("h", "d")}
		}, wantErr: ErrUnsafePath},
		{name: "hard link to the root", members: func(string) []member {
			return []member{reg("a", "x"), hardlink("h", "./")}
		}, wantErr: ErrUnsafePath},
		{name: "hard link to a symlink", members: func(c string) []member {
			return []member{symlink("s", c+"/x"), hardlink("h", "s")}
		}, wantErr: ErrUnsafePath},
		{name: "hard link over a file", members: func(string) []member {
			return []member{reg("a", "x"), reg("b", "y"), hardlink("b", "a")}
		}, wantErr: ErrDuplicate},
		{name: "write beneath a hard link", members: func(string) []member {
			return []member{reg("a", "x"), hardlink("h", "a"), reg("h/x", "evil")}
		}, wantErr: ErrDuplicate},
		{name: "hard link is the root", members: func(string) []member {
			return []member{reg("a", "x"), hardlink("./", "a")}
		}, wantErr: ErrUnsafePath},
		// Symlinks are made as symlinks, whatever they name, after every
		// file: none is followed (sandbox: nothing appears outside).
		{name: "symlinks made", members: func(c string) []member {
			return []member{symlink("link", c), reg("a", "x"), symlink("d/up", "../../.."), symlink("abs", "/etc/passwd"),
				symlink("self", "."), reg("d/b", "y"), symlink("bytes", "\xff\x01")}
		}, want: []string{"a", "abs", "bytes", "d", "d/b", "d/up", "link", "self"}},
		{name: "symlink in the place of the lock", members: func(c string) []member {
			return []member{symlink("bundle.lock.json", c+"/x"), symlink("receipts.ndjson", "/dev/zero"), symlink("d/bundle.lock.json", "x")}
		}, want: []string{"d", "d/bundle.lock.json"}, skipped: []Skipped{
			{"bundle.lock.json", "symlink in the place of a file hermesd keeps"}, {"receipts.ndjson", "symlink in the place of a file hermesd keeps"}}},
		{name: "symlink target none can make", members: func(string) []member {
			return []member{symlink("empty", ""), symlink("long", strings.Repeat("x", 4096)), symlink("ok", strings.Repeat("x", 4095))}
		}, want: []string{"ok"}, skipped: []Skipped{
			{"empty", "symlink whose target no system can create"}, {"long", "symlink whose target no system can create"}}},
		{name: "symlink targets over the bound", opts: ExtractOptions{MaxSymlinkBytes: 10}, members: func(string) []member {
			return []member{symlink("a", "12345"), symlink("b", "123456")}
		}, wantErr: ErrLimit},
		{name: "write beneath a symlink to a directory inside", members: func(string) []member {
			return []member{dirm("d/"), symlink("s", "d"), reg("s/x", "through")}
		}, wantErr: ErrUnsafePath},
		{name: "hard link through a symlink", members: func(string) []member {
			return []member{dirm("d/"), reg("d/f", "x"), symlink("s", "d"), hardlink("h", "s/f")}
		}, wantErr: ErrUnsafePath},
		{name: "symlink over a file", members: func(string) []member { return []member{reg("a", "x"), symlink("a", "b")} }, wantErr: ErrDuplicate},
		{name: "devices and fifo skipped", members: func(string) []member {
			return []member{
				{hdr: tar.Header{Typeflag: tar.TypeChar, Name: "null", Devmajor: 1, Devminor: 3}},
				{hdr: tar.Header{Typeflag: tar.TypeBlock, Name: "sda", Devmajor: 8}},
				{hdr: tar.Header{Typeflag: tar.TypeFifo, Name: "fifo"}},
			}
		}, skipped: []Skipped{{"null", "device"}, {"sda", "device"}, {"fifo", "fifo"}}},
		{name: "GNU style names", members: func(string) []member {
			return []member{{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o777}}, dirm("./d/"), reg("./d/a", "1"), reg(".//d//b", "2")}
		}, want: []string{"d", "d/a", "d/b"}},
		{name: "implicit parents", members: func(string) []member { return []member{reg("x/y/z", "1"), dirm("x/")} },
			want: []string{"x", "x/y", "x/y/z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target, canary, check := sandbox(t)
			defer check()
			data := archive(t, tt.members(canary)...)
			m, err := Extract(t.Context(), bytes.NewReader(data), target, tt.opts)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for p := range state(t, target) {
				got = append(got, filepath.ToSlash(p))
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("on disk: %q, want %q", got, tt.want)
			}
			if fmt.Sprint(m.Skipped) != fmt.Sprint(tt.skipped) {
				t.Errorf("skipped = %v, want %v", m.Skipped, tt.skipped)
			}
			checkManifest(t, target, m)
		})
	}
}

func TestExtractModes(t *testing.T) {
	old := umask(0o077)
	defer umask(old)
	target, _, check := sandbox(t)
	defer check()
	data := archive(t,
		member{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o777}},
		member{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "ro/", Mode: 0o555}},
		member{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "ro/f", Mode: 0o444, Size: 2}, body: "ro"},
		member{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "d/", Mode: 0o751}},
		member{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "d/x", Mode: 0o4755, Size: 1}, body: "x"},
		member{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "none", Mode: 0o000, Size: 1}, body: "n"},
	)
	m, err := Extract(t.Context(), bytes.NewReader(data), target, ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ro": "dr-xr-xr-x", "ro/f": "-r--r--r-- ro", "d": "drwxr-x--x", "d/x": "-rwxr-xr-x x", "none": "---------- n",
	}
	if got := state(t, target); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("state = %v, want %v", got, want)
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o700 {
		t.Errorf("target mode %v: the ./ entry must not set it", fi.Mode())
	}
	checkManifest(t, target, m)
}

func TestExtractTruncated(t *testing.T) {
	src := t.TempDir()
	build(t, src, []entry{
		{path: "d/", mode: 0o755},
		{path: "d/a", mode: 0o644, content: strings.Repeat("a", 700)},
		{path: "d/b", mode: 0o644, content: "0123456789"},
	})
	data, _ := writeTar(t, src, WriteOptions{})
	var cuts []int
	for off := 0; off < len(data); off += 512 {
		cuts = append(cuts, off) // every block boundary, entry boundaries included
	}
	cuts = append(cuts, 1, 100, 511, 513, 700, 1100, len(data)-1023, len(data)-513, len(data)-1)
	for _, cut := range cuts {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			target, _, check := sandbox(t)
			defer check()
			_, err := Extract(t.Context(), bytes.NewReader(data[:cut]), target, ExtractOptions{})
			if !errors.Is(err, ErrTruncated) || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("cut at %d of %d: err = %v, want ErrTruncated", cut, len(data), err)
			}
		})
	}
	// A last file of zeros: its data must not pass for the end marker.
	zeros := archive(t, reg("a", "x"), reg("z", string(make([]byte, 2048))))
	for _, cut := range []int{len(zeros) - 1024, len(zeros) - 512} {
		target, _, _ := sandbox(t)
		if _, err := Extract(t.Context(), bytes.NewReader(zeros[:cut]), target, ExtractOptions{}); !errors.Is(err, ErrTruncated) {
			t.Errorf("zero-filled last file, cut at %d of %d: err = %v, want ErrTruncated", cut, len(zeros), err)
		}
	}
	// The same stream through a reader that returns data and io.EOF together.
	target, _, _ := sandbox(t)
	if _, err := Extract(t.Context(), &eofReader{data[:len(data)-512]}, target, ExtractOptions{}); !errors.Is(err, ErrTruncated) {
		t.Fatalf("one zero block missing, data+EOF reader: err = %v", err)
	}
	target, _, _ = sandbox(t)
	if _, err := Extract(t.Context(), &eofReader{data}, target, ExtractOptions{}); err != nil {
		t.Fatalf("complete archive through a data+EOF reader: %v", err)
	}
}

// eofReader returns everything in one Read together with io.EOF.
type eofReader struct{ b []byte }

func (r *eofReader) Read(p []byte) (int, error) {
	n := copy(p, r.b)
	r.b = r.b[n:]
	if len(r.b) == 0 {
		return n, io.EOF
	}
	return n, nil
}

func TestExtractTrailer(t *testing.T) {
	data := archive(t, reg("a", "x"))
	tests := []struct {
		name    string
		trailer []byte
		wantErr error
	}{
		{"none", nil, nil},
		{"GNU record padding", make([]byte, 9216), nil},
		{"garbage", []byte("garbage"), ErrFormat},
		{"zeros then garbage", append(make([]byte, 5000), 1), ErrFormat},
		{"another archive", archive(t, reg("b", "y")), ErrFormat},
		{"endless zeros", make([]byte, maxTrailer+1), ErrFormat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target, _, check := sandbox(t)
			defer check()
			_, err := Extract(t.Context(), bytes.NewReader(append(slices.Clone(data), tt.trailer...)), target, ExtractOptions{})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
	// A zero block followed by a header is not an end marker.
	target, _, _ := sandbox(t)
	bad := append(slices.Clone(data[:len(data)-1024]), make([]byte, 512)...)
	bad = append(bad, archive(t, reg("b", "y"))...)
	if _, err := Extract(t.Context(), bytes.NewReader(bad), target, ExtractOptions{}); !errors.Is(err, ErrFormat) {
		t.Fatalf("zero block then header: err = %v, want ErrFormat", err)
	}
	// Not a tar at all.
	target, _, _ = sandbox(t)
	if _, err := Extract(t.Context(), strings.NewReader(strings.Repeat("not a tar ", 100)), target, ExtractOptions{}); !errors.Is(err, ErrFormat) {
		t.Fatalf("junk: err = %v, want ErrFormat", err)
	}
}

func TestExtractTarget(t *testing.T) {
	data := archive(t, reg("a", "x"))
	base := t.TempDir()
	nonEmpty := filepath.Join(base, "full")
	os.MkdirAll(filepath.Join(nonEmpty, ".x"), 0o755)
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o644)
	empty := filepath.Join(base, "empty")
	os.Mkdir(empty, 0o755)
	link := filepath.Join(base, "link")
	os.Symlink(empty, link)
	tests := []struct {
		target  string
		wantErr error
	}{
		{nonEmpty, ErrTargetNotEmpty},
		{file, ErrTargetNotEmpty},
		{link, ErrTargetNotEmpty},
		{filepath.Join(base, "missing/parent"), os.ErrNotExist},
		{empty, nil},
		{filepath.Join(base, "new"), nil},
	}
	for _, tt := range tests {
		_, err := Extract(t.Context(), bytes.NewReader(data), tt.target, ExtractOptions{})
		if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
			t.Errorf("Extract into %s: err = %v, want %v", tt.target, err, tt.wantErr)
		}
	}
	if b, err := os.ReadFile(filepath.Join(base, "new/a")); err != nil || string(b) != "x" {
		t.Errorf("new target: %q %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(base, "new")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("created target mode: %v %v", fi, err)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 1 {
		t.Errorf("empty target holds %d entries", len(ents))
	}
}

func hardlink(name, target string) member {
	return member{hdr: tar.Header{Typeflag: tar.TypeLink, Name: name, Linkname: target, Mode: 0o644}}
}

func gnuTar(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("tar")
	if err != nil {
		t.Fatalf("GNU tar is needed for the interoperability tests: %v", err)
	}
	out, err := exec.Command(p, "--version").Output()
	if err != nil || !strings.Contains(string(out), "GNU tar") {
		t.Fatalf("%s is not GNU tar: %s %v", p, out, err)
	}
	return p
}

func TestGNUTarInterop(t *testing.T) {
	tarBin := gnuTar(t)
	src := t.TempDir()
	build(t, src, testTree())
	want := state(t, src)

	t.Run("extract what GNU tar wrote", func(t *testing.T) {
		// The reference runtime's command line.
		cmd := exec.Command(tarBin, "-c", "--numeric-owner", "-C", src, ".")
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("tar -c: %v: %s", err, stderr.String())
		}
		if !bytes.Contains(out.Bytes(), []byte("./system.md")) || !bytes.Contains(out.Bytes(), []byte("././@LongLink")) {
			t.Fatal("GNU tar output does not look as expected")
		}
		target, _, check := sandbox(t)
		defer check()
		m, err := Extract(t.Context(), bytes.NewReader(out.Bytes()), target, ExtractOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := state(t, target); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("extracted tree differs:\n got %v\nwant %v", keys(got), keys(want))
		}
		if len(m.Skipped) != 0 || fmt.Sprint(m.Symlinks) != fmt.Sprint([]Symlink{{Path: "link", Target: "system.md", Mtime: m.Symlinks[0].Mtime, HasMtime: true}}) {
			t.Errorf("skipped = %v, symlinks = %+v", m.Skipped, m.Symlinks)
		}
		checkManifest(t, target, m)
	})

	t.Run("GNU tar extracts what we wrote", func(t *testing.T) {
		data, _ := writeTar(t, src, WriteOptions{})
		dst := t.TempDir()
		makeRemovable(t, dst)
		cmd := exec.Command(tarBin, "-x", "-p", "-C", dst)
		cmd.Stdin = bytes.NewReader(data)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil || stderr.Len() > 0 {
			t.Fatalf("tar -x: %v: %s", err, stderr.String())
		}
		if got := state(t, dst); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("GNU tar extracted a different tree:\n got %v\nwant %v", keys(got), keys(want))
		}
	})
}

// TestExtractTimes: an archive that records times (one header other than
// the epoch, as the reference's GNU tar archives always have) gives every
// entry its time, the epoch and times under a second included, whichever
// header comes first; an archive without times (hermesd's own, the epoch
// in every header) leaves the time of the restore. A time an int64 of ns
// cannot hold, or that the file system clamps, is listed in Retimed.
func TestExtractTimes(t *testing.T) {
	epoch := time.Unix(0, 0)
	at := func(m member, when time.Time, f tar.Format) member {
		m.hdr.ModTime, m.hdr.Format = when, f
		return m
	}
	symlink := func(name, target string) member {
		return member{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target}}
	}
	t.Run("with times", func(t *testing.T) {
		half := time.Unix(0, 500_000_000)
		data := archive(t,
			at(member{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755}}, epoch, tar.FormatGNU),
			at(reg("a", "epoch"), epoch, tar.FormatGNU),
			at(dirm("d/"), epoch, tar.FormatGNU),
			at(symlink("l", "a"), epoch, tar.FormatGNU),
			at(reg("d/half", "0.5 s"), half, tar.FormatPAX),
			hardlink("h", "a"),
			at(reg("b", "later"), time.Unix(1_700_000_000, 0), tar.FormatGNU),
		)
		target, _, check := sandbox(t)
		defer check()
		m, err := Extract(t.Context(), bytes.NewReader(data), target, ExtractOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkManifest(t, target, m)
		if !m.Times || m.Root == nil || !m.Root.HasMtime || m.Root.Mtime != 0 {
			t.Errorf("times %v, root %+v: want the epoch, a time", m.Times, m.Root)
		}
		for p, want := range map[string]time.Time{"a": epoch, "h": epoch, "d": epoch, "l": epoch, "d/half": half, "b": time.Unix(1_700_000_000, 0)} {
			fi, err := os.Lstat(filepath.Join(target, p))
			if err != nil || !fi.ModTime().Equal(want) {
				t.Errorf("%s: %v (%v), want %v", p, fi.ModTime(), err, want)
			}
		}
		if len(m.Retimed) != 0 {
			t.Errorf("retimed %+v", m.Retimed)
		}
	})
	t.Run("without times", func(t *testing.T) {
		start := time.Now().Add(-time.Second)
		data := archive(t, at(reg("a", "x"), epoch, tar.FormatGNU), at(dirm("d/"), epoch, tar.FormatGNU), at(symlink("l", "a"), epoch, tar.FormatGNU))
		target, _, check := sandbox(t)
		defer check()
		m, err := Extract(t.Context(), bytes.NewReader(data), target, ExtractOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkManifest(t, target, m)
		if m.Times || m.Files[0].HasMtime || m.Dirs[0].HasMtime || m.Symlinks[0].HasMtime {
			t.Errorf("an archive without times: %+v", m)
		}
		for _, p := range []string{"a", "d", "l"} {
			if fi, err := os.Lstat(filepath.Join(target, p)); err != nil || fi.ModTime().Before(start) {
				t.Errorf("%s: %v (%v), want the time of the restore", p, fi.ModTime(), err)
			}
		}
	})
	t.Run("out of range", func(t *testing.T) {
		far, old := time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1850, 1, 1, 0, 0, 0, 0, time.UTC)
		data := archive(t, at(reg("far", "x"), far, tar.FormatPAX), at(reg("old", "y"), old, tar.FormatPAX))
		target, _, check := sandbox(t)
		defer check()
		start := time.Now().Add(-time.Second)
		m, err := Extract(t.Context(), bytes.NewReader(data), target, ExtractOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkManifest(t, target, m)
		retimed := map[string]Retimed{}
		for _, r := range m.Retimed {
			retimed[r.Path] = r
		}
		if r, ok := retimed["far"]; !ok || !r.Recorded.Equal(far) || !r.Kept.IsZero() {
			t.Errorf("far: %+v (%v), want listed as not kept", r, ok)
		}
		if fi, _ := os.Lstat(filepath.Join(target, "far")); fi.ModTime().Before(start) {
			t.Errorf("far: %v, want the time of the restore", fi.ModTime())
		}
		fi, _ := os.Lstat(filepath.Join(target, "old"))
		if r, ok := retimed["old"]; fi.ModTime().Equal(old) == ok || ok && !r.Kept.Equal(fi.ModTime()) {
			t.Errorf("old: %v; listed %v %+v", fi.ModTime(), ok, r)
		}
	})
}
