package repo

import (
	"encoding/hex"
	"fmt"
)

// ID is an object id: the SHA-256 of the object's plaintext.
type ID [32]byte

// String returns the id as 64 lowercase hex digits.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// Short returns the first 12 hex digits, for messages.
func (id ID) Short() string { return hex.EncodeToString(id[:6]) }

// IsZero reports whether id is all zeros (no object hashes to that).
func (id ID) IsZero() bool { return id == ID{} }

// MarshalText implements encoding.TextMarshaler (hex).
func (id ID) MarshalText() ([]byte, error) {
	b := make([]byte, 64)
	hex.Encode(b, id[:])
	return b, nil
}

// UnmarshalText implements encoding.TextUnmarshaler: exactly 64 lowercase
// hex digits.
func (id *ID) UnmarshalText(b []byte) error {
	v, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// ParseID parses 64 lowercase hex digits.
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 64 {
		return id, corruptf("id %q: want 64 hex digits", clip(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return id, corruptf("id %q: want lowercase hex", clip(s))
		}
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return ID{}, corruptf("id %q: %v", clip(s), err)
	}
	return id, nil
}

// Handle names an object: its type and id. Two objects of different types
// may share an id (a file whose bytes equal a tree's encoding), so every
// lookup is by handle.
type Handle struct {
	Type Type
	ID   ID
}

func (h Handle) String() string { return fmt.Sprintf("%s %s", h.Type, h.ID.Short()) }

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
