package cipher

import "errors"

// Sentinel errors. Errors returned by this package wrap one of them with
// context, so callers branch with errors.Is.
var (
	// ErrInvalidKey: a key string or key file is not a 32-byte base64url key.
	ErrInvalidKey = errors.New("cipher: invalid snapshot key")

	// ErrUnknownFormat: the input is not a hermesd blob at all (neither
	// envelope's leading bytes). It is never treated as plaintext.
	ErrUnknownFormat = errors.New("cipher: not a hermesd encrypted blob")

	// ErrUnsupportedVersion: a hermesd v2 prefix with a version or reserved
	// bytes this build does not know.
	ErrUnsupportedVersion = errors.New("cipher: unsupported blob format")

	// ErrTooLarge: a whole-buffer (v1) envelope or plaintext exceeds its cap.
	ErrTooLarge = errors.New("cipher: size cap exceeded")

	// ErrNoIdentity: a v1 envelope carries no agent identity to probe.
	ErrNoIdentity = errors.New("cipher: v1 envelopes are not bound to an agent identity")

	// ErrAuth matches every AEAD authentication failure (v1 and v2); the
	// returned *AuthError also matches one of the more specific errors below
	// for v2.
	ErrAuth = errors.New("cipher: authentication failed")

	// ErrAuthFirstSegment: the first v2 segment does not authenticate. A wrong
	// key, a wrong agent identity and a corrupted start of the blob are
	// indistinguishable by design; [ProbeIdentity] tells a wrong identity
	// apart when the right one is among the candidates.
	ErrAuthFirstSegment = errors.New("cipher: first segment does not authenticate")

	// ErrCorrupted: the blob is damaged after its first segment authenticated
	// (so key and identity are right), or its stream header is malformed.
	ErrCorrupted = errors.New("cipher: blob corrupted or tampered with")

	// ErrTruncated: the blob ends before its end: inside the header, inside a
	// segment's tag, or (shown by re-reading a seekable source, or most
	// likely otherwise) exactly at a segment boundary.
	ErrTruncated = errors.New("cipher: blob truncated")

	// ErrTrailingData: bytes follow the blob's final segment.
	ErrTrailingData = errors.New("cipher: trailing data after the end of the blob")
)

// AuthError is an authentication failure. It matches ErrAuth and Reason with
// errors.Is. For v2 it says which segment failed; Segment and Offset are zero
// for v1.
type AuthError struct {
	Format  Format
	Reason  error // ErrAuthFirstSegment, ErrCorrupted, ErrTruncated, ErrTrailingData; nil for v1
	Segment int64 // index of the segment that failed
	Offset  int64 // blob offset of the first byte of that segment
	Final   bool  // the input ended inside (or right after) that segment
	msg     string
}

func (e *AuthError) Error() string { return e.msg }

// Unwrap returns the specific reason (nil for v1).
func (e *AuthError) Unwrap() error { return e.Reason }

// Is reports whether target is ErrAuth; errors.Is checks Reason through
// Unwrap.
func (e *AuthError) Is(target error) bool { return target == ErrAuth }
