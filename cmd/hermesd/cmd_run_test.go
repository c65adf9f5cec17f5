package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/devnet"
)

// TestRunStartupExitCodes: a start-up failure that is the configuration's
// fault exits 2; one of the environment (a port in use) exits 1. (With the
// chain unreachable the daemon starts: TestE2EChainDown.)
func TestRunStartupExitCodes(t *testing.T) {
	dn, err := devnet.Start(t.Context(), devnet.Options{
		Dir:        t.TempDir(),
		Shards:     e2eShards,
		Agents:     []devnet.Agent{{ID: "alpha", ENSName: "alpha.hermes.eth"}},
		HTTPListen: "127.0.0.1:0",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dn.Close() })
	base, err := os.ReadFile(dn.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	short := filepath.Join(dir, "short-token")
	if err := os.WriteFile(short, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	listen := `listen: "127.0.0.1:0"`
	stateDir := "state_dir: " + filepath.Join(dn.Dir, "state") + "\n"
	keyRef := "key: {file: " + dn.KeyPath + "}"
	brainDir := ""
	for _, line := range strings.SplitAfter(string(base), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "brain_dir: ") {
			brainDir = strings.TrimLeft(line, " ")
			break
		}
	}
	// Directories and key files the configuration may not name (system
	// directories, another user's, world-writable): refusals of the
	// configuration, exit 2, not 1 (which systemd would restart forever).
	public := filepath.Join(dir, "public")
	os.Mkdir(public, 0o700)
	os.Chmod(public, 0o777)
	keyBytes, err := os.ReadFile(dn.KeyPath)
	if err != nil {
		t.Fatal(err)
	}
	readable := filepath.Join(dir, "readable.key")
	os.WriteFile(readable, keyBytes, 0o600)
	os.Chmod(readable, 0o644)
	type row struct {
		name     string
		old, new string
		code     int
		reason   string
	}
	rows := []row{
		{"http.token missing", listen, listen + "\n  token: {file: " + filepath.Join(dir, "missing") + "}", exitUsage, "http.token"},
		{"http.token too short", listen, listen + "\n  token: {file: " + short + "}", exitUsage, "shorter than 16"},
		{"encryption key missing", keyRef, "key: {file: " + filepath.Join(dir, "missing.key") + "}", exitUsage, "encryption.key"},
		{"port in use", listen, `listen: "` + busy.Addr().String() + `"`, exitFailure, "address already in use"},
		{"state directory writable by all", stateDir, "state_dir: " + public + "\n", exitUsage, "unsafe state directory"},
		{"state directory /etc", stateDir, "state_dir: /etc\n", exitUsage, "/etc is a system directory"},
		{"brain directory /etc", brainDir, "brain_dir: /etc\n", exitUsage, "agents[0].brain_dir: /etc is a system directory"},
		{"key file readable by all", keyRef, "key: {file: " + readable + "}", exitUsage, "chmod 600"},
	}
	if os.Geteuid() == 0 {
		theirs := filepath.Join(dir, "theirs")
		os.Mkdir(theirs, 0o700)
		os.Chown(theirs, 65534, 65534)
		theirKey := filepath.Join(dir, "their.key")
		os.WriteFile(theirKey, keyBytes, 0o600)
		os.Chown(theirKey, 65534, 65534)
		link := filepath.Join(dir, "link.key")
		os.Symlink(dn.KeyPath, link)
		os.Lchown(link, 65534, 65534)
		rows = append(rows,
			row{"state directory of another user", stateDir, "state_dir: " + theirs + "\n", exitUsage, "uid 65534"},
			row{"key file of another user", keyRef, "key: {file: " + theirKey + "}", exitUsage, "uid 65534"},
			row{"key through another user's link", keyRef, "key: {file: " + link + "}", exitUsage, "symbolic link"},
		)
	} else {
		t.Log("not root: files of another user cannot be made here; root's CI run covers them")
	}
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(base, []byte(tc.old)) {
				t.Fatalf("the devnet configuration has no %q", tc.old)
			}
			cfg := filepath.Join(t.TempDir(), "hermesd.yml")
			if err := os.WriteFile(cfg, bytes.Replace(base, []byte(tc.old), []byte(tc.new), 1), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			err := Run(t.Context(), []string{"run", "-config", cfg}, strings.NewReader(""), &stdout, &stderr)
			if code := exitCode(err); code != tc.code || err == nil || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("exit %d (%v), want %d mentioning %q", code, err, tc.code, tc.reason)
			}
		})
	}
}
