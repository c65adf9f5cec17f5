package fsys

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// overlayTree is testTree plus files to substitute, outside the root.
func overlayTree(t *testing.T) (root, subs string) {
	t.Helper()
	root, _ = testTree(t)
	subs = t.TempDir()
	for name, c := range map[string]string{"f": "copy of f", "new": "a file the tree lacks", "g": "copy of g"} {
		if err := os.WriteFile(filepath.Join(subs, name), []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return root, subs
}

func readAll(t *testing.T, r Root, rel string) (string, Info) {
	t.Helper()
	f, err := r.Open(rel)
	if err != nil {
		t.Fatalf("Open(%s): %v", rel, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), info
}

func TestOverlay(t *testing.T) {
	implementations(t, func(t *testing.T) {
		path, subs := overlayTree(t)
		ov, err := NewOverlay(map[string]string{
			"f":     filepath.Join(subs, "f"),   // a file of the tree
			"new":   filepath.Join(subs, "new"), // a path the tree lacks
			"d/g":   filepath.Join(subs, "g"),   // in a subdirectory
			"e/new": filepath.Join(subs, "new"), // in an empty directory
		}, []string{"lf", "d/missing"})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := ov.Paths(), []string{"d/g", "d/missing", "e/new", "f", "lf", "new"}; !slices.Equal(got, want) {
			t.Errorf("Paths = %q, want %q", got, want)
		}
		r, err := OpenRootOverlay(path, ov)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()

		for rel, want := range map[string]string{"f": "copy of f", "new": "a file the tree lacks", "d/g": "copy of g", "e/new": "a file the tree lacks"} {
			got, info := readAll(t, r, rel)
			if got != want || !info.Overlay || !info.Mode.IsRegular() || info.Mode.Perm() != 0o600 {
				t.Errorf("%s: read %q, Info %+v; want %q from the substitute", rel, got, info, want)
			}
			for name, stat := range map[string]func(string) (Info, error){"Stat": r.Stat, "Lstat": r.Lstat} {
				if si, err := stat(rel); err != nil || si != info {
					t.Errorf("%s(%s) = %+v, %v; want %+v", name, rel, si, err, info)
				}
			}
			f, err := r.OpenFile(rel, os.O_RDONLY)
			if err != nil {
				t.Fatalf("OpenFile(%s): %v", rel, err)
			}
			b, _ := io.ReadAll(f)
			f.Close()
			if string(b) != want {
				t.Errorf("OpenFile(%s) read %q", rel, b)
			}
		}

		// Hidden paths, and paths below a substitute, do not exist.
		for _, rel := range []string{"lf", "d/missing", "f/x", "new/x"} {
			if _, err := r.Open(rel); !IsGone(err) {
				t.Errorf("Open(%s) = %v, want a gone error", rel, err)
			}
			if _, err := r.Stat(rel); !IsGone(err) {
				t.Errorf("Stat(%s) = %v, want a gone error", rel, err)
			}
			if _, err := r.Lstat(rel); !IsGone(err) {
				t.Errorf("Lstat(%s) = %v, want a gone error", rel, err)
			}
		}
		if _, _, err := r.ReadDir("f"); !IsGone(err) {
			t.Errorf("ReadDir of a substitute = %v, want a gone error", err)
		}

		// Listings drop hidden paths and list substitutes as regular files.
		list := func(rel string) map[string]fs.FileMode {
			ents, _, err := r.ReadDir(rel)
			if err != nil {
				t.Fatalf("ReadDir(%q): %v", rel, err)
			}
			m := map[string]fs.FileMode{}
			for _, e := range ents {
				if _, dup := m[e.Name]; dup {
					t.Errorf("ReadDir(%q) lists %s twice", rel, e.Name)
				}
				m[e.Name] = e.Type
			}
			return m
		}
		top := list("")
		if _, ok := top["lf"]; ok {
			t.Errorf("hidden lf listed: %v", top)
		}
		if top["f"] != 0 || top["new"] != 0 || top["d"] != fs.ModeDir {
			t.Errorf("ReadDir(\"\") = %v", top)
		}
		if got := list("d"); len(got) != 1 || got["g"] != 0 {
			t.Errorf("ReadDir(d) = %v", got)
		}
		if got := list("e"); len(got) != 1 || got["new"] != 0 {
			t.Errorf("ReadDir(e) = %v", got)
		}

		// The tree's own files are untouched, and their Info says so.
		if info, err := r.Stat("d"); err != nil || info.Overlay || !info.Mode.IsDir() {
			t.Errorf("Stat(d) = %+v, %v", info, err)
		}
		plain := openRoot(t, path)
		a, _ := plain.Stat("f")
		b, _ := r.Stat("f")
		if a == b {
			t.Errorf("the substitute's Info equals the tree's: %+v", a)
		}
	})
}

// TestOverlayMissingSubstitute: a substitute that cannot be opened fails
// the walk instead of making the file vanish from it.
func TestOverlayMissingSubstitute(t *testing.T) {
	implementations(t, func(t *testing.T) {
		path, subs := overlayTree(t)
		ov, err := NewOverlay(map[string]string{"f": filepath.Join(subs, "deleted")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := OpenRootOverlay(path, ov)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if _, err := r.Open("f"); err == nil || IsGone(err) {
			t.Errorf("Open = %v, want an error that is not IsGone", err)
		}
		if _, err := r.Stat("f"); err == nil || IsGone(err) {
			t.Errorf("Stat = %v, want an error that is not IsGone", err)
		}
		if err := os.Symlink(filepath.Join(path, "d", "g"), filepath.Join(subs, "deleted")); err != nil {
			t.Fatal(err)
		}
		if f, err := r.Open("f"); err == nil {
			f.Close()
			t.Error("a symlink substitute was followed")
		}
	})
}

func TestNewOverlayRefuses(t *testing.T) {
	abs := filepath.Join(t.TempDir(), "x")
	for name, c := range map[string]struct {
		subst map[string]string
		hide  []string
	}{
		"bad name":          {subst: map[string]string{"../x": abs}},
		"bad hidden name":   {hide: []string{"a//b"}},
		"relative target":   {subst: map[string]string{"a": "x"}},
		"both":              {subst: map[string]string{"a": abs}, hide: []string{"a"}},
		"below substituted": {subst: map[string]string{"a": abs, "a/b": abs}},
		"below hidden":      {subst: map[string]string{"a/b": abs}, hide: []string{"a"}},
	} {
		if _, err := NewOverlay(c.subst, c.hide); err == nil {
			t.Errorf("%s: NewOverlay succeeded", name)
		}
	}
}

func TestOpenFile(t *testing.T) {
	implementations(t, func(t *testing.T) {
		path, _ := testTree(t)
		r := openRoot(t, path)
		f, err := r.OpenFile("d/g", os.O_RDWR)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("W"), 0); err != nil {
			t.Error(err)
		}
		f.Close()
		if b, _ := os.ReadFile(filepath.Join(path, "d", "g")); string(b) != "World" {
			t.Errorf("after a write through OpenFile: %q", b)
		}
		for _, rel := range []string{"lf", "ld/g", "out/secret", "missing"} {
			if f, err := r.OpenFile(rel, os.O_RDWR); err == nil {
				f.Close()
				t.Errorf("OpenFile(%s) succeeded", rel)
			}
		}
		for _, flag := range []int{os.O_RDWR | os.O_CREATE, os.O_WRONLY, os.O_RDONLY | os.O_TRUNC} {
			if f, err := r.OpenFile("new", flag); err == nil || !errors.Is(err, syscall.EINVAL) {
				if f != nil {
					f.Close()
				}
				t.Errorf("OpenFile(flag %#x) = %v, want EINVAL", flag, err)
			}
		}
	})
}
