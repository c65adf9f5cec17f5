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
	b, err := secretfile.Read(path, maxKeyFile)
	if err != nil {
		return nil, fmt.Errorf("read Sui key file: %w", err)
	}
	k, err := ParseSuiKey(string(b))
	if err != nil {
		return nil, fmt.Errorf("read Sui key file %s: %w", path, err)
	}
	return k, nil
}

// ReadMasterKeyFile reads a key-server master key (hex) from a secret file
// (package secretfile's rule).
func ReadMasterKeyFile(path string) (*MasterKey, error) {
	b, err := secretfile.Read(path, maxKeyFile)
	if err != nil {
		return nil, fmt.Errorf("read master key file: %w", err)
	}
	k, err := ParseMasterKey(string(b))
	if err != nil {
		return nil, fmt.Errorf("read master key file %s: %w", path, err)
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
