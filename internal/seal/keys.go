package seal

import (
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"strings"

	bls "github.com/consensys/gnark-crypto/ecc/bls12-381"
	"github.com/consensys/gnark-crypto/ecc/bls12-381/fr"
)

// redacted is what every secret prints as.
const redacted = "[REDACTED]"

// MasterKey is a key server's IBE master secret s; its public key is g2^s.
// It prints as [REDACTED] with every fmt verb and in logs.
type MasterKey struct{ s fr.Element }

// GenerateMasterKey draws a master key from rnd (crypto/rand when nil).
func GenerateMasterKey(rnd io.Reader) (*MasterKey, error) {
	s, err := randomScalar(rnd)
	if err != nil {
		return nil, fmt.Errorf("generate master key: %w", err)
	}
	return &MasterKey{s: s}, nil
}

// ParseMasterKey parses a master key as the Seal key server and seal-cli
// write it: 32 bytes big-endian, in hex with an optional 0x prefix. Errors
// never contain the key.
func ParseMasterKey(s string) (*MasterKey, error) {
	b, err := hex.DecodeString(strings.TrimPrefix(strings.TrimSpace(s), "0x"))
	if err != nil {
		return nil, fmt.Errorf("%w: master key is not hex", ErrInvalidKey)
	}
	k, err := scalarFromBytes(b)
	if err != nil {
		return nil, fmt.Errorf("%w: master key: %w", ErrInvalidKey, err)
	}
	if k.IsZero() {
		return nil, fmt.Errorf("%w: master key is zero", ErrInvalidKey)
	}
	return &MasterKey{s: k}, nil
}

// Hex returns the key's secret text form (64 hex digits). Only key files
// should need it.
func (k *MasterKey) Hex() string {
	b := k.s.Bytes()
	return hex.EncodeToString(b[:])
}

// PublicKey returns g2^s.
func (k *MasterKey) PublicKey() PublicKey {
	p := g2Base(&k.s)
	return PublicKey{p: p, b: p.Bytes()}
}

// Extract returns the user secret key H1(fullID)^s for an identity
// (package ID ‖ inner ID).
func (k *MasterKey) Extract(fullID []byte) *UserSecretKey {
	h := hashID(fullID)
	return &UserSecretKey{p: g1Mul(&h, &k.s)}
}

// ProofOfPossession is the BLS signature on G1 over
// "SUI-SEAL-IBE-BLS12381-POP-00" ‖ pk ‖ key-server object ID that
// /v1/service returns and the SDK verifies.
func (k *MasterKey) ProofOfPossession(objectID Address) [G1Size]byte {
	pk := k.PublicKey()
	h := hashToG1(dstPoP, pk.b[:], objectID[:])
	p := g1Mul(&h, &k.s)
	return p.Bytes()
}

func (k *MasterKey) String() string               { return redacted }
func (k *MasterKey) GoString() string             { return redacted }
func (k *MasterKey) Format(f fmt.State, _ rune)   { io.WriteString(f, redacted) }
func (k *MasterKey) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (k *MasterKey) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// PublicKey is a key server's public key: a compressed G2 point, checked to
// be in the subgroup when parsed.
type PublicKey struct {
	p bls.G2Affine
	b [G2Size]byte
}

// ParsePublicKey reads a 96-byte compressed G2 public key.
func ParsePublicKey(b []byte) (PublicKey, error) {
	p, err := decodeG2(b)
	if err != nil {
		return PublicKey{}, fmt.Errorf("%w: public key: %w", ErrInvalidKey, err)
	}
	return PublicKey{p: p, b: [G2Size]byte(b)}, nil
}

// ParsePublicKeyHex reads a public key in hex (seal-cli's form, optional 0x).
func ParsePublicKeyHex(s string) (PublicKey, error) {
	b, err := hex.DecodeString(strings.TrimPrefix(strings.TrimSpace(s), "0x"))
	if err != nil {
		return PublicKey{}, fmt.Errorf("%w: public key is not hex", ErrInvalidKey)
	}
	return ParsePublicKey(b)
}

// Bytes returns the 96-byte compressed encoding.
func (pk PublicKey) Bytes() [G2Size]byte { return pk.b }

// IsZero reports whether pk is the zero value (no key set).
func (pk PublicKey) IsZero() bool { return pk.b == [G2Size]byte{} }

// String returns the key in hex.
func (pk PublicKey) String() string { return hex.EncodeToString(pk.b[:]) }

// MarshalText implements encoding.TextMarshaler (hex).
func (pk PublicKey) MarshalText() ([]byte, error) { return []byte(pk.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler (hex), for config files.
func (pk *PublicKey) UnmarshalText(b []byte) error {
	v, err := ParsePublicKeyHex(string(b))
	if err != nil {
		return err
	}
	*pk = v
	return nil
}

// VerifyProofOfPossession checks a key server's PoP for its object ID.
func (pk PublicKey) VerifyProofOfPossession(objectID Address, pop []byte) error {
	sig, err := decodeG1(pop)
	if err != nil {
		return fmt.Errorf("%w: proof of possession: %w", ErrInvalidSignature, err)
	}
	h := hashToG1(dstPoP, pk.b[:], objectID[:])
	if !pairingEqual(&sig, &g2Gen, &h, &pk.p) {
		return fmt.Errorf("%w: proof of possession does not verify", ErrInvalidSignature)
	}
	return nil
}

// UserSecretKey is a derived key for one identity from one key server,
// H1(full ID)^s (a G1 point). It prints as [REDACTED].
type UserSecretKey struct{ p bls.G1Affine }

// ParseUserSecretKey reads a 48-byte compressed G1 user secret key. Verify it
// against its server's public key before use ([UserSecretKey.Verify]).
func ParseUserSecretKey(b []byte) (*UserSecretKey, error) {
	p, err := decodeG1(b)
	if err != nil {
		return nil, fmt.Errorf("%w: user secret key: %w", ErrInvalidKey, err)
	}
	return &UserSecretKey{p: p}, nil
}

// Bytes returns the 48-byte compressed encoding (the secret).
func (k *UserSecretKey) Bytes() [G1Size]byte { return k.p.Bytes() }

// Verify checks e(usk, g2) == e(H1(fullID), pk): the key was derived by the
// server holding pk for this identity.
func (k *UserSecretKey) Verify(fullID []byte, pk PublicKey) error {
	h := hashID(fullID)
	if !pairingEqual(&k.p, &g2Gen, &h, &pk.p) {
		return fmt.Errorf("%w: user secret key does not verify against the key server's public key", ErrInvalidKey)
	}
	return nil
}

func (k *UserSecretKey) String() string             { return redacted }
func (k *UserSecretKey) GoString() string           { return redacted }
func (k *UserSecretKey) Format(f fmt.State, _ rune) { io.WriteString(f, redacted) }
func (k *UserSecretKey) LogValue() slog.Value       { return slog.StringValue(redacted) }
