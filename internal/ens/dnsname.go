package ens

import (
	"errors"
	"fmt"
	"strings"
)

// maxLabel is the longest label DNS wire format can carry (one length byte).
const maxLabel = 255

// DNSEncode returns the DNS wire format (RFC 1035 §3.1) of a name that is
// already normalised, as ENSIP-10's resolve(bytes name, bytes data) and the
// Universal Resolver take it: each label as a length byte and its bytes,
// then a zero byte; the root ("") is the zero byte alone. A label longer
// than 255 bytes cannot be encoded (ENS's workaround, a "[labelhash]"
// label, is left to names that need it; agents' names do not) and is an
// error wrapping ErrInvalidName, as is an empty label.
func DNSEncode(norm string) ([]byte, error) {
	if norm == "" {
		return []byte{0}, nil
	}
	out := make([]byte, 0, len(norm)+2)
	for label := range strings.SplitSeq(norm, ".") {
		switch {
		case label == "":
			return nil, fmt.Errorf("%w %q: empty label", ErrInvalidName, norm)
		case len(label) > maxLabel:
			return nil, fmt.Errorf("%w: a label of %d bytes is longer than DNS wire format allows (%d)", ErrInvalidName, len(label), maxLabel)
		}
		out = append(out, byte(len(label)))
		out = append(out, label...)
	}
	return append(out, 0), nil
}

var errDNSName = errors.New("ens: malformed DNS-encoded name")

// dnsDecode is DNSEncode's inverse: it fails unless b is exactly one
// encoded name (labels of 1..255 bytes without a dot, then a zero byte,
// nothing after it).
func dnsDecode(b []byte) (string, error) {
	var labels []string
	for i := 0; ; {
		if i >= len(b) {
			return "", fmt.Errorf("%w: no terminating zero byte", errDNSName)
		}
		n := int(b[i])
		if n == 0 {
			if i+1 != len(b) {
				return "", fmt.Errorf("%w: %d bytes after the end", errDNSName, len(b)-i-1)
			}
			return strings.Join(labels, "."), nil
		}
		if i+1+n > len(b) {
			return "", fmt.Errorf("%w: label of %d bytes runs past the end", errDNSName, n)
		}
		label := string(b[i+1 : i+1+n])
		if strings.Contains(label, ".") {
			return "", fmt.Errorf("%w: a label holds a dot", errDNSName)
		}
		labels = append(labels, label)
		i += 1 + n
	}
}
