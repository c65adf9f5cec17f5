package handover

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ageCLI returns the path of the age command (or age-keygen). It is a
// test dependency like the ENS artifacts: `make deps` installs it
// (scripts/ensure-tools.sh), and its absence fails the test.
func ageCLI(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found on PATH: run scripts/ensure-tools.sh (make deps) to install the age CLI", name)
	}
	return p
}

func run(t *testing.T, name string, stdin []byte, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(ageCLI(t, name), args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Logf("%s %s: %s", name, strings.Join(args, " "), stderr.Bytes())
	}
	return out, err
}

// TestAgeCLIDecryptsSeal: the buyer can read a handover with the age CLI
// alone, and what it prints is the handover document.
func TestAgeCLIDecryptsSeal(t *testing.T) {
	dir := t.TempDir()
	idFile := filepath.Join(dir, "buyer.key")
	recipient, err := NewIdentityFile(idFile, "buyer")
	if err != nil {
		t.Fatal(err)
	}
	var sealed bytes.Buffer
	if err := Seal(&sealed, fixture(), recipient); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "agent.handover")
	if err := os.WriteFile(file, sealed.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	plain, err := run(t, "age", nil, "-d", "-i", idFile, file)
	if err != nil {
		t.Fatalf("age -d: %v", err)
	}
	if want := mustEncode(t, fixture()); !bytes.Equal(plain, want) {
		t.Fatalf("age -d printed\n%s\nwant\n%s", plain, want)
	}
	h, err := Decode(plain)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, h, fixture())

	// And not with another identity.
	other := filepath.Join(dir, "other.key")
	if _, err := NewIdentityFile(other, ""); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "age", nil, "-d", "-i", other, file); err == nil {
		t.Fatalf("age -d with another identity succeeded: %q", out)
	}
}

// TestOpenReadsAgeCLI: a file the age CLI encrypts to the recipient (binary
// or armored, to one recipient or several) opens, with an identity file
// made by hermesd or by age-keygen.
func TestOpenReadsAgeCLI(t *testing.T) {
	dir := t.TempDir()
	ours := filepath.Join(dir, "ours.key")
	recipient, err := NewIdentityFile(ours, "")
	if err != nil {
		t.Fatal(err)
	}
	theirs := filepath.Join(dir, "theirs.key")
	if _, err := run(t, "age-keygen", nil, "-o", theirs); err != nil {
		t.Fatalf("age-keygen: %v", err)
	}
	pub, err := run(t, "age-keygen", nil, "-y", theirs)
	if err != nil {
		t.Fatalf("age-keygen -y: %v", err)
	}
	theirRecipient := strings.TrimSpace(string(pub))
	doc := mustEncode(t, fixture())
	for _, tc := range []struct {
		name   string
		idFile string
		args   []string
	}{
		{"binary", ours, []string{"-r", recipient}},
		{"armored", ours, []string{"-a", "-r", recipient}},
		{"two recipients", ours, []string{"-r", theirRecipient, "-r", recipient}},
		{"age-keygen identity", theirs, []string{"-r", theirRecipient}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc, err := run(t, "age", doc, append([]string{"-e"}, tc.args...)...)
			if err != nil {
				t.Fatalf("age -e: %v", err)
			}
			ids, err := ReadIdentityFile(tc.idFile)
			if err != nil {
				t.Fatal(err)
			}
			h, err := Open(bytes.NewReader(enc), ids...)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			equal(t, h, fixture())
		})
	}
}
