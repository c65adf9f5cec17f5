package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxSecretSize bounds a secret file; keys and tokens are short.
const maxSecretSize = 64 << 10

// ErrNoSecret means a SecretRef names no source.
var ErrNoSecret = errors.New("no secret configured")

// ReadSecret returns the secret s refers to, trimmed of surrounding
// whitespace. A file must not be accessible by others or writable by its group. Keystore
// references are not plain secrets; the caller decrypts those itself.
func ReadSecret(s SecretRef) (string, error) {
	switch {
	case s.File != "":
		return ReadSecretFile(s.File)
	case s.Env != "":
		v, ok := os.LookupEnv(s.Env)
		if !ok || strings.TrimSpace(v) == "" {
			return "", fmt.Errorf("environment variable %s is not set or empty", s.Env)
		}
		return strings.TrimSpace(v), nil
	case s.Keystore != "":
		return "", fmt.Errorf("%s holds an encrypted keystore, not a plain secret", s.Keystore)
	}
	return "", ErrNoSecret
}

// ReadSecretFile reads a secret file, refusing one that others can access or
// its group can write. Group read is allowed: systemd credentials and
// Kubernetes secrets mounted with fsGroup arrive as 0440 or 0640.
func ReadSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("open secret: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("stat secret: %w", err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("secret %s is not a regular file", path)
	}
	// Group read is allowed: systemd credentials and Kubernetes secrets
	// mounted with fsGroup arrive as 0440/0640.
	if st.Mode().Perm()&0o037 != 0 {
		return "", fmt.Errorf("secret %s is accessible by others or writable by its group (mode %04o); run: chmod 600 %s", path, st.Mode().Perm(), path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecretSize+1))
	if err != nil {
		return "", fmt.Errorf("read secret: %w", err)
	}
	if len(b) > maxSecretSize {
		return "", fmt.Errorf("secret %s is larger than %d bytes", path, maxSecretSize)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("secret %s is empty", path)
	}
	return v, nil
}
