package fsys

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckNoSymlink(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(root, "real", "brain")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "real"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(root, "brainlink")); err != nil {
		t.Fatal(err)
	}
	for p, bad := range map[string]bool{
		real:                                     false,
		filepath.Join(root, "missing", "a", "b"): false,
		filepath.Join(root, "link", "brain"):     true, // a parent is a link
		filepath.Join(root, "brainlink"):         true, // the path itself
		filepath.Join(root, "link", "new"):       true, // a new dir below a link
	} {
		err := CheckNoSymlink(p)
		if got := errors.Is(err, ErrSymlink); got != bad {
			t.Errorf("%s: %v", p, err)
		}
	}
	if err := CheckNoSymlink("relative/path"); err == nil {
		t.Error("relative path accepted")
	}
}
