package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/devnet"
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
	c, err := walrus.New(walrus.Config{Publishers: []string{w.dn.Walrus.URL()}, Aggregators: []string{w.dn.Walrus.URL()}, Epochs: 5})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Store(t.Context(), walrus.BytesBody(blob))
	if err != nil {
		t.Fatal(err)
	}
	return res.BlobID
}

// TestE2EReferenceSnapshot: an agent whose brain the reference runtime
// snapshotted three times (a file under two names, a 0700 brain) cold-
// restores with 'hermesd restore' — every name, the link, the mode —
// and 'hermesd log' shows the three snapshots its locks chain. A
// snapshot without a lock is refused naming --unverified, and installed
// with it, saying it is not verified.
func TestE2EReferenceSnapshot(t *testing.T) {
	t.Parallel()
	token := uint64(3)
	w := newE2EWorld(t, devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth", TokenID: &token})
	cfg := w.dn.ConfigPath
	src := filepath.Join(t.TempDir(), "reference")
	if err := os.MkdirAll(filepath.Join(src, "skills"), 0o700); err != nil {
		t.Fatal(err)
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
