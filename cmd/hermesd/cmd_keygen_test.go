package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/cipher"
)

func runKeygenCmd(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = Run(t.Context(), args, strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "snapshot.key")
	stdout, _, err := runKeygenCmd(t, "keygen", "-o", path)
	if err != nil {
		t.Fatal(err)
	}
	if stdout != path+"\n" {
		t.Errorf("stdout %q, want the path", stdout)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o, want 0600", fi.Mode().Perm())
	}
	key, err := cipher.ReadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stdout, key.Secret()) {
		t.Error("keygen printed the key")
	}

	// Never overwrite: the old key survives and the error says why.
	stdout, stderr, err := runKeygenCmd(t, "keygen", "-o", path)
	if err == nil || !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "refusing to overwrite") {
		t.Fatalf("second keygen: %v", err)
	}
	if code := exitCode(err); code != exitFailure {
		t.Errorf("exit code %d, want %d", code, exitFailure)
	}
	if stdout != "" || strings.Contains(stderr, key.Secret()) {
		t.Errorf("output on failure: %q %q", stdout, stderr)
	}
	if again, _ := cipher.ReadKeyFile(path); again != key {
		t.Error("existing key file changed")
	}

	// --json, relative path resolved to an absolute one.
	t.Chdir(dir)
	stdout, _, err = runKeygenCmd(t, "keygen", "--json", "-o", "second.key")
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Path, Format string }
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("--json output %q: %v", stdout, err)
	}
	if got.Path != filepath.Join(dir, "second.key") || got.Format != "base64url-32" {
		t.Errorf("--json = %+v", got)
	}
	second, err := cipher.ReadKeyFile(got.Path)
	if err != nil || second == key {
		t.Errorf("second key: %v (same as first: %v)", err, second == key)
	}
}

func TestKeygenUsage(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"keygen"}, "-o FILE is required"},
		{[]string{"keygen", "-o", "-"}, "never printed"},
		{[]string{"keygen", "-o", filepath.Join(dir, "k"), "extra"}, "unexpected argument"},
		{[]string{"keygen", "--bogus"}, ""},
	}
	for _, tt := range tests {
		_, _, err := runKeygenCmd(t, tt.args...)
		if code := exitCode(err); code != exitUsage {
			t.Errorf("%v: exit code %d (%v), want %d", tt.args, code, err, exitUsage)
		}
		if tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%v: error %v, want %q", tt.args, err, tt.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "k")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("a usage error still wrote a key file")
	}
	// A missing directory is a plain failure naming the cause.
	_, _, err := runKeygenCmd(t, "keygen", "-o", filepath.Join(dir, "no", "such", "k"))
	if !errors.Is(err, fs.ErrNotExist) || exitCode(err) != exitFailure {
		t.Errorf("missing directory: %v", err)
	}
}
