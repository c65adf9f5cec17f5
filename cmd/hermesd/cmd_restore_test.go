package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/config"
)

// restoreConfig writes a configuration of one agent, auditor, whose
// Walrus and chain are unreachable, and its snapshot key.
func restoreConfig(t *testing.T, extra string) string {
	t.Helper()
	t.Setenv(config.EnvPath, "")
	dir := t.TempDir()
	if _, stderr, code := runCmd(t, "keygen", "-o", filepath.Join(dir, "snapshot.key")); code != 0 {
		t.Fatalf("keygen: %s", stderr)
	}
	cfg := filepath.Join(dir, "hermesd.yml")
	body := fmt.Sprintf("state_dir: %s\nhttp:\n  listen: \"\"\nwalrus:\n  publishers: [\"http://127.0.0.1:1\"]\n  aggregators: [\"http://127.0.0.1:1\"]\n  retry_max: 0\n"+
		"encryption:\n  key: {file: ./snapshot.key}\n%sagents:\n  - id: auditor\n    brain_dir: ./brain\n", filepath.Join(dir, "state"), extra)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestRestoreDirRefusesSystemDirs: restore --dir applies the rule for
// brain directories: a system directory, or one below /etc or /usr, is
// refused (exit 2) before anything is created or fetched.
func TestRestoreDirRefusesSystemDirs(t *testing.T) {
	cfg := restoreConfig(t, "")
	blob := strings.Repeat("A", 43)
	top := fmt.Sprintf("hermesd-restore-test-%d", os.Getpid())
	for _, tc := range []struct{ dir, fresh string }{
		{filepath.Join("/etc", top, "brain"), filepath.Join("/etc", top)},
		{filepath.Join("/usr", top, "brain"), filepath.Join("/usr", top)},
		{filepath.Join("/usr/share", top), filepath.Join("/usr/share", top)},
		{"/etc", ""},
		{"/var", ""},
	} {
		if tc.fresh != "" {
			if _, err := os.Lstat(tc.fresh); err == nil {
				t.Fatalf("%s exists", tc.fresh)
			}
			t.Cleanup(func() { os.RemoveAll(tc.fresh) })
		}
		for _, args := range [][]string{
			{"restore", "-config", cfg, "--blob", blob, "--dir", tc.dir, "auditor"},
			{"restore", "-config", cfg, "--dir", tc.dir, "auditor"},
		} {
			_, stderr, code := runCmd(t, args...)
			if code != exitUsage || !strings.Contains(stderr, "system directory") || !strings.Contains(stderr, "allow_unsafe_dirs") {
				t.Errorf("%v: exit %d: %s", args, code, stderr)
			}
		}
		if _, err := os.Lstat(tc.fresh); tc.fresh != "" && err == nil {
			t.Errorf("%s was created", tc.fresh)
		}
	}
	// A directory of one's own passes the check (then Walrus is away).
	if _, stderr, code := runCmd(t, "restore", "-config", cfg, "--blob", blob, "--dir", filepath.Join(t.TempDir(), "new"), "auditor"); code == exitUsage {
		t.Errorf("an ordinary --dir refused: %s", stderr)
	}
	// allow_unsafe_dirs allows it, as it does brain directories.
	cfg = restoreConfig(t, "allow_unsafe_dirs: true\n")
	if _, stderr, _ := runCmd(t, "restore", "-config", cfg, "--blob", blob, "--dir", filepath.Join("/usr", top, "brain"), "auditor"); strings.Contains(stderr, "system directory") {
		t.Errorf("allow_unsafe_dirs: %s", stderr)
	}
}
