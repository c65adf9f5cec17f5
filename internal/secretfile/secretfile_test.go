package secretfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hermesd/hermesd/internal/fsys"
)

// TestReadModes pins the rule: the owner may have any permission, the
// group may read, others nothing, and the refusal says how to fix it
// without quoting the secret.
func TestReadModes(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		mode fs.FileMode
		ok   bool
	}{
		{0o600, true}, {0o400, true}, {0o640, true}, {0o440, true}, {0o700, true}, {0o740, true},
		{0o644, false}, {0o604, false}, {0o602, false}, {0o601, false}, {0o660, false}, {0o620, false},
		{0o610, false}, {0o650, false}, {0o670, false}, {0o664, false}, {0o666, false}, {0o444, false},
	} {
		p := filepath.Join(dir, tc.mode.String())
		if err := os.WriteFile(p, []byte("s3cret-value\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, tc.mode); err != nil {
			t.Fatal(err)
		}
		if Allowed(tc.mode) != tc.ok {
			t.Errorf("Allowed(%04o) = %v", tc.mode, !tc.ok)
		}
		b, err := Read(p, 64)
		switch {
		case tc.ok && (err != nil || string(b) != "s3cret-value\n"):
			t.Errorf("%04o refused: %v", tc.mode, err)
		case !tc.ok && !errors.Is(err, ErrMode):
			t.Errorf("%04o: %v, want ErrMode", tc.mode, err)
		case !tc.ok && (!strings.Contains(err.Error(), "chmod 600 "+p) || strings.Contains(err.Error(), "s3cret")):
			t.Errorf("%04o: the error does not say how to fix it, or quotes the secret: %v", tc.mode, err)
		}
	}
}

func TestReadRefuses(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, n int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Repeat("k", n)), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if b, err := Read(write("exact", 100), 100); err != nil || len(b) != 100 {
		t.Errorf("a file of exactly the bound: %d bytes, %v", len(b), err)
	}
	if _, err := Read(write("over", 101), 100); !errors.Is(err, ErrTooLarge) || strings.Contains(err.Error(), "kkk") {
		t.Errorf("a file over the bound: %v", err)
	}
	if _, err := Read(dir, 100); !errors.Is(err, ErrNotRegular) {
		t.Errorf("a directory: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// A plain open of a fifo would block until a writer comes (this test
	// would hang); it is refused at once.
	if _, err := Read(fifo, 100); !errors.Is(err, ErrNotRegular) {
		t.Errorf("a fifo: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "missing"), 100); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
	// A link to a secret file is followed (Kubernetes mounts Secrets as
	// links into a timestamped directory); the target's mode decides.
	link := filepath.Join(dir, "link")
	if err := os.Symlink(write("target", 10), link); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(link, 100); err != nil || len(b) != 10 {
		t.Errorf("a link to a secret file: %v", err)
	}
	if err := os.Chmod(filepath.Join(dir, "target"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(link, 100); !errors.Is(err, ErrMode) {
		t.Errorf("a link to a world-readable file: %v", err)
	}
}

func TestCreate(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "new.key")
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	if err := Create(p, []byte("secret\n")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	if b, err := Read(p, 100); err != nil || string(b) != "secret\n" {
		t.Fatalf("read back %q, %v", b, err)
	}
	err = Create(p, []byte("other\n"))
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "refusing to overwrite") {
		t.Errorf("overwrite: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "secret\n" {
		t.Errorf("the existing file was changed: %q", b)
	}
	if err := Create(filepath.Join(dir, "missing", "x"), []byte("s")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing directory: %v", err)
	}
}

// TestReadOwner: a key file, or a link on the way to it, that belongs to
// another user is refused, as the state directory is (the same rule for
// both, fsys.CheckOwner); root's are accepted (systemd
// credentials, Kubernetes Secret mounts), and so are hermesd's own.
func TestReadOwner(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "key")
	os.WriteFile(key, []byte("s3cret-value\n"), 0o600)
	link := filepath.Join(dir, "link")
	os.Symlink(key, link)
	for _, p := range []string{key, link} {
		if _, err := Read(p, 1024); err != nil {
			t.Fatalf("own %s: %v", p, err)
		}
	}
	if os.Geteuid() != 0 {
		t.Log("not root: files of another user cannot be made here; root's CI run covers them")
		return
	}
	const nobody = 65534
	// Another user's link to our key: they could point it elsewhere.
	os.Lchown(link, nobody, nobody)
	if _, err := Read(link, 1024); !errors.Is(err, fsys.ErrForeignOwner) || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("another user's link: %v", err)
	}
	// Another user's key, read directly or through root's link.
	os.Lchown(link, 0, 0)
	os.Chown(key, nobody, nobody)
	for _, p := range []string{key, link} {
		_, err := Read(p, 1024)
		if !errors.Is(err, fsys.ErrForeignOwner) || !strings.Contains(err.Error(), "uid 65534") || strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("another user's key via %s: %v", p, err)
		}
	}
	// Group read for root's file, as systemd and Kubernetes deliver them.
	os.Chown(key, 0, nobody)
	os.Chmod(key, 0o440)
	if _, err := Read(link, 1024); err != nil {
		t.Fatalf("root's 0440 key: %v", err)
	}
}
