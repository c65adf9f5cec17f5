package seal

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// AddressSize is the size of a Sui address or object ID.
const AddressSize = 32

// Address is a Sui address or object ID: a package ID, a key-server object
// ID, an allowlist object or a user address. Its text form is "0x" and 64
// lowercase hex digits.
type Address [AddressSize]byte

// ParseAddress parses a Sui address: "0x" (optional) and 1 to 64 hex digits,
// left-padded with zeros as Sui normalizes short addresses ("0x1").
func ParseAddress(s string) (Address, error) {
	h := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(s), "0x"), "0X")
	if h == "" || len(h) > 2*AddressSize {
		return Address{}, fmt.Errorf("%w: address %q: want 1 to 64 hex digits", ErrInvalidConfig, s)
	}
	if len(h)%2 == 1 {
		h = "0" + h
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return Address{}, fmt.Errorf("%w: address %q: not hex", ErrInvalidConfig, s)
	}
	var a Address
	copy(a[AddressSize-len(b):], b)
	return a, nil
}

// MustParseAddress is ParseAddress for constants; it panics on error.
func MustParseAddress(s string) Address {
	a, err := ParseAddress(s)
	if err != nil {
		panic(err)
	}
	return a
}

// String returns "0x" and 64 lowercase hex digits.
func (a Address) String() string { return "0x" + hex.EncodeToString(a[:]) }

// MarshalText implements encoding.TextMarshaler.
func (a Address) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler (config files).
func (a *Address) UnmarshalText(b []byte) error {
	v, err := ParseAddress(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}
