package seal

import (
	"fmt"

	"github.com/hermesd/hermesd/internal/secretfile"
)

// maxKeyFile bounds how much of a key file is read: keys are under 100
// bytes.
const maxKeyFile = 4096

// ReadSuiKeyFile reads a Sui private key (suiprivkey1… or hex) from a
// secret file (package secretfile's rule).
func ReadSuiKeyFile(path string) (*SuiKey, error) {
	return readKeyFile(path, "Sui key file", ParseSuiKey)
}

// ReadMasterKeyFile reads a key-server master key (hex) from a secret file
// (package secretfile's rule).
func ReadMasterKeyFile(path string) (*MasterKey, error) {
	return readKeyFile(path, "master key file", ParseMasterKey)
}

// readKeyFile reads the secret file path and parses its contents; what
// names the file in errors.
func readKeyFile[K any](path, what string, parse func(string) (K, error)) (K, error) {
	var zero K
	b, err := secretfile.Read(path, maxKeyFile)
	if err != nil {
		return zero, fmt.Errorf("read %s: %w", what, err)
	}
	k, err := parse(string(b))
	if err != nil {
		return zero, fmt.Errorf("read %s %s: %w", what, path, err)
	}
	return k, nil
}

// WriteMasterKeyFile creates path with mode 0600 holding the key in hex and
// a newline. It never overwrites (the error wraps fs.ErrExist) and syncs the
// file and its directory.
func WriteMasterKeyFile(path string, k *MasterKey) error {
	if err := secretfile.Create(path, []byte(k.Hex()+"\n")); err != nil {
		return fmt.Errorf("write master key file: %w", err)
	}
	return nil
}
