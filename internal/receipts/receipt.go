package receipts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Schema versions hermesd knows by name.
const (
	SchemaRuntimeV1  = "stratum/receipt/v1"  // reference runtime, no stateDeltaHash
	SchemaRuntimeV2  = "stratum/receipt/v2"  // reference runtime, agentic fields
	SchemaSnapshotV1 = "hermesd/snapshot/v1" // hermesd's own transition receipts
)

// MaxReceiptSize bounds one receipt (its compact JSON). A runtime receipt
// with a long transcript is a few kilobytes; anything near this is hostile.
const MaxReceiptSize = 1 << 20

// maxTokenIDDigits fits any uint256.
const maxTokenIDDigits = 78

var (
	// ErrMalformed is matched by every Parse failure.
	ErrMalformed = errors.New("receipts: malformed receipt")
	// ErrTooLarge means a receipt exceeds MaxReceiptSize.
	ErrTooLarge = errors.New("receipts: receipt too large")
)

// Receipt is one receipt: the exact compact JSON bytes it was received as,
// and the fields hermesd interprets, parsed from those bytes.
//
// Receipts come from Parse or NewSnapshotReceipt. The exported fields are a
// read-only view of Bytes: changing them changes neither the bytes nor what
// the log stores, and Verify checks the fields, so a hand-edited Receipt
// proves nothing. A field absent from the JSON is "" (TS: 0).
type Receipt struct {
	SchemaVersion    string
	CallID           string
	TokenID          string // the JSON number's exact decimal text
	Subscriber       string
	OutputHash       string
	BundleHashBefore string
	BundleHashAfter  string
	StateDeltaHash   string
	TS               int64 // unix seconds
	Signature        string
	AgentID          string // hermesd receipts
	ParentBlobID     string // hermesd receipts

	raw       []byte
	has       fieldSet
	otherKeys int // top-level keys outside the fields above
}

// Bytes returns the receipt's compact JSON. The slice is shared: do not
// modify it.
func (r Receipt) Bytes() []byte { return r.raw }

// String returns the compact JSON.
func (r Receipt) String() string { return string(r.raw) }

// IsSnapshot reports whether r claims to be a hermesd transition receipt.
func (r Receipt) IsSnapshot() bool { return r.SchemaVersion == SchemaSnapshotV1 }

type fieldSet uint16

const (
	fSchema fieldSet = 1 << iota
	fCallID
	fTokenID
	fSubscriber
	fOutputHash
	fBefore
	fAfter
	fDelta
	fTS
	fSignature
	fAgentID
	fParent
)

// Parse reads one receipt: a JSON object with a non-empty string callId and
// an integer ts (unix seconds, >= 0). Other known fields are optional, but
// when present must have their type (strings; tokenId a non-negative integer
// number). Surrounding whitespace is ignored and insignificant whitespace
// inside is removed (json.Compact keeps key order and string escapes
// byte for byte), so the runtime's compact receipts are stored exactly as
// received. Parse rejects invalid UTF-8, duplicate top-level keys (JSON
// parsers disagree on which value wins, so a verifier and a reader could see
// different receipts) and receipts larger than MaxReceiptSize. Keys inside
// nested values are not interpreted.
func Parse(line []byte) (Receipt, error) {
	line = bytes.TrimSpace(line)
	if len(line) > MaxReceiptSize {
		return Receipt{}, fmt.Errorf("%w: %d bytes (limit %d)", ErrTooLarge, len(line), MaxReceiptSize)
	}
	if len(line) == 0 {
		return Receipt{}, fmt.Errorf("%w: empty", ErrMalformed)
	}
	if line[0] != '{' {
		return Receipt{}, fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	if !utf8.Valid(line) {
		return Receipt{}, fmt.Errorf("%w: invalid UTF-8", ErrMalformed)
	}
	s := jsonScanner{record: true}
	ok, space := s.scan(line)
	if !ok {
		var buf bytes.Buffer
		if err := json.Compact(&buf, line); err != nil {
			return Receipt{}, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		return Receipt{}, fmt.Errorf("%w: %v", ErrMalformed, errJSONSyntax)
	}
	raw := bytes.Clone(line)
	if space {
		var buf bytes.Buffer
		buf.Grow(len(line))
		if err := json.Compact(&buf, line); err != nil {
			return Receipt{}, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		raw = buf.Bytes()
		if ok, _ := s.scan(raw); !ok {
			return Receipt{}, fmt.Errorf("%w: %v", ErrMalformed, errJSONSyntax)
		}
	}
	return fromMembers(raw, s.members())
}

// fromMembers interprets the top-level members of raw, a valid compact JSON
// object. It takes ownership of raw.
func fromMembers(raw []byte, members []member) (Receipt, error) {
	r := Receipt{raw: raw}
	var seen map[string]struct{}
	for i, m := range members {
		key, err := decodeString(raw[m.k0:m.k1])
		if err != nil {
			return Receipt{}, err
		}
		// Duplicate check: compare with earlier keys for receipt-sized
		// objects, a map once an object is large enough for that to matter.
		if len(members) <= 32 {
			for _, p := range members[:i] {
				if string(raw[p.k0:p.k1]) == string(raw[m.k0:m.k1]) {
					return Receipt{}, fmt.Errorf("%w: duplicate key %q", ErrMalformed, key)
				}
			}
		}
		if seen == nil && (len(members) > 32 || bytes.IndexByte(raw[m.k0:m.k1], '\\') >= 0) {
			// Escapes can spell one key two ways: from here on compare
			// decoded keys.
			seen = make(map[string]struct{}, len(members))
			for _, p := range members[:i] {
				k, _ := decodeString(raw[p.k0:p.k1])
				seen[k] = struct{}{}
			}
		}
		if seen != nil {
			if _, dup := seen[key]; dup {
				return Receipt{}, fmt.Errorf("%w: duplicate key %q", ErrMalformed, key)
			}
			seen[key] = struct{}{}
		}
		if err := r.setField(key, raw[m.v0:m.v1]); err != nil {
			return Receipt{}, err
		}
	}
	if r.has&fCallID == 0 || r.CallID == "" {
		return Receipt{}, fmt.Errorf("%w: callId missing or empty", ErrMalformed)
	}
	if r.has&fTS == 0 {
		return Receipt{}, fmt.Errorf("%w: ts missing", ErrMalformed)
	}
	return r, nil
}

func (r *Receipt) setField(key string, v []byte) error {
	var dst *string
	var bit fieldSet
	switch key {
	case "schemaVersion":
		dst, bit = &r.SchemaVersion, fSchema
	case "callId":
		dst, bit = &r.CallID, fCallID
	case "subscriber":
		dst, bit = &r.Subscriber, fSubscriber
	case "outputHash":
		dst, bit = &r.OutputHash, fOutputHash
	case "bundleHashBefore":
		dst, bit = &r.BundleHashBefore, fBefore
	case "bundleHashAfter":
		dst, bit = &r.BundleHashAfter, fAfter
	case "stateDeltaHash":
		dst, bit = &r.StateDeltaHash, fDelta
	case "signature":
		dst, bit = &r.Signature, fSignature
	case "agentId":
		dst, bit = &r.AgentID, fAgentID
	case "parentBlobId":
		dst, bit = &r.ParentBlobID, fParent
	case "tokenId":
		if !isInteger(v) || v[0] == '-' || len(v) > maxTokenIDDigits {
			return fmt.Errorf("%w: tokenId must be a non-negative integer number", ErrMalformed)
		}
		r.TokenID = string(v)
		r.has |= fTokenID
		return nil
	case "ts":
		if !isInteger(v) || v[0] == '-' {
			return fmt.Errorf("%w: ts must be a non-negative integer (unix seconds)", ErrMalformed)
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return fmt.Errorf("%w: ts out of range", ErrMalformed)
		}
		r.TS = n
		r.has |= fTS
		return nil
	default:
		r.otherKeys++
		return nil
	}
	if len(v) == 0 || v[0] != '"' {
		return fmt.Errorf("%w: %s must be a string", ErrMalformed, key)
	}
	s, err := decodeString(v)
	if err != nil {
		return err
	}
	*dst = s
	r.has |= bit
	return nil
}

// isInteger reports whether v, a valid JSON number, has no fraction or
// exponent.
func isInteger(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	for i, c := range v {
		if c == '-' && i == 0 {
			continue
		}
		if c < '0' || c > '9' {
			return false
		}
	}
	return v[len(v)-1] != '-'
}

// decodeString decodes a JSON string literal (with its quotes).
func decodeString(lit []byte) (string, error) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return "", fmt.Errorf("%w: bad string", ErrMalformed)
	}
	if bytes.IndexByte(lit, '\\') < 0 {
		return string(lit[1 : len(lit)-1]), nil
	}
	var s string
	if err := json.Unmarshal(lit, &s); err != nil {
		return "", fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return s, nil
}
