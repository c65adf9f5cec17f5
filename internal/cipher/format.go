package cipher

import (
	"bytes"
	"fmt"
	"io"
	"unicode/utf8"
)

// Format is an envelope format.
type Format int

const (
	FormatUnknown Format = iota
	FormatV1             // reference runtime envelope: u32le(1) ‖ IV ‖ AES-256-GCM
	FormatV2             // "HRMS" 2 0 0 0 ‖ Tink AES-GCM-HKDF streaming ciphertext
)

func (f Format) String() string {
	switch f {
	case FormatV1:
		return "v1"
	case FormatV2:
		return "v2"
	}
	return "unknown"
}

// DetectSize is how many leading bytes [Detect] needs to decide on any input.
const DetectSize = 8

const v2PrefixLen = DetectSize // "HRMS", version, 3 reserved bytes

var (
	v1Magic  = []byte{1, 0, 0, 0}
	v2Magic  = []byte("HRMS")
	v2Prefix = []byte{'H', 'R', 'M', 'S', 2, 0, 0, 0}
)

// Detect reports the envelope format from the first bytes of a blob. It needs
// 4 bytes for v1 and [DetectSize] bytes for v2; a shorter prefix of a known
// format is reported as ErrTruncated. Anything else is ErrUnknownFormat, with
// a hint at what the bytes look like.
func Detect(prefix []byte) (Format, error) {
	switch {
	case len(prefix) >= 4 && bytes.Equal(prefix[:4], v1Magic):
		return FormatV1, nil
	case len(prefix) >= 4 && bytes.Equal(prefix[:4], v2Magic):
		if len(prefix) < v2PrefixLen {
			return FormatUnknown, fmt.Errorf("%w: %d of %d prefix bytes", ErrTruncated, len(prefix), v2PrefixLen)
		}
		if prefix[4] != 2 {
			return FormatUnknown, fmt.Errorf("%w: hermesd envelope version %d (this build reads versions 1 and 2)", ErrUnsupportedVersion, prefix[4])
		}
		if prefix[5]|prefix[6]|prefix[7] != 0 {
			return FormatUnknown, fmt.Errorf("%w: reserved prefix bytes are % x, want zeros", ErrUnsupportedVersion, prefix[5:8])
		}
		return FormatV2, nil
	case len(prefix) == 0:
		return FormatUnknown, fmt.Errorf("%w: the blob is empty", ErrTruncated)
	case len(prefix) < 4 && (bytes.HasPrefix(v1Magic, prefix) || bytes.HasPrefix(v2Magic, prefix)):
		return FormatUnknown, fmt.Errorf("%w: the blob is only %d bytes", ErrTruncated, len(prefix))
	}
	return FormatUnknown, unknownFormatError(prefix)
}

func unknownFormatError(b []byte) error {
	n := min(len(b), 8)
	return fmt.Errorf("%w: first bytes % x (%s); refusing to treat it as plaintext", ErrUnknownFormat, b[:n], sniff(b))
}

// sniff names what an unrecognised blob looks like, so that a misconfigured
// upload (plaintext tar, a raw Tink stream, text) is recognisable from the
// error alone.
func sniff(b []byte) string {
	trimmed := bytes.TrimLeft(b, " \t\r\n")
	switch {
	case len(b) >= 262 && string(b[257:262]) == "ustar":
		return "looks like an unencrypted tar archive"
	case bytes.HasPrefix(b, []byte{0x1f, 0x8b}):
		return "looks like gzip data"
	case bytes.HasPrefix(b, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return "looks like zstd data"
	case len(b) >= 4 && b[0] == byte(v2HeaderLen) && b[1] != 0:
		// Tink's header starts with its own length; a v2 body without
		// hermesd's 8-byte prefix would start with 0x28.
		return "may be a raw Tink AES-GCM-HKDF stream without the hermesd prefix"
	case len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '['):
		return "looks like JSON text"
	case len(b) >= 4 && b[1] == 0 && b[2] == 0 && b[3] == 0 && b[0] > 1 && b[0] < 16:
		return fmt.Sprintf("looks like a reference envelope of unknown version %d", b[0])
	case isText(b):
		return "looks like text"
	}
	return "unrecognised data"
}

func isText(b []byte) bool {
	if len(b) == 0 || !utf8.Valid(b[:len(b)-min(len(b), utf8.UTFMax)]) {
		return false
	}
	for _, c := range b {
		if c < 0x20 && c != '\n' && c != '\r' && c != '\t' {
			return false
		}
	}
	return true
}

// The writers and readers this package returns hold key material (an
// expanded key, Tink's state). fmt would print their fields, and a bad verb
// makes it dereference pointers it otherwise shows as addresses, so they
// format as their name only.

func (w *v1Writer) Format(f fmt.State, _ rune) { io.WriteString(f, "cipher.v1Writer{[REDACTED]}") }
func (w *v2Writer) Format(f fmt.State, _ rune) { io.WriteString(f, "cipher.v2Writer{[REDACTED]}") }
func (r *v2Reader) Format(f fmt.State, _ rune) { io.WriteString(f, "cipher.v2Reader{[REDACTED]}") }
