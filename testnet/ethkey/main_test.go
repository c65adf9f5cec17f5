package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCreateThenShow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sepolia.key")
	var created, shown, fromEnv bytes.Buffer
	if err := run([]string{"-o", path}, &created, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %04o, want 0600", st.Mode().Perm())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.TrimSpace(string(raw)); len(s) != 66 || !strings.HasPrefix(s, "0x") {
		t.Errorf("key file holds %d characters, want 0x + 64 hex", len(s))
	}
	if strings.Contains(created.String(), strings.TrimSpace(string(raw))[2:]) {
		t.Error("the private key was printed")
	}
	if err := run([]string{"-show", path}, &shown, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ETHKEY_TEST", strings.TrimSpace(string(raw)))
	if err := run([]string{"-env", "ETHKEY_TEST"}, &fromEnv, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	addr := created.String()
	if len(strings.TrimSpace(addr)) != 42 || shown.String() != addr || fromEnv.String() != addr {
		t.Errorf("addresses differ: created %q, shown %q, env %q", addr, shown.String(), fromEnv.String())
	}
	if err := run([]string{"-o", path}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Error("an existing key file was overwritten")
	}
}

func TestRejects(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.key")
	if err := os.WriteFile(bad, []byte("0x1234\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"no mode":   nil,
		"two modes": {"-o", "a", "-show", "b"},
		"short key": {"-show", bad},
		"unset env": {"-env", "ETHKEY_TEST_SURELY_UNSET"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := run(args, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
				t.Error("accepted")
			}
		})
	}
}
