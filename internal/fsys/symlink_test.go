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
	for _, l := range [][2]string{{filepath.Join(root, "real"), filepath.Join(root, "link")}, {real, filepath.Join(root, "brainlink")}} {
		if err := os.Symlink(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
		// Links an unprivileged user made (when the test runs as root,
		// such a link would otherwise count as root's own).
		if os.Geteuid() == 0 {
			if err := os.Lchown(l[1], 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
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

// A link that only root controls is part of the system (macOS's /var ->
// /private/var), not an attack.
func TestRootOwnedSystemLinkAccepted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Log("not root: checking that an ordinary user's link is refused instead")
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(root, 0o755)
	os.MkdirAll(filepath.Join(root, "private", "var"), 0o755)
	link := filepath.Join(root, "var")
	if err := os.Symlink(filepath.Join(root, "private", "var"), link); err != nil {
		t.Fatal(err)
	}
	err = CheckNoSymlink(filepath.Join(link, "brain"))
	if os.Geteuid() == 0 && err != nil {
		t.Fatalf("root's link in a root-only directory refused: %v", err)
	}
	if os.Geteuid() != 0 && !errors.Is(err, ErrSymlink) {
		t.Fatalf("an ordinary user's link accepted: %v", err)
	}
	// The same link in a directory others may write is refused.
	os.Chmod(root, 0o777)
	defer os.Chmod(root, 0o755)
	if err := CheckNoSymlink(filepath.Join(link, "brain")); !errors.Is(err, ErrSymlink) {
		t.Fatalf("link in a world-writable directory accepted: %v", err)
	}
}
