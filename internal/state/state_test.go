package state

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/fsys"
)

func TestLockExcludesSecondOpen(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state")
	d, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(p, Options{})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("error does not name the holder: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d2, err := Open(p, Options{})
	if err != nil {
		t.Fatalf("Open after Close = %v", err)
	}
	d2.Close()
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("state dir mode = %v, %v", st.Mode(), err)
	}
}

func TestAgentStateRoundTrip(t *testing.T) {
	d, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	dir, err := d.AgentDir("auditor")
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadAgent(dir)
	if err != nil || s.Last != nil || s.Pending != nil {
		t.Fatalf("fresh state = %+v, %v", s, err)
	}
	now := time.Unix(1700000000, 0).UTC()
	s.Last = &Snapshot{BlobID: "b", BundleHash: "0x1", Size: 3, EndEpoch: 9, CreatedAt: now}
	s.Pending = &Pointer{Value: "b", Expected: "a", Since: now}
	if err := SaveAgent(dir, s); err != nil {
		t.Fatal(err)
	}
	back, err := LoadAgent(dir)
	if err != nil {
		t.Fatal(err)
	}
	if *back.Last != *s.Last || *back.Pending != *s.Pending {
		t.Fatalf("round trip: %+v", back)
	}
	if err := os.WriteFile(filepath.Join(dir, stateFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadAgent(dir); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("corrupt state accepted: %v", err)
	}
}

// TestUnsafeStateDirRefused: a state directory others can write to, or one
// reached through a symlink, is refused at start (issue: a planted symlink
// made hermesd append attacker text to a root-owned file).
func TestUnsafeStateDirRefused(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o777, 0o770, 0o720, 0o702} {
		p := filepath.Join(root, fmt.Sprintf("m%o", mode))
		os.Mkdir(p, 0o700)
		os.Chmod(p, mode)
		if d, err := Open(p, Options{}); !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "chmod 700") {
			if d != nil {
				d.Close()
			}
			t.Errorf("mode %o: %v", mode, err)
		}
	}
	// A subdirectory too.
	p := filepath.Join(root, "sub")
	os.MkdirAll(filepath.Join(p, "agents"), 0o700)
	os.Chmod(filepath.Join(p, "agents"), 0o777)
	if _, err := Open(p, Options{}); !errors.Is(err, ErrUnsafe) {
		t.Errorf("world-writable agents/: %v", err)
	}
	// Through a symlink: refused unless allowed.
	real := filepath.Join(root, "real")
	os.Mkdir(real, 0o700)
	link := filepath.Join(root, "link")
	os.Symlink(real, link)
	if os.Geteuid() == 0 {
		os.Lchown(link, 65534, 65534) // planted by an unprivileged user
	}
	if _, err := Open(link, Options{}); !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "allow_symlinks") {
		t.Errorf("symlinked state dir: %v", err)
	}
	d, err := Open(link, Options{AllowSymlinks: true})
	if err != nil {
		t.Fatalf("allowed symlink: %v", err)
	}
	d.Close()
}

// TestPlantedSymlinkNotFollowed: a link planted where a state file goes is
// refused, not followed.
func TestPlantedSymlinkNotFollowed(t *testing.T) {
	root := t.TempDir()
	victim := filepath.Join(root, "victim")
	os.WriteFile(victim, []byte(`{"published":"attacker"}`), 0o600)
	p := filepath.Join(root, "state")
	d, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	dir, _ := d.AgentDir("a")
	os.Symlink(victim, filepath.Join(dir, "state.json"))
	if _, err := LoadAgent(dir); !errors.Is(err, ErrUnsafe) {
		t.Fatalf("LoadAgent through a link: %v", err)
	}
	d.Close()
	os.Remove(filepath.Join(p, "hermesd.lock"))
	os.Symlink(victim, filepath.Join(p, "hermesd.lock"))
	if _, err := Open(p, Options{}); !errors.Is(err, ErrUnsafe) {
		t.Fatalf("lock through a link: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != `{"published":"attacker"}` {
		t.Fatalf("victim changed: %q", b)
	}
}

// TestCloseReleasesLockHeldByChild: a process forked while the state was
// open (the moment between fork and exec, made long here by handing the
// descriptor to a running child) must not keep the lock after Close.
func TestCloseReleasesLockHeldByChild(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state")
	d, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command("sleep", "600")
	child.ExtraFiles = []*os.File{d.lock}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		child.Process.Kill()
		child.Wait()
	})
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d2, err := Open(p, Options{})
	if err != nil {
		t.Fatalf("Open after Close, with a child holding a copy of the old descriptor: %v", err)
	}
	d2.Close()
}

// TestStateDirOwnerAndSystemDirs: a state directory of another user is
// refused by the rule key files follow too (fsys.CheckOwner), and so is a
// system directory (/etc must not be taken, with hermesd.lock and
// agents/ created in it), by its name or through a link;
// nothing is created in either.
func TestStateDirOwnerAndSystemDirs(t *testing.T) {
	for _, p := range []string{"/etc", "/", "/usr/lib/hermesd", "/proc/self"} {
		if d, err := Open(p, Options{}); !errors.Is(err, ErrUnsafe) || !errors.Is(err, fsys.ErrUnsafeDir) || !strings.Contains(err.Error(), "allow_unsafe_dirs") {
			if d != nil {
				d.Close()
			}
			t.Errorf("%s: %v", p, err)
		}
	}
	if _, err := os.Lstat("/etc/hermesd.lock"); err == nil {
		t.Error("/etc/hermesd.lock exists")
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "state")
	os.Symlink("/etc", link)
	if _, err := Open(link, Options{AllowSymlinks: true}); !errors.Is(err, fsys.ErrUnsafeDir) {
		t.Errorf("a link to /etc: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Log("not root: a directory of another user cannot be made here; root's CI run covers it")
		return
	}
	theirs := filepath.Join(root, "theirs")
	os.Mkdir(theirs, 0o700)
	os.Chown(theirs, 65534, 65534)
	if _, err := Open(theirs, Options{}); !errors.Is(err, ErrUnsafe) || !errors.Is(err, fsys.ErrForeignOwner) || !strings.Contains(err.Error(), "uid 65534") {
		t.Errorf("another user's state directory: %v", err)
	}
	if ents, _ := os.ReadDir(theirs); len(ents) != 0 {
		t.Errorf("created in another user's directory: %v", ents)
	}
}
