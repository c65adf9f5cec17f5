package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHashCommand(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "system.md"), []byte("You are a test agent.\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "skills"), 0o755)
	os.WriteFile(filepath.Join(dir, "skills/reentrancy.md"), []byte("---\nname: reentrancy\n---\nLook for re-entrant calls.\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "bundle.lock.json"), []byte("{}"), 0o644)
	empty := t.TempDir()
	file := filepath.Join(dir, "system.md")
	const want = "0x686d75608202ced471e2bafb0c9a0212e40808a8c359e375c62f1f4129893276"
	const null = "0xf33398eff1c6f8626f071b041025f28ca7cb0b4152e43ba0b5d919a37b6a0c2c"

	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
	}{
		{"plain", []string{"hash", dir}, exitOK, want + "\n"},
		{"workers", []string{"hash", "--workers", "1", dir}, exitOK, want + "\n"},
		{"flags after the directory", []string{"hash", dir, "-workers=3"}, exitOK, want + "\n"},
		{"empty directory", []string{"hash", empty}, exitOK, null + "\n"},
		{"missing directory", []string{"hash", filepath.Join(dir, "nope")}, exitNotFound, ""},
		{"a file", []string{"hash", file}, exitUsage, ""},
		{"no argument", []string{"hash"}, exitUsage, ""},
		{"two arguments", []string{"hash", dir, empty}, exitUsage, ""},
		{"negative workers", []string{"hash", "--workers", "-1", dir}, exitUsage, ""},
		{"unknown flag", []string{"hash", "--nope", dir}, exitUsage, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := Run(t.Context(), tt.args, strings.NewReader(""), &out, &errb)
			if code := exitCode(err); code != tt.wantCode {
				t.Fatalf("exit code %d (%v), want %d", code, err, tt.wantCode)
			}
			if out.String() != tt.wantOut {
				t.Fatalf("stdout %q, want %q", out.String(), tt.wantOut)
			}
		})
	}

	var out bytes.Buffer
	if err := Run(t.Context(), []string{"hash", "--json", dir}, nil, &out, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Count(out.String(), "\n") != 1 {
		t.Errorf("--json printed %q, want one line", out.String())
	}
	var rep map[string]any
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep["bundleHash"] != want || rep["files"] != 2.0 || rep["bytes"] != 74.0 || rep["dir"] != dir {
		t.Errorf("--json = %v", rep)
	}
	if d, ok := rep["durationMs"].(float64); !ok || d < 0 {
		t.Errorf("durationMs = %v", rep["durationMs"])
	}
}
