package cipher

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/hermesd/hermesd/internal/secretfile"
)

// KeySize is the size of a snapshot key: AES-256.
const KeySize = 32

// Key is a snapshot key: 32 random bytes, the AES-256-GCM key of v1 envelopes
// and the Tink main key of v2 ones. Its text form, base64url without padding
// (43 characters), is returned by [Key.Secret] and nothing else.
//
// A Key never prints: with every fmt verb (%v, %+v, %#v, %s, %q, %x, %X, %d,
// ...), in slog and in JSON or text encodings it shows as "[REDACTED]", and
// it refuses binary encodings (gob) and decoding from any of them (keys are
// read from files or the environment, never from a config body). One limit
// is fmt's: it cannot call methods on an unexported struct field, so a Key
// kept in one prints as raw bytes when the struct is formatted; hold keys in
// exported fields or behind a pointer.
type Key [KeySize]byte

const redacted = "[REDACTED]"

// errNoEncoding is returned by the encoders and decoders a key refuses.
var errNoEncoding = fmt.Errorf("%w: a snapshot key is never encoded or decoded as data; use Key.Secret, ParseKey or ReadKeyFile", ErrInvalidKey)

// GenerateKey returns a new random key from crypto/rand.
func GenerateKey() (Key, error) {
	var k Key
	if _, err := rand.Read(k[:]); err != nil {
		return Key{}, fmt.Errorf("generate key: %w", err)
	}
	if err := k.check(); err != nil { // a broken random source
		return Key{}, fmt.Errorf("generate key: %w", err)
	}
	return k, nil
}

// Secret returns the key's text form, 43 characters of unpadded base64url:
// the secret itself, for [WriteKeyFile] and tests. Every other way of
// turning a Key into text redacts it.
func (k Key) Secret() string { return base64.RawURLEncoding.EncodeToString(k[:]) }

// String returns "[REDACTED]".
func (Key) String() string { return redacted }

// GoString returns "[REDACTED]" (%#v).
func (Key) GoString() string { return redacted }

// Format prints "[REDACTED]" for every verb, so %x, %d or %q cannot show the
// bytes either.
func (Key) Format(f fmt.State, _ rune) { io.WriteString(f, redacted) }

// LogValue keeps the key out of structured logs.
func (Key) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalText returns "[REDACTED]", so text encoders and log handlers that
// use it show the redaction. It does not parse back as a key.
func (Key) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// MarshalJSON returns the JSON string "[REDACTED]".
func (Key) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalBinary refuses: a binary encoding (gob) is for storage, and a key
// is only ever stored by WriteKeyFile.
func (Key) MarshalBinary() ([]byte, error) { return nil, errNoEncoding }

// UnmarshalText refuses: keys come from ReadKeyFile or ParseKey.
func (*Key) UnmarshalText([]byte) error { return errNoEncoding }

// UnmarshalJSON refuses: keys come from ReadKeyFile or ParseKey.
func (*Key) UnmarshalJSON([]byte) error { return errNoEncoding }

// maxWeakPeriod: a key made of a pattern of up to this many bytes repeated
// (all bytes equal, "abab...", a repeated 8-byte word) is refused. Such keys
// come from placeholders and hand-made test values, never from a random
// source: the chance that 32 random bytes repeat with a period of 8 or less
// is below 2^-190.
const maxWeakPeriod = 8

// check refuses keys without entropy.
func (k Key) check() error {
	for p := 1; p <= maxWeakPeriod; p++ {
		if periodic(k[:], p) {
			if p == 1 {
				return fmt.Errorf("%w: all %d bytes are equal, which no random key is (a placeholder?); generate one with 'hermesd keygen'", ErrInvalidKey, KeySize)
			}
			return fmt.Errorf("%w: it repeats a %d-byte pattern, which no random key does (a placeholder?); generate one with 'hermesd keygen'", ErrInvalidKey, p)
		}
	}
	return nil
}

// periodic reports whether b[i] == b[i-p] for every i >= p.
func periodic(b []byte, p int) bool {
	for i := p; i < len(b); i++ {
		if b[i] != b[i-p] {
			return false
		}
	}
	return true
}

// ParseKey parses a key's text form: base64url, with or without "=" padding,
// surrounding whitespace ignored. Like the reference runtime, which maps
// '-' to '+' and '_' to '/' before decoding, it also accepts the standard
// base64 alphabet. The key must decode to exactly 32 bytes: a 16- or 24-byte
// key is refused rather than silently giving AES-128 or AES-192, and so is a
// key without entropy (all bytes equal, or a pattern of up to 8 bytes
// repeated). Errors wrap ErrInvalidKey and never contain the key.
func ParseKey(s string) (Key, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Key{}, fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	// Padding is optional, but when present it must be the right amount.
	if len(s)%4 == 0 {
		s = strings.TrimSuffix(s, "=")
		s = strings.TrimSuffix(s, "=")
	}
	if strings.ContainsRune(s, '=') {
		return Key{}, fmt.Errorf("%w: misplaced '=' padding", ErrInvalidKey)
	}
	s = strings.NewReplacer("+", "-", "/", "_").Replace(s)
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		var ce base64.CorruptInputError
		if errors.As(err, &ce) {
			return Key{}, fmt.Errorf("%w: not base64url (bad character or length at offset %d)", ErrInvalidKey, int64(ce))
		}
		return Key{}, fmt.Errorf("%w: not base64url", ErrInvalidKey)
	}
	if len(b) != KeySize {
		hint := ""
		if len(s) == 2*KeySize && isHex(s) {
			hint = " (it looks like hex; keys are base64url)"
		}
		return Key{}, fmt.Errorf("%w: decoded to %d bytes, want %d (AES-256)%s; generate one with 'hermesd keygen'", ErrInvalidKey, len(b), KeySize, hint)
	}
	var k Key
	copy(k[:], b)
	if err := k.check(); err != nil {
		return Key{}, err
	}
	return k, nil
}

func isHex(s string) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// maxKeyFileSize bounds how much of a key file is read: a key is 43 bytes
// plus a newline.
const maxKeyFileSize = 4096

// ReadKeyFile reads a key written by [WriteKeyFile] (or any file holding a
// key's text form). The file must pass package secretfile's rule: a
// regular file that others cannot access and its group cannot write
// (group read is allowed: systemd credentials, Kubernetes fsGroup).
func ReadKeyFile(path string) (Key, error) {
	b, err := secretfile.Read(path, maxKeyFileSize)
	if errors.Is(err, secretfile.ErrTooLarge) {
		return Key{}, fmt.Errorf("key file: %w: %w", ErrInvalidKey, err)
	}
	if err != nil {
		return Key{}, fmt.Errorf("read key file: %w", err)
	}
	k, err := ParseKey(string(b))
	if err != nil {
		return Key{}, fmt.Errorf("key file %s: %w", path, err)
	}
	return k, nil
}

// WriteKeyFile creates path with mode 0600 and writes the key's text form
// ([Key.Secret]) and a newline. It never overwrites: if path exists the error
// wraps fs.ErrExist. A key that [ParseKey] would refuse is not written. The
// file and its directory are synced before it returns.
func WriteKeyFile(path string, k Key) error {
	if err := k.check(); err != nil {
		return fmt.Errorf("write key file: %w", err)
	}
	if err := secretfile.Create(path, []byte(k.Secret()+"\n")); err != nil {
		return fmt.Errorf("write key file: %w", err)
	}
	return nil
}
