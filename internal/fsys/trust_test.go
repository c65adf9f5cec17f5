package fsys

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// nobody is the user a root test hands files to, as if another user had
// made them.
const nobody = 65534

func TestCheckOwner(t *testing.T) {
	dir := t.TempDir()
	mine := filepath.Join(dir, "mine")
	os.WriteFile(mine, nil, 0o600)
	fi, _ := os.Lstat(mine)
	if err := CheckOwner(mine, fi); err != nil {
		t.Fatalf("own file: %v", err)
	}
	if fi, err := os.Stat("/"); err != nil || CheckOwner("/", fi) != nil {
		t.Fatalf("root's directory: %v", CheckOwner("/", fi))
	}
	if os.Geteuid() != 0 {
		t.Log("not root: a file of another user cannot be made here; root's CI run covers it")
		return
	}
	theirs := filepath.Join(dir, "theirs")
	os.WriteFile(theirs, nil, 0o600)
	if err := os.Chown(theirs, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	fi, _ = os.Lstat(theirs)
	err := CheckOwner(theirs, fi)
	if !errors.Is(err, ErrForeignOwner) || !strings.Contains(err.Error(), "uid 65534") {
		t.Fatalf("another user's file: %v", err)
	}
}

func TestCheckLinkOwners(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// Kubernetes' layout: key -> ..data/key, ..data -> ..2026_01_01.
	os.Mkdir(filepath.Join(dir, "..2026_01_01"), 0o755)
	os.WriteFile(filepath.Join(dir, "..2026_01_01", "key"), []byte("k"), 0o600)
	os.Symlink("..2026_01_01", filepath.Join(dir, "..data"))
	os.Symlink("..data/key", filepath.Join(dir, "key"))
	os.Symlink(filepath.Join(dir, "key"), filepath.Join(dir, "abs"))
	os.Symlink("loop", filepath.Join(dir, "loop"))
	for _, p := range []string{"key", "abs", "..data/../key", "missing/key"} {
		if err := CheckLinkOwners(filepath.Join(dir, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if err := CheckLinkOwners(filepath.Join(dir, "loop")); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("a link to itself: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Log("not root: links of another user cannot be made here; root's CI run covers them")
		return
	}
	// Any link on the way: the last, an inner one, one reached through
	// an absolute target.
	for link, paths := range map[string][]string{"key": {"key", "abs"}, "..data": {"key", "abs"}, "abs": {"abs"}} {
		if err := os.Lchown(filepath.Join(dir, link), nobody, nobody); err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			if err := CheckLinkOwners(filepath.Join(dir, p)); !errors.Is(err, ErrForeignOwner) || !strings.Contains(err.Error(), link+" (a symbolic link)") {
				t.Errorf("%s with %s another user's: %v", p, link, err)
			}
		}
		os.Lchown(filepath.Join(dir, link), 0, 0)
	}
}

func TestSystemDir(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	os.Symlink("/etc", filepath.Join(dir, "etc"))
	os.Symlink("/", filepath.Join(dir, "root"))
	for _, tt := range []struct {
		p      string
		brain  bool // refused as a brain or state directory
		source bool // refused as a seed directory
	}{
		{"/", true, true},
		{"/etc", true, true},
		{"/etc/", true, true},
		{"/etc/ssh", true, true},
		{"/etc/hermesd/brain", true, true},
		{"/usr", true, true},
		{"/usr/share/hermesd/seed", true, false},
		{"/usr/local", true, true},
		{"/usr/local/var/hermesd", false, false},
		{"/bin", true, true},
		{"/lib/x", true, false},
		{"/proc/self", true, true},
		{"/sys/fs", true, true},
		{"/dev/shm/brain", true, true},
		{"/boot/x", true, true},
		{"/var", true, true},
		{"/var/lib", true, true},
		{"/var/lib/hermesd", false, false},
		{"/var/lib/../lib", true, true},
		{"/tmp", true, true},
		{"/run", true, true},
		{"/run/hermesd", false, false},
		{"/srv", true, true},
		{"/srv/agents/auditor", false, false},
		{"/home", true, true},
		{"/root", true, true},
		{"/root/agents/a", false, false},
		{"/private/etc", true, true},
		{filepath.Join(dir, "brain"), false, false},
		{filepath.Join(dir, "etc"), true, true},               // resolves to /etc
		{filepath.Join(dir, "etc", "new", "dir"), true, true}, // below it, not there yet
		{filepath.Join(dir, "root"), true, true},              // resolves to /
		{filepath.Join(dir, "root", "var", "lib"), true, true},
	} {
		err := CheckSystemDir(tt.p)
		if got := errors.Is(err, ErrUnsafeDir); got != tt.brain {
			t.Errorf("%s as a brain: %v", tt.p, err)
		}
		err = CheckSystemSource(tt.p)
		if got := errors.Is(err, ErrUnsafeDir); got != tt.source {
			t.Errorf("%s as a seed: %v", tt.p, err)
		}
	}
	err = CheckSystemDir("/etc")
	if want := "/etc is a system directory"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("message %q, want it to start %q", err, want)
	}
}

func TestCheckNotHome(t *testing.T) {
	home, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	link := filepath.Join(t.TempDir(), "home")
	os.Symlink(home, link)
	for p, bad := range map[string]bool{home: true, home + "/": true, link: true, filepath.Join(home, "agents", "a"): false} {
		if err := CheckNotHome(p); errors.Is(err, ErrUnsafeDir) != bad {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestCheckNotPublic(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mk := func(p string, mode os.FileMode) string {
		p = filepath.Join(dir, p)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	private := mk("private", 0o755)
	group := mk("group", 0o775)
	public := mk("public", 0o777)
	sticky := mk("sticky", os.ModeSticky|0o777)
	inSticky := filepath.Join(sticky, "brain")
	os.Mkdir(inSticky, 0o755)
	inPublic := filepath.Join(public, "brain")
	os.Mkdir(inPublic, 0o755)
	for p, bad := range map[string]bool{
		private: false, group: false, inSticky: false, filepath.Join(private, "missing"): false,
		public: true, sticky: true, inPublic: true, filepath.Join(public, "missing", "brain"): true,
	} {
		err := CheckNotPublic(p)
		if errors.Is(err, ErrUnsafeDir) != bad {
			t.Errorf("%s: %v", p, err)
		}
	}
	if err := CheckNotPublic(sticky); err == nil || !strings.Contains(err.Error(), "mode 1777") {
		t.Errorf("sticky: %v", err)
	}
}
