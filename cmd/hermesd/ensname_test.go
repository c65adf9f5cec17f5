package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/config"
)

// TestENSNameErrorReadable: an ENS name with an invisible character is
// refused in one line that shows the name as it reads, the invisible
// character as {U+200E} (and says so), never as a literal \u200e.
func TestENSNameErrorReadable(t *testing.T) {
	t.Setenv(config.EnvPath, "")
	name := "a_b\u200e.eth"
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hermesd.yml")
	body := fmt.Sprintf("state_dir: %s\nwalrus:\n  publishers: [\"http://127.0.0.1:1\"]\n  aggregators: [\"http://127.0.0.1:1\"]\n"+
		"chain:\n  rpc: http://127.0.0.1:1\nencryption:\n  key: {file: ./snapshot.key}\nagents:\n  - id: a1\n    brain_dir: ./a1\n    ens_name: \"%s\"\n",
		filepath.Join(dir, "state"), name)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"pointer", "get", name, "--rpc", "http://127.0.0.1:1"},
		{"status", "-config", cfg},
	} {
		_, stderr, code := runCmd(t, args...)
		if code != exitUsage || !strings.Contains(stderr, `"a_b{U+200E}.eth"`) || !strings.Contains(stderr, "{U+XXXX}") ||
			strings.Contains(stderr, `\u200e`) || strings.ContainsRune(stderr, '\u200e') || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d: %q", args, code, stderr)
		}
	}
}
