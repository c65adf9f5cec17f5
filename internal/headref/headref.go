package headref

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrInvalid matches text that is not a head reference.
	ErrInvalid = errors.New("not a head reference")
	// ErrMismatch matches a read that found other bytes than a reference
	// names: another head (another commit id), or a blob of another
	// format than the digest's.
	ErrMismatch = errors.New("the aggregator served other bytes than the pointer names")
)

const (
	// MaxIDLen bounds a blob or patch id (docs/format-v3.md §1).
	MaxIDLen = 128
	// BlobIDLen is the length of a Walrus blob id; a longer id is a quilt
	// patch id (docs/format-v3.md §13).
	BlobIDLen = 43
	// DigestLen is the length of a digest's text form.
	DigestLen = 43
	// Sep separates the id from the digest.
	Sep = '.'
	// MaxLen bounds a reference's text.
	MaxLen = MaxIDLen + 1 + DigestLen
)

// Digest is a head's content digest: the SHA-256 of a v3 head's commit
// (its commit id, docs/format-v3.md §7).
type Digest [32]byte

// String is the digest's text form: URL-safe base64 without padding.
func (d Digest) String() string { return enc.EncodeToString(d[:]) }

// enc is URL-safe base64 without padding, refusing a last character
// with bits set beyond the data: every digest has one text form.
var enc = base64.RawURLEncoding.Strict()

// Ref is a parsed head reference.
type Ref struct {
	// ID is the Walrus blob id, or quilt patch id, the head is read from.
	ID string
	// Digest is the head's digest when Bound.
	Digest Digest
	// Bound says the reference carries the digest: only a head whose
	// commit has it is the one the reference names.
	Bound bool
}

// Bind returns the reference naming the head id with digest d.
func Bind(id string, d Digest) Ref { return Ref{ID: id, Digest: d, Bound: true} }

// Bare returns the reference naming id alone.
func Bare(id string) Ref { return Ref{ID: id} }

// String is the reference's text form.
func (r Ref) String() string {
	if !r.Bound {
		return r.ID
	}
	return r.ID + string(Sep) + r.Digest.String()
}

// MarshalText is String, for a reference kept in JSON (a fleet's head
// entry, a state file). The zero Ref has no text form and is refused.
func (r Ref) MarshalText() ([]byte, error) {
	if err := checkID(r.ID); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return []byte(r.String()), nil
}

// UnmarshalText is Parse.
func (r *Ref) UnmarshalText(b []byte) error {
	p, err := Parse(string(b))
	if err != nil {
		return err
	}
	*r = p
	return nil
}

// IsPatch reports whether the reference names a quilt patch rather than
// a blob: by the id's length alone (docs/format-v3.md §13).
func (r Ref) IsPatch() bool { return len(r.ID) > BlobIDLen }

// Parse reads a head reference:
//
//	ref    = id [ "." digest ]
//	id     = 1*128 b64char
//	digest = 43 b64char          ; canonical URL-safe base64 of 32 bytes
//	b64char = ALPHA / DIGIT / "-" / "_"
//
// Nothing else is accepted: no whitespace, no padding, no second
// separator, no non-canonical digest. Errors match ErrInvalid.
func Parse(s string) (Ref, error) {
	if len(s) > MaxLen {
		return Ref{}, fmt.Errorf("%w: %q is %d characters, at most %d", ErrInvalid, clip(s), len(s), MaxLen)
	}
	id, digest, bound := strings.Cut(s, string(Sep))
	if err := checkID(id); err != nil {
		return Ref{}, fmt.Errorf("%w: %q: %v", ErrInvalid, clip(s), err)
	}
	r := Ref{ID: id, Bound: bound}
	if !bound {
		return r, nil
	}
	if len(digest) != DigestLen || strings.IndexFunc(digest, func(c rune) bool { return c > 0x7f || !isB64(byte(c)) }) >= 0 {
		return Ref{}, fmt.Errorf("%w: %q: the digest is not %d characters of URL-safe base64", ErrInvalid, clip(s), DigestLen)
	}
	if n, err := enc.Decode(r.Digest[:], []byte(digest)); err != nil || n != len(r.Digest) {
		return Ref{}, fmt.Errorf("%w: %q: the digest is not URL-safe base64 of 32 bytes", ErrInvalid, clip(s))
	}
	return r, nil
}

// checkID applies the id rule of docs/format-v3.md §1.
func checkID(id string) error {
	if id == "" || len(id) > MaxIDLen {
		return fmt.Errorf("the id is %d characters, want 1 to %d", len(id), MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		if !isB64(id[i]) {
			return fmt.Errorf("byte %d of the id is not of the URL-safe base64 alphabet", i)
		}
	}
	return nil
}

func isB64(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// ID returns the id of the reference s, or s itself when it does not
// parse: for comparing and logging untrusted text.
func ID(s string) string {
	if r, err := Parse(s); err == nil {
		return r.ID
	}
	return s
}

// Same reports whether the references a and b name the same head: the
// same id, and the same digest where both carry one. (A bare reference
// written before digests and a bound one of the same id are the same
// head as far as the text can tell.) Text that is not a reference is
// the same only as itself.
func Same(a, b string) bool {
	if a == b {
		return true
	}
	ra, erra := Parse(a)
	rb, errb := Parse(b)
	if erra != nil || errb != nil || ra.ID != rb.ID {
		return false
	}
	return !ra.Bound || !rb.Bound || ra.Digest == rb.Digest
}

// clip shortens untrusted text for an error message.
func clip(s string) string {
	if len(s) > 96 {
		return s[:96] + "…"
	}
	return s
}
