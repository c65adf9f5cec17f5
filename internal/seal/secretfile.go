package seal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// maxSecretFile bounds how much of a secret file is read: keys are under
// 100 bytes, and the cap keeps a wrong path (a log, a device) harmless.
const maxSecretFile = 4096

// readSecretFile reads a small secret file, refusing one that others can
// access or its group can write (group read is allowed for systemd
// credentials and Kubernetes secrets mounted with fsGroup).
func readSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s: not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o037 != 0 {
		return "", fmt.Errorf("%s is accessible by others or writable by its group (mode %04o); restrict it with 'chmod 600 %s'", path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxSecretFile {
		return "", fmt.Errorf("%s: larger than %d bytes", path, maxSecretFile)
	}
	return string(b), nil
}

// ReadSuiKeyFile reads a Sui private key (suiprivkey1… or hex) from a file
// with restrictive permissions.
func ReadSuiKeyFile(path string) (*SuiKey, error) {
	s, err := readSecretFile(path)
	if err != nil {
		return nil, fmt.Errorf("read Sui key file: %w", err)
	}
	k, err := ParseSuiKey(s)
	if err != nil {
		return nil, fmt.Errorf("read Sui key file %s: %w", path, err)
	}
	return k, nil
}

// ReadMasterKeyFile reads a key-server master key (hex) from a file with
// restrictive permissions.
func ReadMasterKeyFile(path string) (*MasterKey, error) {
	s, err := readSecretFile(path)
	if err != nil {
		return nil, fmt.Errorf("read master key file: %w", err)
	}
	k, err := ParseMasterKey(s)
	if err != nil {
		return nil, fmt.Errorf("read master key file %s: %w", path, err)
	}
	return k, nil
}

// WriteMasterKeyFile creates path with mode 0600 holding the key in hex and
// a newline. It never overwrites (the error wraps fs.ErrExist) and syncs the
// file and its directory.
func WriteMasterKeyFile(path string, k *MasterKey) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("master key file %s: %w; refusing to overwrite it", path, fs.ErrExist)
		}
		return fmt.Errorf("create master key file: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(path)
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		return fmt.Errorf("write master key file: %w", err)
	}
	if _, err := f.WriteString(k.Hex() + "\n"); err != nil {
		return fmt.Errorf("write master key file: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write master key file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write master key file: %w", err)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("write master key file: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("write master key file: %w", err)
	}
	return nil
}
