package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/wait"
	"github.com/hermesd/hermesd/internal/walrus"
)

// referenceSnapshot stores a snapshot as the reference runtime takes it:
// its lock (naming the previous snapshot), the brain tarred by GNU tar
// (tar -c --numeric-owner -C dir .), a v1 envelope. It returns the blob id.
func (w *e2eWorld) referenceSnapshot(t *testing.T, dir string, version int, parent string, withLock bool) string {
	t.Helper()
	lockPath := filepath.Join(dir, "bundle.lock.json")
	os.Remove(lockPath)
	if withLock {
		lock := fmt.Sprintf("{\n  \"bundleHash\": %q,\n  \"version\": %d,\n  \"lastUpdated\": %d", dirHash(t, dir), version, 1700000000000+int64(version))
		if parent != "" {
			lock += fmt.Sprintf(",\n  \"walrusSnapshotBlobId\": %q", parent)
		}
		if err := os.WriteFile(lockPath, []byte(lock+"\n}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tarBin, err := exec.LookPath("tar")
	if err != nil {
		t.Fatalf("GNU tar: %v", err)
	}
	var out, stderr bytes.Buffer
	cmd := exec.Command(tarBin, "-c", "--numeric-owner", "-C", dir, ".")
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tar -c: %v: %s", err, stderr.String())
	}
	key, err := cipher.ReadKeyFile(w.dn.KeyPath)
	if err != nil {
		t.Fatal(err)
	}
	blob, err := cipher.SealV1(key, out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	c := w.walrusClient(walrus.Config{Epochs: 5})
	res, err := c.Store(t.Context(), walrus.BytesBody(blob))
	if err != nil {
		t.Fatal(err)
	}
	return res.BlobID
}

// TestE2EReferenceSnapshot: an agent whose brain the reference runtime
// snapshotted three times (a file under two names, symlinks, a 0700
// brain) cold-restores with 'hermesd restore' — every name, the link, the
// symlinks as symlinks, the mode — and 'hermesd log' shows the three
// snapshots its locks chain. A snapshot without a lock is refused naming
// --unverified, and installed with it, saying it is not verified.
func TestE2EReferenceSnapshot(t *testing.T) {
	t.Parallel()
	token := uint64(3)
	w := newE2EWorld(t, devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth", TokenID: &token})
	cfg := w.dn.ConfigPath
	src := filepath.Join(t.TempDir(), "reference")
	if err := os.MkdirAll(filepath.Join(src, "skills"), 0o700); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{"skills/current.md": "../system.md", "hosts": "/etc/hosts", "gone": "../../nowhere"}
	for p, target := range links {
		if err := os.Symlink(target, filepath.Join(src, p)); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for i := range 3 {
		if err := os.WriteFile(filepath.Join(src, "system.md"), []byte(fmt.Sprintf("state %d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			if err := os.Link(filepath.Join(src, "system.md"), filepath.Join(src, "skills", "alias.md")); err != nil {
				t.Fatal(err)
			}
		}
		parent := ""
		if i > 0 {
			parent = ids[i-1]
		}
		ids = append(ids, w.referenceSnapshot(t, src, i+1, parent, true))
	}
	if err := os.Chmod(src, 0o700); err != nil {
		t.Fatal(err)
	}
	// The newest again, now with the brain directory at 0700.
	ids[2] = w.referenceSnapshot(t, src, 3, ids[1], true)
	w.setPointer(t, "alpha.hermes.eth", ids[2])

	brain := w.brain("alpha")
	os.RemoveAll(brain)
	code, stdout, stderr := w.runOnce("restore", "-config", cfg, "alpha")
	if code != 0 || !strings.Contains(stdout, "restored") {
		t.Fatalf("restore: exit %d\n%s%s", code, stdout, stderr)
	}
	a, errA := os.Stat(filepath.Join(brain, "system.md"))
	b, errB := os.Stat(filepath.Join(brain, "skills", "alias.md"))
	if errA != nil || errB != nil || a.Sys().(*syscall.Stat_t).Ino != b.Sys().(*syscall.Stat_t).Ino {
		t.Errorf("system.md and skills/alias.md are not one file: %v %v", errA, errB)
	}
	if st, err := os.Stat(brain); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("brain directory %v (%v), want 0700", st.Mode(), err)
	}
	sameSymlinks(t, brain, links)
	if strings.Contains(stdout, "skipped") {
		t.Errorf("restore skipped entries:\n%s", stdout)
	}

	code, stdout, stderr = w.runOnce("log", "-config", cfg, "alpha")
	if code != 0 {
		t.Fatalf("log: exit %d: %s", code, stderr)
	}
	for _, id := range ids {
		if !strings.Contains(stdout, id) {
			t.Errorf("log does not list %s:\n%s", id, stdout)
		}
	}

	// A snapshot without a lock (the reference's taken before it wrote
	// one): refused, naming the override; installed with it.
	noLock := w.referenceSnapshot(t, src, 4, "", false)
	w.setPointer(t, "alpha.hermes.eth", noLock)
	if err := os.RemoveAll(brain); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = w.runOnce("restore", "-config", cfg, "alpha")
	if code != exitMismatch || !strings.Contains(stderr, "--unverified") {
		t.Fatalf("restore of a lock-less snapshot: exit %d: %s", code, lastLine(stderr))
	}
	if _, err := os.Stat(brain); err == nil {
		t.Error("a refused restore left a brain")
	}
	code, stdout, stderr = w.runOnce("restore", "-config", cfg, "alpha", "--unverified")
	if code != 0 || !strings.Contains(stdout, "NOT VERIFIED") {
		t.Fatalf("restore --unverified: exit %d\n%s%s", code, stdout, stderr)
	}
	if got, err := os.ReadFile(filepath.Join(brain, "system.md")); err != nil || string(got) != "state 2\n" {
		t.Errorf("system.md: %q %v", got, err)
	}
}

// sameSymlinks checks that every path of links is a symlink below dir
// with that target, verbatim.
func sameSymlinks(t *testing.T, dir string, links map[string]string) {
	t.Helper()
	for p, want := range links {
		full := filepath.Join(dir, filepath.FromSlash(p))
		st, err := os.Lstat(full)
		if err != nil {
			t.Errorf("%s: %v, want a symlink to %s", p, err, want)
			continue
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("%s: %v, want a symlink to %s", p, st.Mode(), want)
			continue
		}
		if got, err := os.Readlink(full); err != nil || got != want {
			t.Errorf("%s -> %q (%v), want -> %q", p, got, err, want)
		}
	}
}

// TestE2EFidelitySymlinks: the daemon snapshots (v3) a brain holding
// symlinks — to a file, out of the brain, absolute, dangling, to a
// directory — and publishes it; 'hermesd restore --dir NEW' on a machine
// with an empty state directory (the head found through ENS) exits 0 with
// the brain byte for byte, every symlink the same symlink with its own
// time, and nothing reached through one. The symlinks change no bundle
// hash, as the reference's hashBundleDir counts none.
func TestE2EFidelitySymlinks(t *testing.T) {
	t.Parallel()
	const id, name = "alpha", "alpha.hermes.eth"
	w := newE2EWorld(t, devnet.Agent{ID: id, ENSName: name})
	brain := w.brain(id)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("not the brain's"), 0o600); err != nil {
		t.Fatal(err)
	}
	for p, c := range map[string]string{"system.md": "You keep your links.\n", "skills/x.md": "x\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(brain, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(brain, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := dirHash(t, brain)
	links := map[string]string{
		"skills/current.md": "../system.md",
		"secret":            filepath.Join(outside, "secret"),
		"out":               outside,
		"hosts":             "/etc/hosts",
		"skills/gone":       "../../../nowhere",
		"dir":               "skills",
	}
	when := map[string]time.Time{}
	i := 0
	for p, target := range links {
		full := filepath.Join(brain, filepath.FromSlash(p))
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
		i++
		when[p] = time.Unix(1_650_000_000+int64(i), int64(i))
		ts := unix.NsecToTimespec(when[p].UnixNano())
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, full, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatal(err)
		}
	}
	if h := dirHash(t, brain); h != before {
		t.Fatalf("symlinks changed the bundle hash: %s, %s without them", h, before)
	}

	p := w.run()
	p.mustWaitUpload(before, 30*time.Second)
	wait.Within(t, 30*time.Second, "the pointer", func() bool { st := w.agentState(id); return st.Last != nil && w.pointer(name) == st.Last.BlobID })
	p.signal(syscall.SIGTERM)
	if code := p.wait(30 * time.Second); code != 0 {
		t.Fatalf("hermesd run: exit %d", code)
	}

	// A machine that holds none of this agent's state.
	cfg := rewriteConfig(t, w, "state_dir: "+w.dn.Config.StateDir, "state_dir: "+filepath.Join(t.TempDir(), "state"))
	dst := filepath.Join(t.TempDir(), "new")
	code, stdout, stderr := w.runOnce("restore", "-config", cfg, "--dir", dst, id)
	if code != 0 || !strings.Contains(stdout, "restored") {
		t.Fatalf("restore --dir: exit %d\n%s%s", code, stdout, stderr)
	}
	if diffs := sameTree(hashedTree(t, brain), hashedTree(t, dst)); len(diffs) > 0 {
		t.Errorf("restored brain differs: %v", diffs)
	}
	if got := dirHash(t, dst); got != before {
		t.Errorf("restored brain hashes to %s, want %s", got, before)
	}
	sameSymlinks(t, dst, links)
	for p, want := range when {
		if st, err := os.Lstat(filepath.Join(dst, filepath.FromSlash(p))); err == nil && !st.ModTime().Equal(want) {
			t.Errorf("%s: link time %v, want %v", p, st.ModTime(), want)
		}
	}
	if ents, err := os.ReadDir(outside); err != nil || len(ents) != 1 {
		t.Errorf("the directory a link names holds %v (%v): something was written through a link", ents, err)
	}
}
