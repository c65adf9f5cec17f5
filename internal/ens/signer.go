package ens

import (
	"crypto/ecdsa"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/keystore"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/hermesd/hermesd/internal/secretfile"
)

// SignerSource says where the signing key comes from. Exactly one of
// KeyFile, KeyEnv and Keystore must be set.
type SignerSource struct {
	// KeyFile holds a hex private key (0x optional, surrounding whitespace
	// ignored). A file others can access or its group can write is refused (group read is allowed for systemd credentials and Kubernetes secrets).
	KeyFile string
	// KeyEnv names an environment variable holding a hex private key (the
	// reference runtime uses DEPLOYER_PRIVATE_KEY).
	KeyEnv string
	// Keystore is a go-ethereum keystore JSON file, decrypted with the
	// first line of PasswordFile (which must not be group/other-readable).
	Keystore     string
	PasswordFile string
}

// Signer holds a private key. It prints and logs as its address only.
type Signer struct {
	key  *ecdsa.PrivateKey
	addr common.Address
}

// NewSigner wraps a key.
func NewSigner(key *ecdsa.PrivateKey) *Signer {
	return &Signer{key: key, addr: crypto.PubkeyToAddress(key.PublicKey)}
}

// Address is the signer's Ethereum address.
func (s *Signer) Address() common.Address { return s.addr }

// PrivateKey returns the key itself, for other signing duties (hermesd's
// receipt signatures). Never log or print it.
func (s *Signer) PrivateKey() *ecdsa.PrivateKey { return s.key }

// String returns the address, never the key.
func (s *Signer) String() string { return s.addr.Hex() }

// GoString keeps %#v from printing the key.
func (s *Signer) GoString() string { return "ens.Signer(" + s.addr.Hex() + ")" }

// LogValue makes slog record the address only.
func (s *Signer) LogValue() slog.Value { return slog.StringValue(s.addr.Hex()) }

// Size limits for secret files.
const (
	maxKeyFileSize      = 64 << 10
	maxKeystoreFileSize = 1 << 20
)

// LoadSigner loads the key src names. Errors name the source, never any
// part of the key.
func LoadSigner(src SignerSource) (*Signer, error) {
	n := 0
	for _, s := range []string{src.KeyFile, src.KeyEnv, src.Keystore} {
		if s != "" {
			n++
		}
	}
	switch {
	case n == 0:
		return nil, errors.New("ens: no signer key source (key file, key env or keystore)")
	case n > 1:
		return nil, errors.New("ens: more than one signer key source; choose one of key file, key env and keystore")
	}
	switch {
	case src.KeyFile != "":
		raw, err := readSecretFile(src.KeyFile, maxKeyFileSize)
		if err != nil {
			return nil, err
		}
		return parseHexKey(string(raw), "key file "+src.KeyFile)
	case src.KeyEnv != "":
		v, ok := os.LookupEnv(src.KeyEnv)
		if !ok || strings.TrimSpace(v) == "" {
			return nil, fmt.Errorf("ens: environment variable %s is not set or empty", src.KeyEnv)
		}
		return parseHexKey(v, "environment variable "+src.KeyEnv)
	default:
		if src.PasswordFile == "" {
			return nil, fmt.Errorf("ens: keystore %s needs a password file", src.Keystore)
		}
		f, err := os.Open(src.Keystore)
		if err != nil {
			return nil, fmt.Errorf("ens: open keystore: %w", err)
		}
		defer f.Close()
		blob, err := io.ReadAll(io.LimitReader(f, maxKeystoreFileSize+1))
		if err != nil {
			return nil, fmt.Errorf("ens: read keystore %s: %w", src.Keystore, err)
		}
		if len(blob) > maxKeystoreFileSize {
			return nil, fmt.Errorf("ens: keystore %s is larger than %d bytes", src.Keystore, maxKeystoreFileSize)
		}
		pw, err := readSecretFile(src.PasswordFile, maxKeyFileSize)
		if err != nil {
			return nil, err
		}
		// Like geth's --password: the first line, without its line ending.
		line, _, _ := strings.Cut(string(pw), "\n")
		line = strings.TrimSuffix(line, "\r")
		k, err := keystore.DecryptKey(blob, line)
		if err != nil {
			if errors.Is(err, keystore.ErrDecrypt) {
				return nil, fmt.Errorf("ens: keystore %s: wrong password (from %s)", src.Keystore, src.PasswordFile)
			}
			return nil, fmt.Errorf("ens: keystore %s: %w", src.Keystore, err)
		}
		return NewSigner(k.PrivateKey), nil
	}
}

// parseHexKey parses a hex secp256k1 key. The error never quotes the input.
func parseHexKey(s, from string) (*Signer, error) {
	h := strings.TrimSpace(s)
	if strings.HasPrefix(h, "0x") || strings.HasPrefix(h, "0X") {
		h = h[2:]
	}
	if len(h) != 64 {
		return nil, fmt.Errorf("ens: %s: want a private key of 64 hex digits (0x optional), got %d characters", from, len(h))
	}
	key, err := crypto.HexToECDSA(h)
	if err != nil {
		return nil, fmt.Errorf("ens: %s: not a valid secp256k1 private key in hex", from)
	}
	return NewSigner(key), nil
}

// readSecretFile reads a small secret file under package secretfile's
// rule.
func readSecretFile(path string, max int64) ([]byte, error) {
	b, err := secretfile.Read(path, max)
	if err != nil {
		return nil, fmt.Errorf("ens: read secret: %w", err)
	}
	return b, nil
}
