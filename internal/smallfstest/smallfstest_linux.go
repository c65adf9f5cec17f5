//go:build linux

package smallfstest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// env marks the re-executed test process, naming the test it runs.
const env = "HERMESD_TEST_SMALLFS"

// okLine is what the re-executed test prints once fn returned.
const okLine = "small filesystem: ok"

// Run runs fn with the root of a fresh tmpfs of size bytes (mode 0700).
// The test process runs itself again, only this test (a top-level one),
// in a new mount namespace (and, when not root, a new user namespace
// mapping the caller to root in it, which may mount a tmpfs); fn runs
// there, and Run fails the test here if it failed there. Where no mount
// namespace can be made (neither root nor unprivileged user namespaces),
// the test is skipped, saying why.
func Run(t *testing.T, size int64, fn func(t *testing.T, dir string)) {
	t.Helper()
	if strings.Contains(t.Name(), "/") {
		t.Fatalf("smallfstest.Run in subtest %s: only a top-level test can be re-executed alone", t.Name())
	}
	if os.Getenv(env) == t.Name() {
		inNamespace(t, size, fn)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env+"="+t.Name())
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	if os.Geteuid() != 0 {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	cmd.SysProcAttr = attr
	out, err := cmd.CombinedOutput()
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSPC) {
		t.Skipf("cannot make a mount namespace here (%v); needs root or unprivileged user namespaces", err)
	}
	t.Logf("in a mount namespace of its own:\n%s", out)
	if err != nil {
		t.Fatalf("the test in its mount namespace failed: %v", err)
	}
	if !strings.Contains(string(out), okLine) {
		t.Fatal("the test in its mount namespace did not run")
	}
}

// inNamespace is the re-executed side: mount the tmpfs and run fn on it.
func inNamespace(t *testing.T, size int64, fn func(t *testing.T, dir string)) {
	t.Helper()
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		t.Fatalf("make the mounts private: %v", err)
	}
	dir := t.TempDir()
	if err := unix.Mount("hermesd-test", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Fatalf("mount a tmpfs of %d bytes: %v", size, err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	fn(t, dir)
	if !t.Failed() {
		t.Log(okLine)
	}
}
