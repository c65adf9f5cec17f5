package repo

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hermesd/hermesd/internal/diskspace"
)

// envSmallFS marks the re-executed test process that runs in a mount
// namespace of its own.
const envSmallFS = "HERMESD_TEST_SMALLFS"

// TestRestoreSmallFilesystem restores onto a real 16 MiB filesystem (a
// tmpfs mounted in a private mount namespace, so nothing outside the test
// sees it or outlives it): a 3 MiB brain restores (issue 28 item 8: the
// fixed 64 MiB margin refused it forever), and one that would leave less
// than the filesystem's margin is refused before anything is written,
// with the numbers and the rule.
//
// The test process runs itself again in a new mount namespace (and, when
// not root, a new user namespace that maps the caller to root in it, which
// may mount a tmpfs).
func TestRestoreSmallFilesystem(t *testing.T) {
	if os.Getenv(envSmallFS) != "" {
		restoreSmallFS(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRestoreSmallFilesystem$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envSmallFS+"=1")
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	if os.Geteuid() != 0 {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	cmd.SysProcAttr = attr
	out, err := cmd.CombinedOutput()
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSPC) {
		// Neither root nor unprivileged user namespaces: no way to mount.
		t.Skipf("cannot make a mount namespace here (%v); needs root or unprivileged user namespaces", err)
	}
	t.Logf("in a mount namespace of its own:\n%s", out)
	if err != nil {
		t.Fatalf("the test in its mount namespace failed: %v", err)
	}
	if !strings.Contains(string(out), "small filesystem: ok") {
		t.Fatal("the test in its mount namespace did not run")
	}
}

// restoreSmallFS is the test proper, in its mount namespace.
func restoreSmallFS(t *testing.T) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		t.Fatalf("make the mounts private: %v", err)
	}
	small := t.TempDir()
	if err := unix.Mount("hermesd-test", small, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=16m,mode=0700"); err != nil {
		t.Fatalf("mount a 16 MiB tmpfs: %v", err)
	}
	defer unix.Unmount(small, unix.MNT_DETACH)

	snap := func(size int) *fx {
		brain := t.TempDir()
		writeFiles(t, brain, map[string]string{
			"system.md":        "You are a test agent.\n",
			"memory.db":        string(randomBytes(uint64(size), size)),
			"bundle.lock.json": "{}",
		})
		f := newFx(t, 4<<20)
		f.snap(brain, nil)
		return f
	}

	f := snap(3 << 20)
	target := filepath.Join(small, "brain")
	if _, err := f.open().Restore(context.Background(), target, RestoreOptions{}); err != nil {
		t.Fatalf("a 3 MiB restore onto a 16 MiB filesystem: %v", err)
	}
	src, _ := f.restore()
	diffTrees(t, readTree(t, src), readTree(t, target))
	if err := os.RemoveAll(target); err != nil {
		t.Fatal(err)
	}

	big := snap(15 << 20)
	_, err := big.open().Restore(context.Background(), target, RestoreOptions{})
	if !errors.Is(err, diskspace.ErrNoSpace) || !strings.Contains(err.Error(), "5% of its") {
		t.Fatalf("a 15 MiB restore onto a 16 MiB filesystem: %v", err)
	}
	t.Logf("refused: %v", err)
	if ents, _ := os.ReadDir(small); len(ents) != 0 {
		t.Fatalf("a refused restore left %d entries", len(ents))
	}
	t.Log("small filesystem: ok")
}
