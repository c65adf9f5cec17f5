package seal

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSecretFiles(t *testing.T) {
	dir := t.TempDir()
	mk, _ := GenerateMasterKey(nil)
	path := filepath.Join(dir, "master.key")
	if err := WriteMasterKeyFile(path, mk); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", fi.Mode(), err)
	}
	back, err := ReadMasterKeyFile(path)
	if err != nil || back.PublicKey() != mk.PublicKey() {
		t.Fatalf("read back: %v", err)
	}
	if err := WriteMasterKeyFile(path, mk); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("overwrite: %v", err)
	}

	sui := filepath.Join(dir, "sui.key")
	if err := os.WriteFile(sui, []byte(suiKeyVectors[1].key+"\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	k, err := ReadSuiKeyFile(sui)
	if err != nil || k.Address().String() != suiKeyVectors[1].address {
		t.Fatalf("Sui key file: %v", err)
	}
	if err := os.Chmod(sui, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSuiKeyFile(sui); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("world-readable key file: %v", err)
	}
	big := filepath.Join(dir, "big")
	os.WriteFile(big, make([]byte, maxKeyFile+1), 0o600)
	if _, err := ReadMasterKeyFile(big); err == nil {
		t.Fatal("read an oversized key file")
	}
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("not a key"), 0o600)
	if _, err := ReadMasterKeyFile(bad); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("bad key file: %v", err)
	}
	if _, err := ReadSuiKeyFile(dir); err == nil {
		t.Fatal("read a directory as a key file")
	}
}

func TestAllowlistID(t *testing.T) {
	a := MustParseAddress("0x6c57a61e6f0ab5af7bf1b6dbb459b2baf1033c104cb05c0290915e321450fc79")
	id := AllowlistID(a, "auditor.slopstock.eth")
	if len(id) != 32+21 || Address(id[:32]) != a || string(id[32:]) != "auditor.slopstock.eth" {
		t.Fatalf("AllowlistID = %x", id)
	}
}
