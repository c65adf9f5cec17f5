package receipts

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// Verification failures, matched with errors.Is on the error Verify returns.
var (
	ErrUnknownSigner = errors.New("receipts: signer is not a trusted operator")
	ErrUnsigned      = errors.New("receipts: receipt is not signed")
	ErrMissingFields = errors.New("receipts: digest fields missing")
	ErrBadSignature  = errors.New("receipts: invalid signature")
	ErrBinding       = errors.New("receipts: hermesd receipt fields do not match what was signed")
	// ErrAmbiguousToken: the tokenId is not exactly representable as a
	// JavaScript number (JSExact).
	ErrAmbiguousToken = errors.New("receipts: tokenId is not exactly representable as a JavaScript number")
)

// Status is the outcome of verifying one receipt.
type Status int

const (
	// StatusTrusted: the signature is valid and its signer is trusted.
	StatusTrusted Status = iota + 1
	// StatusUnknownSigner: the signature is valid, but the signer is not in
	// the trusted list. Note that for a runtime receipt a tampered digest
	// field also lands here: it recovers to some unrelated address.
	StatusUnknownSigner
	// StatusUnsigned: no signature, or the runtime's "0x" placeholder.
	StatusUnsigned
	// StatusMissingFields: subscriber, outputHash or stateDeltaHash absent.
	StatusMissingFields
	// StatusBadSignature: not 65 bytes of hex, v not 27/28, high s, or no
	// key recovers from it (for hermesd receipts also: signer is not the
	// subscriber).
	StatusBadSignature
	// StatusBadBinding: a hermesd receipt whose outputHash, stateDeltaHash
	// or field set does not match its other fields.
	StatusBadBinding
	// StatusMalformed: the line is not a receipt at all (Import only).
	StatusMalformed
	// StatusAmbiguousToken: the tokenId is a number JavaScript cannot hold
	// exactly (JSExact): the reference runtime and every JavaScript
	// verifier would read another token and recover another signer.
	StatusAmbiguousToken
	// StatusForeignToken: a trusted receipt of a token the agent does not
	// hold, that could not be handed to the agent holding it (ImportRouted).
	StatusForeignToken
)

var statusNames = map[Status]string{
	StatusTrusted:        "trusted",
	StatusUnknownSigner:  "unknown-signer",
	StatusUnsigned:       "unsigned",
	StatusMissingFields:  "missing-fields",
	StatusBadSignature:   "bad-signature",
	StatusBadBinding:     "bad-binding",
	StatusMalformed:      "malformed",
	StatusAmbiguousToken: "ambiguous-token-id",
	StatusForeignToken:   "foreign-token",
}

func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return "status(" + strconv.Itoa(int(s)) + ")"
}

// MarshalText writes the status name, for JSON reports.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a status name, so that a client of the daemon's API
// can decode the reports it sends.
func (s *Status) UnmarshalText(b []byte) error {
	for st, name := range statusNames {
		if name == string(b) {
			*s = st
			return nil
		}
	}
	return fmt.Errorf("receipts: unknown status %q", clip(string(b)))
}

// Verified reports whether the signature itself is valid (trusted or not).
func (s Status) Verified() bool { return s == StatusTrusted || s == StatusUnknownSigner }

// VerifyResult is what Verify found.
type VerifyResult struct {
	Status Status
	// Signer is the recovered address when the signature parsed and
	// recovered (StatusTrusted, StatusUnknownSigner, and hermesd receipts
	// that failed a binding check); zero otherwise.
	Signer common.Address
	// Reason explains a failure in a few words; "" for StatusTrusted.
	Reason string
}

// DigestFields are the six values the runtime's signature covers.
type DigestFields struct {
	CallID         string
	TokenID        string // decimal; "" when the receipt has none
	Subscriber     string // as written in the receipt, case kept
	OutputHash     string
	StateDeltaHash string
	TS             int64
}

// DigestFields returns the fields of r that its signature covers.
func (r Receipt) DigestFields() DigestFields {
	return DigestFields{
		CallID:         r.CallID,
		TokenID:        r.TokenID,
		Subscriber:     r.Subscriber,
		OutputHash:     r.OutputHash,
		StateDeltaHash: r.StateDeltaHash,
		TS:             r.TS,
	}
}

// Digest is keccak256(utf8(callId|tokenId|subscriber|outputHash|stateDeltaHash|ts)),
// tokenId and ts in decimal: the reference runtime's receipt digest.
func Digest(f DigestFields) common.Hash {
	var b bytes.Buffer
	b.Grow(len(f.CallID) + len(f.TokenID) + len(f.Subscriber) + len(f.OutputHash) + len(f.StateDeltaHash) + 32)
	b.WriteString(f.CallID)
	b.WriteByte('|')
	b.WriteString(f.TokenID)
	b.WriteByte('|')
	b.WriteString(f.Subscriber)
	b.WriteByte('|')
	b.WriteString(f.OutputHash)
	b.WriteByte('|')
	b.WriteString(f.StateDeltaHash)
	b.WriteByte('|')
	b.WriteString(strconv.FormatInt(f.TS, 10))
	return crypto.Keccak256Hash(b.Bytes())
}

// eip191Prefix is personal_sign's prefix for a 32-byte message.
const eip191Prefix = "\x19Ethereum Signed Message:\n32"

// PersonalHash is the EIP-191 personal_sign hash of the 32 raw digest bytes:
// keccak256("\x19Ethereum Signed Message:\n32" ‖ digest).
func PersonalHash(digest common.Hash) common.Hash {
	return crypto.Keccak256Hash([]byte(eip191Prefix), digest[:])
}

// Sign signs f the way the runtime does (EIP-191 personal_sign over the
// digest) and returns the signature as 0x + 130 lowercase hex: r‖s‖v with
// v = 27 or 28. go-ethereum signs deterministically (RFC 6979) with low s.
func Sign(f DigestFields, key *ecdsa.PrivateKey) (string, error) {
	if key == nil {
		return "", errors.New("receipts: sign: no key")
	}
	h := PersonalHash(Digest(f))
	sig, err := crypto.Sign(h[:], key)
	if err != nil {
		return "", fmt.Errorf("receipts: sign: %w", err)
	}
	sig[64] += 27
	return "0x" + hex.EncodeToString(sig), nil
}

// secp256k1halfN bounds s: a signature with s > n/2 is the malleated twin
// of a valid one. Every signer we know of (viem, ethers, go-ethereum,
// libsecp256k1) emits low s, so we reject high s rather than accept two
// encodings of one signature.
var secp256k1halfN = new(big.Int).Rsh(crypto.S256().Params().N, 1)

// RecoverSigner returns the address that signed f with sig. Errors wrap
// ErrUnsigned or ErrBadSignature.
func RecoverSigner(f DigestFields, sig string) (common.Address, error) {
	if sig == "" || sig == "0x" {
		return common.Address{}, ErrUnsigned
	}
	if len(sig) != 132 || sig[:2] != "0x" {
		return common.Address{}, fmt.Errorf("%w: want 0x and 130 hex digits, got %d characters", ErrBadSignature, len(sig))
	}
	raw, err := hex.DecodeString(sig[2:])
	if err != nil {
		return common.Address{}, fmt.Errorf("%w: not hex", ErrBadSignature)
	}
	v := raw[64]
	if v != 27 && v != 28 {
		return common.Address{}, fmt.Errorf("%w: v = %d, want 27 or 28", ErrBadSignature, v)
	}
	rr, s := new(big.Int).SetBytes(raw[:32]), new(big.Int).SetBytes(raw[32:64])
	if s.Cmp(secp256k1halfN) > 0 {
		return common.Address{}, fmt.Errorf("%w: high s (malleable encoding)", ErrBadSignature)
	}
	if !crypto.ValidateSignatureValues(v-27, rr, s, true) {
		return common.Address{}, fmt.Errorf("%w: r or s out of range", ErrBadSignature)
	}
	raw[64] = v - 27
	h := PersonalHash(Digest(f))
	pub, err := crypto.SigToPub(h[:], raw)
	if err != nil {
		return common.Address{}, fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	return crypto.PubkeyToAddress(*pub), nil
}

// Recover returns the address that signed r. Errors wrap ErrMissingFields,
// ErrUnsigned or ErrBadSignature. It does not check hermesd's field binding;
// Verify does.
func Recover(r *Receipt) (common.Address, error) {
	if missing := r.missingDigestFields(); missing != "" {
		return common.Address{}, fmt.Errorf("%w: %s", ErrMissingFields, missing)
	}
	return RecoverSigner(r.DigestFields(), r.Signature)
}

func (r *Receipt) missingDigestFields() string {
	var m []string
	for _, f := range []struct {
		bit  fieldSet
		name string
	}{{fSubscriber, "subscriber"}, {fOutputHash, "outputHash"}, {fDelta, "stateDeltaHash"}} {
		if r.has&f.bit == 0 {
			m = append(m, f.name)
		}
	}
	return strings.Join(m, ", ")
}

// Verify checks r's signature and, for hermesd receipts, that every hermesd
// field is bound into what was signed (see the package documentation). The
// error is nil exactly when the status is StatusTrusted; otherwise it wraps
// the matching sentinel (ErrUnknownSigner, ErrUnsigned, ErrMissingFields,
// ErrBadSignature, ErrBinding). A receipt that claims a hermesd schema
// version this package does not know fails with ErrBinding.
func Verify(r *Receipt, trusted []common.Address) (VerifyResult, error) {
	if r.has&fTokenID != 0 {
		if reads, ok := JSExact(r.TokenID); !ok {
			// hermesd would verify the exact digits; everything written
			// in JavaScript (the reference runtime's importer, viem)
			// would verify, and file the receipt under, another token.
			err := fmt.Errorf("%w: %s reads as %s there (beyond 2^53, JavaScript rounds), so the reference runtime would file it under that token and recover another signer", ErrAmbiguousToken, clip(r.TokenID), reads)
			return VerifyResult{Status: StatusAmbiguousToken, Reason: err.Error()}, err
		}
	}
	signer, err := Recover(r)
	if err != nil {
		res := VerifyResult{Reason: err.Error()}
		switch {
		case errors.Is(err, ErrMissingFields):
			res.Status = StatusMissingFields
		case errors.Is(err, ErrUnsigned):
			res.Status = StatusUnsigned
		default:
			res.Status = StatusBadSignature
		}
		return res, err
	}
	if strings.HasPrefix(r.SchemaVersion, "hermesd/") {
		if err := checkSnapshotBinding(r, signer); err != nil {
			st := StatusBadBinding
			if errors.Is(err, ErrBadSignature) {
				st = StatusBadSignature
			}
			return VerifyResult{Status: st, Signer: signer, Reason: err.Error()}, err
		}
	}
	if !slices.Contains(trusted, signer) {
		err := fmt.Errorf("%w: %s", ErrUnknownSigner, signer.Hex())
		return VerifyResult{Status: StatusUnknownSigner, Signer: signer, Reason: err.Error()}, err
	}
	return VerifyResult{Status: StatusTrusted, Signer: signer}, nil
}

// MaxSafeTokenID is JavaScript's Number.MAX_SAFE_INTEGER, 2^53 − 1: every
// integer up to it is exact as a JavaScript number; above it only some
// are (JSExact).
const MaxSafeTokenID = 1<<53 - 1

// JSExact reports whether JavaScript reads the non-negative decimal
// integer s (a receipt's tokenId, as written) as exactly s: whether
// String(Number(s)) === s, which holds up to 2^53 − 1 and, beyond, only
// for integers a float64 holds exactly and below 10^21 (where JavaScript
// switches to exponent notation). reads is what JavaScript reads.
func JSExact(s string) (reads string, ok bool) {
	if len(s) <= 15 { // below 10^15 < 2^53
		return s, true
	}
	n, good := new(big.Int).SetString(s, 10)
	if !good || n.Sign() < 0 {
		return "NaN", false
	}
	f, _ := new(big.Float).SetInt(n).Float64()
	if f >= 1e21 || math.IsInf(f, 0) {
		reads = strconv.FormatFloat(f, 'g', -1, 64) // JavaScript: 1e+21 and up in exponent form
	} else {
		reads = strconv.FormatFloat(f, 'f', -1, 64)
	}
	return reads, reads == s
}

// ParseAddresses parses 0x-prefixed 40-hex-digit addresses (any case).
func ParseAddresses(ss []string) ([]common.Address, error) {
	out := make([]common.Address, 0, len(ss))
	for _, s := range ss {
		s = strings.TrimSpace(s)
		if len(s) != 42 || !strings.HasPrefix(s, "0x") || !common.IsHexAddress(s) {
			return nil, fmt.Errorf("receipts: %q is not an address (0x + 40 hex digits)", s)
		}
		out = append(out, common.HexToAddress(s))
	}
	return out, nil
}
