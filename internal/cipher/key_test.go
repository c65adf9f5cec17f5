package cipher

import (
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseKey(t *testing.T) {
	raw := make([]byte, 32)
	for i := range raw {
		raw[i] = byte(i*37 + 250) // includes bytes that encode to '-', '_', '+', '/'
	}
	var want Key
	copy(want[:], raw)
	url := base64.RawURLEncoding.EncodeToString(raw)
	if !strings.ContainsAny(url, "-_") {
		t.Fatalf("test key %s does not exercise the URL alphabet", url)
	}
	good := []string{
		url,
		url + "=",
		base64.RawStdEncoding.EncodeToString(raw),
		base64.StdEncoding.EncodeToString(raw),
		"  " + url + "\n",
		url + "\r\n",
		"\t" + url + "=\n",
	}
	for _, s := range good {
		k, err := ParseKey(s)
		if err != nil || k != want {
			t.Errorf("ParseKey(%q) = %v, %v", s, k == want, err)
		}
	}
	if want.Secret() != url || len(url) != 43 {
		t.Errorf("Secret() = %q, want the 43-char %q", want.Secret(), url)
	}

	bad := []struct {
		in, msg string
	}{
		{"", "empty"},
		{"   \n", "empty"},
		{base64.RawURLEncoding.EncodeToString(raw[:16]), "decoded to 16 bytes, want 32 (AES-256); generate one with 'hermesd keygen'"},
		{base64.RawURLEncoding.EncodeToString(raw[:24]), "decoded to 24 bytes, want 32"},
		{base64.RawURLEncoding.EncodeToString(raw[:31]), "decoded to 31 bytes, want 32"},
		{base64.RawURLEncoding.EncodeToString(append(raw, 1)), "decoded to 33 bytes, want 32"},
		{strings.Repeat("ab", 32), "looks like hex"},
		{url[:20] + "!" + url[21:], "not base64url"},
		{url[:20] + " " + url[21:], "not base64url"},
		{url[:41], "not base64url"},
		{url + "==", "padding"},
		{"=" + url[1:], "padding"},
	}
	for _, tt := range bad {
		_, err := ParseKey(tt.in)
		if !errors.Is(err, ErrInvalidKey) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("ParseKey(%q) = %v; want ErrInvalidKey with %q", tt.in, err, tt.msg)
			continue
		}
		if len(tt.in) > 8 && strings.Contains(err.Error(), strings.TrimSpace(tt.in)[:8]) {
			t.Errorf("error %q repeats key material", err)
		}
	}
}

func TestGenerateKey(t *testing.T) {
	a, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	b, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if a == b || a == (Key{}) {
		t.Fatal("GenerateKey is not random")
	}
	if k, err := ParseKey(a.Secret()); err != nil || k != a {
		t.Fatalf("Secret/ParseKey round trip: %v", err)
	}
}

func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "snapshot.key")
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteKeyFile(path, k); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	content, err := os.ReadFile(path)
	if err != nil || string(content) != k.Secret()+"\n" {
		t.Fatalf("content %q, %v", content, err)
	}
	got, err := ReadKeyFile(path)
	if err != nil || got != k {
		t.Fatalf("ReadKeyFile = %v, %v", got == k, err)
	}

	// Never overwrite.
	other, _ := GenerateKey()
	err = WriteKeyFile(path, other)
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("overwrite: %v", err)
	}
	if got, _ := ReadKeyFile(path); got != k {
		t.Error("the existing key file was changed")
	}

	// Refuse keys others can read, naming the fix.
	for _, mode := range []os.FileMode{0o604, 0o644, 0o660, 0o650} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := ReadKeyFile(path)
		if err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %04o: %v", mode, err)
		}
	}
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadKeyFile(path); err != nil {
		t.Errorf("mode 0400: %v", err)
	}

	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, err := ReadKeyFile(write("short.key", "AAAA\n")); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("short key: %v", err)
	}
	if _, err := ReadKeyFile(write("big.key", strings.Repeat("A", 5000))); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("big file: %v", err)
	}
	if _, err := ReadKeyFile(filepath.Join(dir, "missing.key")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	if _, err := ReadKeyFile(dir); err == nil {
		t.Error("a directory was accepted as a key file")
	}
}
