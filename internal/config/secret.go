package config

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/hermesd/hermesd/internal/secretfile"
)

// maxSecretSize bounds a secret file; keys and tokens are short.
const maxSecretSize = 64 << 10

// ErrNoSecret means a SecretRef names no source.
var ErrNoSecret = errors.New("no secret configured")

// ReadSecret returns the secret s refers to, trimmed of surrounding
// whitespace. A file must pass ReadSecretFile's checks. Keystore
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

// ReadSecretFile reads a secret file under package secretfile's rule (a
// regular file others cannot access and its group cannot write; group
// read is allowed for systemd credentials and Kubernetes fsGroup mounts)
// and returns its contents trimmed of surrounding whitespace.
func ReadSecretFile(path string) (string, error) {
	b, err := secretfile.Read(path, maxSecretSize)
	if err != nil {
		return "", fmt.Errorf("read secret: %w", err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("secret %s is empty", path)
	}
	return v, nil
}
