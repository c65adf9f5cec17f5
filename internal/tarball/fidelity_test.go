package tarball

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermesd/hermesd/internal/fsys"
)

// fidelityBrain is a brain with one file under three names (two
// directories), a setuid+setgid program, a setgid and a sticky directory
// (writable by everyone), a root kept 0700, symlinks (relative, absolute,
// climbing out of the brain), and real modification times.
func fidelityBrain(t *testing.T) (string, time.Time) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "brain")
	build(t, root, []entry{
		{path: "a.md", mode: 0o644, content: "one file, three names\n"},
		{path: "bin/", mode: 0o755},
		{path: "bin/tool", mode: 0o755, content: "#!/bin/sh\necho hi\n"},
		{path: "shared/", mode: 0o775},
		{path: "shared/x", mode: 0o664, content: "x"},
		{path: "tmp/", mode: 0o777},
		{path: "z/", mode: 0o755},
	})
	for _, l := range [][2]string{{"a.md", "b.md"}, {"a.md", "z/c.md"}} {
		if err := os.Link(filepath.Join(root, l[0]), filepath.Join(root, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range [][2]string{{"a.md", "lnk"}, {"/etc/passwd", "z/abs"}, {"../../outside", "z/up"}} {
		if err := os.Symlink(l[0], filepath.Join(root, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	for p, m := range map[string]fs.FileMode{"bin/tool": 0o755 | fs.ModeSetuid | fs.ModeSetgid, "shared": 0o775 | fs.ModeSetgid,
		"tmp": 0o777 | fs.ModeSticky, ".": 0o700} {
		if err := os.Chmod(filepath.Join(root, p), m); err != nil {
			t.Fatal(err)
		}
	}
	base := time.Unix(1_700_000_000, 0)
	i := 0
	for _, p := range []string{"lnk", "z/abs", "z/up"} {
		i++
		lutimes(t, filepath.Join(root, p), base.Add(time.Duration(i)*time.Hour))
	}
	for _, p := range []string{"a.md", "bin/tool", "shared/x", "bin", "shared", "tmp", "z", "."} {
		i++
		if err := os.Chtimes(filepath.Join(root, p), base, base.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	return root, base
}

// lutimes sets a symlink's own times.
func lutimes(t testing.TB, p string, when time.Time) {
	t.Helper()
	ts := unix.NsecToTimespec(when.UnixNano())
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatal(err)
	}
}

// meta is a tree's modes (special bits included), times (seconds), for
// every name of a file after the first (in walk order) the first, and
// symlinks' targets.
func meta(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	first := map[uint64]string{}
	var paths []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		paths = append(paths, filepath.ToSlash(rel))
		return nil
	})
	slices.Sort(paths) // byte order: right for these names
	for _, rel := range paths {
		fi, err := os.Lstat(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		v := fmt.Sprintf("%04o @%d", fsys.UnixMode(fi.Mode()&fsys.Meta), fi.ModTime().Unix())
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(filepath.Join(root, rel))
			v = fmt.Sprintf("-> %s @%d", target, fi.ModTime().Unix())
		}
		if st := fi.Sys().(*syscall.Stat_t); fi.Mode().IsRegular() && st.Nlink > 1 {
			if f, ok := first[st.Ino]; ok {
				v += " =" + f
			} else {
				first[st.Ino] = rel
			}
		}
		out[rel] = v
	}
	return out
}

func diffMeta(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range want {
			if !yield(k) {
				return
			}
		}
	}) {
		if want[k] != got[k] {
			t.Errorf("%s: %s: want %q, got %q", what, k, want[k], got[k])
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: %s: unexpected %q", what, k, got[k])
		}
	}
}

// TestFidelityOwnArchive: hermesd's deterministic archive keeps every name
// of a file as a hard link, the special bits and the root's mode, and no
// times (mtime 0: it stays deterministic); its extraction re-creates the
// links, keeps the directories' bits, strips setuid and setgid from the
// program and says so, and leaves the time-less files with the time of
// the restore.
func TestFidelityOwnArchive(t *testing.T) {
	src, _ := fidelityBrain(t)
	data, wm := writeTar(t, src, WriteOptions{})
	links := 2
	if !fsys.Inodes {
		links = 0 // the portable walker cannot tell a file's names
	}
	if wm.Links != links || wm.Root == nil || wm.Root.Mode != 0o700 {
		t.Fatalf("write manifest: %d links, root %+v", wm.Links, wm.Root)
	}
	for _, f := range wm.Files {
		if (f.Path == "b.md" || f.Path == "z/c.md") && fsys.Inodes != (f.Link == "a.md") {
			t.Errorf("write manifest: %s links to %q", f.Path, f.Link)
		}
	}
	if again, _ := writeTar(t, src, WriteOptions{Workers: 1}); !bytes.Equal(again, data) {
		t.Fatal("an archive with hard links is not deterministic")
	}

	start := time.Now().Add(-time.Second)
	dst := filepath.Join(t.TempDir(), "out")
	m, err := Extract(t.Context(), bytes.NewReader(data), dst, ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	makeRemovable(t, dst)
	if m.Root == nil || m.Root.Mode != 0o700 || m.Root.HasMtime || m.Times {
		t.Errorf("root %+v, times %v: want mode 0700, no time", m.Root, m.Times)
	}
	if m.Links != links || fmt.Sprint(m.Stripped) != fmt.Sprint([]Stripped{{"bin/tool", 0o755 | fs.ModeSetuid | fs.ModeSetgid, 0o755}}) {
		t.Errorf("links %d, stripped %+v", m.Links, m.Stripped)
	}
	if fmt.Sprint(m.Narrowed) != fmt.Sprint([]Stripped{{"tmp", 0o777 | fs.ModeSticky, 0o775 | fs.ModeSticky}}) {
		t.Errorf("narrowed %+v, want tmp without o+w", m.Narrowed)
	}
	if len(m.Symlinks) != 3 || len(wm.Symlinks) != 3 || len(m.Skipped) != 0 {
		t.Errorf("symlinks %+v (written %+v), skipped %+v", m.Symlinks, wm.Symlinks, m.Skipped)
	}
	checkManifest(t, dst, m)
	got := meta(t, dst)
	want := ownLinks(meta(t, src))
	want["bin/tool"] = strings.Replace(want["bin/tool"], "6755", "0755", 1)
	want["tmp"] = strings.Replace(want["tmp"], "1777", "1775", 1)
	for k, v := range got {
		// No times in the archive: everything has the restore's time.
		i := strings.Index(v, "@")
		var sec int64
		fmt.Sscanf(v[i+1:], "%d", &sec)
		if sec < start.Unix() {
			t.Errorf("%s: mtime %d, before the restore", k, sec)
		}
		if w, ok := want[k]; ok {
			want[k] = w[:strings.Index(w, "@")] + v[i:]
		}
	}
	delete(want, ".") // the root is the caller's (Manifest.Root)
	delete(got, ".")
	diffMeta(t, "hermesd → hermesd", want, got)
}

// TestFidelityReference: the reference runtime's archive (GNU tar, real
// times, hard links as links, "./" with the root's mode) extracts with
// every name linked, every time (to the second, as GNU format stores
// them), the directories' special bits, the program without setuid and
// setgid (reported), and the root's mode and time in Manifest.Root. And
// GNU tar, as the reference restores, re-creates the links, special bits
// and root mode of hermesd's archive; its entries carry no time, so GNU
// tar dates them 1970-01-01.
func TestFidelityReference(t *testing.T) {
	tarBin := gnuTar(t)
	src, _ := fidelityBrain(t)
	want := meta(t, src)

	t.Run("reference archive into hermesd", func(t *testing.T) {
		var out, stderr bytes.Buffer
		cmd := exec.Command(tarBin, "-c", "--numeric-owner", "-C", src, ".")
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("tar -c: %v: %s", err, stderr.String())
		}
		dst := filepath.Join(t.TempDir(), "out")
		m, err := Extract(t.Context(), bytes.NewReader(out.Bytes()), dst, ExtractOptions{})
		if err != nil {
			t.Fatal(err)
		}
		makeRemovable(t, dst)
		checkManifest(t, dst, m)
		rootInfo, _ := os.Stat(src)
		if m.Root == nil || m.Root.Mode != 0o700 || !m.Root.HasMtime || m.Root.Mtime != rootInfo.ModTime().Truncate(time.Second).UnixNano() || !m.Times {
			t.Errorf("root %+v, want mode 0700 and time %v", m.Root, rootInfo.ModTime())
		}
		if m.Links != 2 || len(m.Stripped) != 1 || m.Stripped[0].Path != "bin/tool" || len(m.Narrowed) != 1 {
			t.Errorf("links %d, stripped %+v, narrowed %+v", m.Links, m.Stripped, m.Narrowed)
		}
		if len(m.Symlinks) != 3 || len(m.Skipped) != 0 {
			t.Errorf("symlinks %+v, skipped %+v: want the three links made", m.Symlinks, m.Skipped)
		}
		w := maps(want)
		w["bin/tool"] = strings.Replace(w["bin/tool"], "6755", "0755", 1)
		w["tmp"] = strings.Replace(w["tmp"], "1777", "1775", 1)
		delete(w, ".")
		got := meta(t, dst)
		delete(got, ".")
		diffMeta(t, "reference → hermesd", w, got)
	})

	t.Run("hermesd archive into the reference", func(t *testing.T) {
		data, _ := writeTar(t, src, WriteOptions{})
		dst := filepath.Join(t.TempDir(), "agent")
		if err := os.Mkdir(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		makeRemovable(t, dst)
		// The reference runtime's restore: tar -x into the agent directory.
		cmd := exec.Command(tarBin, "-x", "--numeric-owner", "-C", dst)
		cmd.Stdin = bytes.NewReader(data)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil || stderr.Len() > 0 {
			t.Fatalf("tar -x: %v: %s", err, stderr.String())
		}
		got := meta(t, dst)
		if len(got) != len(want) {
			t.Errorf("GNU tar extracted %d paths, the brain has %d", len(got), len(want))
		}
		for k, w := range want {
			g, ok := got[k]
			if !ok {
				t.Errorf("%s: not extracted", k)
				continue
			}
			// Hard links and symlinks are links again; every time is 0:
			// the archive has none (what the reference does with a
			// time-less entry).
			if link(g) != link(ownLinks(want)[k]) || secs(g) != 0 || target(g) != target(w) {
				t.Errorf("%s: got %q (brain %q): want the same links and time 0", k, g, w)
			}
		}
		// GNU tar, not root and without -p, applies the umask and drops
		// set-id bits from files: modes are its own; but the root takes
		// the archive's "./".
		if g := got["."]; g[:4] != "0700" {
			t.Errorf("the root: %s, want mode 0700 from the archive's ./", g)
		}
	})
}

// ownLinks is a tree's meta as hermesd's own walker sees it: without
// hard links where it cannot tell them (fsys.Inodes).
func ownLinks(m map[string]string) map[string]string {
	if fsys.Inodes {
		return m
	}
	out := map[string]string{}
	for k, v := range m {
		if i := strings.Index(v, " ="); i >= 0 {
			v = v[:i]
		}
		out[k] = v
	}
	return out
}

func target(v string) string {
	if strings.HasPrefix(v, "-> ") {
		return v[:strings.Index(v, " @")]
	}
	return ""
}

func link(v string) string {
	if i := strings.Index(v, " ="); i >= 0 {
		return v[i:]
	}
	return ""
}

func secs(v string) int64 {
	var s int64
	fmt.Sscanf(v[strings.Index(v, "@")+1:], "%d", &s)
	return s
}

func maps(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
