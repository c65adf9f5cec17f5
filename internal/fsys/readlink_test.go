package fsys

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReadlink: Readlink returns a symlink's target verbatim and the
// link's own Info, never following it, nor a symlink on the way; what is
// not a symlink (any longer) is gone; an overlay's substitute is a file.
func TestReadlink(t *testing.T) {
	implementations(t, func(t *testing.T) {
		path, _ := testTree(t)
		long := strings.Repeat("x/", 2047) + "y"
		for name, target := range map[string]string{"d/odd": "\xff../..\x01", "d/long": long} {
			if err := os.Symlink(target, filepath.Join(path, name)); err != nil {
				t.Fatal(err)
			}
		}
		r := openRoot(t, path)
		for rel, want := range map[string]string{"lf": "f", "ld": "d", "up": "..", "d/odd": "\xff../..\x01", "d/long": long} {
			got, info, err := r.Readlink(rel)
			if err != nil || got != want || info.Mode.Type() != os.ModeSymlink {
				t.Errorf("Readlink(%s) = %q, %v, %v; want %q", rel, got, info.Mode, err, want)
			}
			if st, _ := os.Lstat(filepath.Join(path, rel)); info.Mtime != st.ModTime().UnixNano() {
				t.Errorf("Readlink(%s): mtime %d, the link's is %v", rel, info.Mtime, st.ModTime())
			}
		}
		for _, rel := range []string{"f", "d", "p", "ld/g", "out/secret", "missing"} {
			if _, _, err := r.Readlink(rel); !IsGone(err) {
				t.Errorf("Readlink(%s) = %v, want an error IsGone matches", rel, err)
			}
		}
		ov, err := NewOverlay(map[string]string{"lf": filepath.Join(path, "f")}, []string{"ld"})
		if err != nil {
			t.Fatal(err)
		}
		o, err := OpenRootOverlay(path, ov)
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		for _, rel := range []string{"lf", "ld"} {
			if _, _, err := o.Readlink(rel); !IsGone(err) {
				t.Errorf("overlay: Readlink(%s) = %v, want gone", rel, err)
			}
		}
	})
}

// TestSetSymlinkMtime: the link's own time is set, not its target's.
func TestSetSymlinkMtime(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../f", filepath.Join(dir, "d", "l")); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(filepath.Join(dir, "f"))
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	when := time.Unix(1_600_000_000, 123)
	err = SetSymlinkMtime(root, "d/l", when)
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip("no way to set a symlink's time here")
	}
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Lstat(filepath.Join(dir, "d", "l")); !st.ModTime().Equal(when) {
		t.Errorf("link time %v, want %v", st.ModTime(), when)
	}
	if st, _ := os.Stat(filepath.Join(dir, "f")); !st.ModTime().Equal(before.ModTime()) {
		t.Errorf("the target's time moved: %v", st.ModTime())
	}
}

func TestCheckSymlinkTarget(t *testing.T) {
	for target, ok := range map[string]bool{"a": true, "/abs/../x": true, "\xff": true, strings.Repeat("x", 4095): true,
		"": false, "a\x00b": false, strings.Repeat("x", 4096): false} {
		if err := CheckSymlinkTarget(target); (err == nil) != ok || !ok && !errors.Is(err, ErrSymlinkTarget) {
			t.Errorf("%.20q: %v", target, err)
		}
	}
}
