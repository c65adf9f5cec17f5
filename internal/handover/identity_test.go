package handover

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNewIdentityFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "buyer.key")
	recipient, err := NewIdentityFile(path, "hermesd transfer request for auditor\nsecond line")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(recipient, "age1") {
		t.Fatalf("recipient %q", recipient)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("identity file mode %04o, want 0600", st.Mode().Perm())
	}
	body, _ := os.ReadFile(path)
	for _, want := range []string{"# hermesd transfer request for auditor\n", "# second line\n", "# public key: " + recipient + "\n", "\nAGE-SECRET-KEY-1"} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("identity file lacks %q:\n%s", want, body)
		}
	}

	ids, err := ReadIdentityFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Seal(&buf, fixture(), recipient); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(&buf, ids...); err != nil {
		t.Fatalf("Open with the file's identity: %v", err)
	}

	// Never overwritten.
	if _, err := NewIdentityFile(path, ""); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second NewIdentityFile: %v, want ErrExist", err)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(again, body) {
		t.Fatal("identity file changed by a refused NewIdentityFile")
	}
}

func TestReadIdentityFileRefuses(t *testing.T) {
	dir := t.TempDir()
	secret := "AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ"
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, err := NewIdentityFile(filepath.Join(dir, "good"), "")
	if err != nil || good == "" {
		t.Fatal(err)
	}
	goodBody, _ := os.ReadFile(filepath.Join(dir, "good"))
	for _, tc := range []struct {
		name, path, msg string
	}{
		{"readable by others", write("open", string(goodBody), 0o644), "accessible by others"},
		{"missing", filepath.Join(dir, "nope"), "no such file"},
		{"directory", dir, "not a regular file"},
		{"empty", write("empty", "", 0o600), "empty"},
		{"comments only", write("comments", "# nothing\n", 0o600), "not an age identity file"},
		{"malformed", write("bad", secret+"\n", 0o600), "not an age identity file"},
		{"recipient, not identity", write("pub", good+"\n", 0o600), "not an age identity file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadIdentityFile(tc.path)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("ReadIdentityFile: %v, want %q", err, tc.msg)
			}
			if strings.Contains(err.Error(), "QQQQ") {
				t.Fatalf("error shows the file's content: %v", err)
			}
		})
	}
}

func TestOpenFile(t *testing.T) {
	dir := t.TempDir()
	idPath := filepath.Join(dir, "buyer.key")
	recipient, err := NewIdentityFile(idPath, "")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := ReadIdentityFile(idPath)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Seal(&buf, fixture(), recipient); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "auditor.handover")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := OpenFile(path, ids...)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, h, fixture())
	if _, err := OpenFile(filepath.Join(dir, "missing"), ids...); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("OpenFile of a missing file: %v", err)
	}
	if _, err := OpenFile(dir, ids...); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("OpenFile of a directory: %v", err)
	}
	if err := os.WriteFile(path, buf.Bytes()[:buf.Len()-1], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFile(path, ids...); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("OpenFile of a truncated file: %v", err)
	}
}
