package devnet

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hermesd/hermesd/internal/cipher"
)

// A first run killed right after creating the snapshot key file leaves it
// empty; the next start must make a key, and must never replace a real one.
func TestStartAfterKeyFileCrash(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	if err := os.MkdirAll(keys, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(keys, "snapshot.key"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	start := func() *Devnet {
		t.Helper()
		d, err := Start(t.Context(), Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := start()
	k, err := cipher.ReadKeyFile(d.KeyPath)
	if err != nil {
		t.Fatalf("the key after a restart: %v", err)
	}
	start()
	if k2, err := cipher.ReadKeyFile(d.KeyPath); err != nil || k2.Secret() != k.Secret() {
		t.Fatalf("a restart replaced the key: %v", err)
	}
}
