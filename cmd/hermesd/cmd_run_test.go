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
	for _, tc := range []struct {
		name     string
		old, new string
		code     int
		reason   string
	}{
		{"http.token missing", listen, listen + "\n  token: {file: " + filepath.Join(dir, "missing") + "}", exitUsage, "http.token"},
		{"http.token too short", listen, listen + "\n  token: {file: " + short + "}", exitUsage, "shorter than 16"},
		{"encryption key missing", "key: {file: " + dn.KeyPath + "}", "key: {file: " + filepath.Join(dir, "missing.key") + "}", exitUsage, "encryption.key"},
		{"port in use", listen, `listen: "` + busy.Addr().String() + `"`, exitFailure, "address already in use"},
	} {
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
