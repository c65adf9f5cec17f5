package tarball

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/fsys"
)

// entry describes one path of a test tree.
type entry struct {
	path    string // '/'-separated; a trailing '/' makes a directory
	mode    fs.FileMode
	content string
	link    string // symlink target
}

// longName is a path over 100 bytes (needs a GNU long-name entry).
var longName = "skills/" + strings.Repeat("long-directory-name-", 4) + "/" + strings.Repeat("n", 60) + ".md"

func testTree() []entry {
	return []entry{
		{path: "system.md", mode: 0o644, content: "You are a test agent.\n"},
		{path: "skills/", mode: 0o755},
		{path: "skills/reentrancy.md", mode: 0o600, content: "---\nname: reentrancy\n---\nLook for re-entrant calls.\n"},
		{path: "skills/" + strings.Repeat("long-directory-name-", 4) + "/", mode: 0o750},
		{path: longName, mode: 0o640, content: "long"},
		{path: "ünïcödé/", mode: 0o700},
		{path: "ünïcödé/日本語.md", mode: 0o444, content: "konnichiwa"},
		{path: "a.md", mode: 0o755, content: strings.Repeat("big ", 40_000)}, // > smallMax: streamed
		{path: "a-b/", mode: 0o755},
		{path: "a/", mode: 0o555}, // read-only directory with contents
		{path: "a/x", mode: 0o644, content: ""},
		{path: "empty/", mode: 0o711},
		{path: ".hidden", mode: 0o600, content: "dot"},
		{path: "bundle.lock.json", mode: 0o644, content: `{"bundleHash":"0x00"}`},
		{path: "receipts.ndjson", mode: 0o644, content: ""},
		{path: "link", link: "system.md"},
	}
}

// build creates entries below root in the given order, then applies the
// modes (directories last, deepest first, so read-only ones can be filled).
func build(t testing.TB, root string, ents []entry) {
	t.Helper()
	for _, e := range ents {
		p := filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(e.path, "/")))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case e.link != "":
			err = os.Symlink(e.link, p)
		case strings.HasSuffix(e.path, "/"):
			err = os.MkdirAll(p, 0o755)
		default:
			err = os.WriteFile(p, []byte(e.content), 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var dirs []entry
	for _, e := range ents {
		p := filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(e.path, "/")))
		switch {
		case e.link != "":
		case strings.HasSuffix(e.path, "/"):
			dirs = append(dirs, e)
		default:
			if err := os.Chmod(p, e.mode); err != nil {
				t.Fatal(err)
			}
		}
	}
	slices.SortFunc(dirs, func(a, b entry) int { return strings.Compare(b.path, a.path) })
	for _, e := range dirs {
		if err := os.Chmod(filepath.Join(root, filepath.FromSlash(e.path)), e.mode); err != nil {
			t.Fatal(err)
		}
	}
	makeRemovable(t, root)
}

// makeRemovable restores owner write permission before t.TempDir's
// cleanup, which would otherwise fail on read-only directories when the
// tests do not run as root.
func makeRemovable(t testing.TB, root string) {
	t.Cleanup(func() {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o755)
			}
			return nil
		})
	})
}

// state is what the tests compare of a tree: type, permission bits and
// contents of every path.
func state(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fi.Mode().String() + " " + string(b)
		default:
			out[rel] = fi.Mode().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkManifest verifies that m describes exactly the files and
// directories below root.
func checkManifest(t testing.TB, root string, m Manifest, ignore ...string) {
	t.Helper()
	files := map[string]File{}
	for _, f := range m.Files {
		files[f.Path] = f
	}
	dirs := map[string]Dir{}
	for _, d := range m.Dirs {
		dirs[d.Path] = d
	}
	links := map[string]Symlink{}
	for _, l := range m.Symlinks {
		links[l.Path] = l
	}
	seen, seenLinks := 0, 0
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if slices.Contains(ignore, rel) {
			return nil
		}
		fi, _ := os.Lstat(p)
		switch {
		case fi.Mode().IsRegular():
			f, ok := files[rel]
			b, _ := os.ReadFile(p)
			if !ok || f.Size != int64(len(b)) || f.SHA256 != sha256.Sum256(b) || f.Mode != fi.Mode().Perm() ||
				f.HasMtime && f.Mtime != fi.ModTime().UnixNano() {
				t.Errorf("file %s: manifest %+v (present %v), disk %d bytes mode %v time %v", rel, f, ok, len(b), fi.Mode(), fi.ModTime())
			}
			seen++
		case fi.IsDir():
			d, ok := dirs[rel]
			if !ok || d.Mode != fi.Mode()&fsys.Meta || d.HasMtime && d.Mtime != fi.ModTime().UnixNano() {
				t.Errorf("dir %s: manifest %+v (present %v), disk %v %v", rel, d, ok, fi.Mode(), fi.ModTime())
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			l, ok := links[rel]
			target, _ := os.Readlink(p)
			if !ok || l.Target != target || l.HasMtime && l.Mtime != fi.ModTime().UnixNano() {
				t.Errorf("symlink %s: manifest %+v (present %v), disk -> %q %v", rel, l, ok, target, fi.ModTime())
			}
			seenLinks++
		default:
			t.Errorf("%s: unexpected %v on disk", rel, fi.Mode())
		}
		return nil
	})
	if seen != len(m.Files) || seenLinks != len(m.Symlinks) {
		t.Errorf("manifest lists %d files and %d symlinks, disk has %d and %d", len(m.Files), len(m.Symlinks), seen, seenLinks)
	}
}

// archive builds a tar stream from headers (with optional bodies).
type member struct {
	hdr  tar.Header
	body string
}

func archive(t testing.TB, members ...member) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range members {
		h := m.hdr
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(m.body))
		}
		if h.ModTime.IsZero() {
			h.ModTime = time.Unix(1_700_000_000, 0)
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if m.body != "" {
			if _, err := tw.Write([]byte(m.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func reg(name, body string) member {
	return member{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644}, body: body}
}

func dirm(name string) member {
	return member{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755}}
}
