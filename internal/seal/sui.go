package seal

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"golang.org/x/crypto/blake2b"
)

// Sui signature scheme flags (the first byte of a serialized signature and
// of the data hashed into an address).
const (
	flagEd25519 = 0x00
)

// suiPrivKeyHRP is the bech32 prefix of exported Sui private keys.
const suiPrivKeyHRP = "suiprivkey"

// SuiKey is an Ed25519 Sui account key: the operator's identity that signs
// session keys. It prints as [REDACTED] with every fmt verb and in logs.
type SuiKey struct{ priv ed25519.PrivateKey }

// GenerateSuiKey draws a new Ed25519 Sui key (tests, devnets).
func GenerateSuiKey(rnd io.Reader) (*SuiKey, error) {
	_, priv, err := ed25519.GenerateKey(rnd)
	if err != nil {
		return nil, fmt.Errorf("generate Sui key: %w", err)
	}
	return &SuiKey{priv: priv}, nil
}

// NewSuiKeyFromSeed builds a key from its 32-byte Ed25519 seed.
func NewSuiKeyFromSeed(seed []byte) (*SuiKey, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: Ed25519 seed is %d bytes, want %d", ErrInvalidKey, len(seed), ed25519.SeedSize)
	}
	return &SuiKey{priv: ed25519.NewKeyFromSeed(seed)}, nil
}

// ParseSuiKey parses a Sui private key as the Sui CLI and SDK export it
// ("suiprivkey1…", bech32 of the scheme flag and the 32-byte seed), or as 64
// hex digits with an optional 0x. Only Ed25519 keys are supported. Errors
// never contain the key.
func ParseSuiKey(s string) (*SuiKey, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(strings.ToLower(s), suiPrivKeyHRP+"1") {
		hrp, data, err := bech32Decode(s)
		if err != nil {
			return nil, fmt.Errorf("%w: Sui private key: %w", ErrInvalidKey, err)
		}
		if hrp != suiPrivKeyHRP || len(data) != 1+ed25519.SeedSize {
			return nil, fmt.Errorf("%w: Sui private key: want %s with a flag and 32 bytes", ErrInvalidKey, suiPrivKeyHRP)
		}
		if data[0] != flagEd25519 {
			return nil, fmt.Errorf("%w: Sui private key scheme flag %d (only Ed25519, 0, is supported)", ErrUnsupported, data[0])
		}
		return NewSuiKeyFromSeed(data[1:])
	}
	b, err := hex.DecodeString(strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X"))
	if err != nil {
		return nil, fmt.Errorf("%w: Sui private key is neither suiprivkey1… bech32 nor hex", ErrInvalidKey)
	}
	return NewSuiKeyFromSeed(b)
}

// Export returns the key's "suiprivkey1…" form (the secret itself).
func (k *SuiKey) Export() string {
	return bech32Encode(suiPrivKeyHRP, append([]byte{flagEd25519}, k.priv.Seed()...))
}

// PublicKey returns the 32-byte Ed25519 public key.
func (k *SuiKey) PublicKey() ed25519.PublicKey { return k.priv.Public().(ed25519.PublicKey) }

// Address returns the key's Sui address: blake2b-256(flag ‖ public key).
func (k *SuiKey) Address() Address { return Ed25519Address(k.PublicKey()) }

// SignPersonalMessage signs msg as a Sui personal message and returns the
// serialized signature, base64(flag ‖ signature ‖ public key), as wallets
// and the SDK do.
func (k *SuiKey) SignPersonalMessage(msg []byte) (string, error) {
	d := personalMessageDigest(msg)
	sig := ed25519.Sign(k.priv, d[:])
	out := make([]byte, 0, 1+ed25519.SignatureSize+ed25519.PublicKeySize)
	out = append(out, flagEd25519)
	out = append(out, sig...)
	out = append(out, k.PublicKey()...)
	return base64.StdEncoding.EncodeToString(out), nil
}

func (k *SuiKey) String() string             { return redacted }
func (k *SuiKey) GoString() string           { return redacted }
func (k *SuiKey) Format(f fmt.State, _ rune) { io.WriteString(f, redacted) }
func (k *SuiKey) LogValue() slog.Value       { return slog.StringValue(redacted) }
func (k *SuiKey) MarshalText() ([]byte, error) {
	return []byte(redacted), nil
}

// Ed25519Address is the Sui address of an Ed25519 public key.
func Ed25519Address(pk ed25519.PublicKey) Address {
	h, _ := blake2b.New256(nil)
	h.Write([]byte{flagEd25519})
	h.Write(pk)
	var a Address
	h.Sum(a[:0])
	return a
}

// personalMessageDigest is what a Sui personal-message signature signs:
// blake2b-256 of the intent (PersonalMessage, V0, Sui) followed by the BCS
// vector<u8> of the message.
func personalMessageDigest(msg []byte) [32]byte {
	w := &bcsWriter{b: make([]byte, 0, 3+ulebLen(uint64(len(msg)))+len(msg))}
	w.raw([]byte{3, 0, 0})
	w.bytes(msg)
	return blake2b.Sum256(w.b)
}

// maxSignatureB64 bounds a serialized signature's base64 before decoding.
const maxSignatureB64 = 1024

// VerifyPersonalMessage checks a serialized Sui signature over a personal
// message and that it was made by addr. Only Ed25519 signatures are
// supported (ErrUnsupported for other schemes).
func VerifyPersonalMessage(msg []byte, signature string, addr Address) error {
	if len(signature) > maxSignatureB64 {
		return fmt.Errorf("%w: signature too long", ErrMalformed)
	}
	b, err := base64.StdEncoding.DecodeString(signature)
	if err != nil || len(b) == 0 {
		return fmt.Errorf("%w: signature is not base64", ErrMalformed)
	}
	if b[0] != flagEd25519 {
		return fmt.Errorf("%w: signature scheme flag %d (only Ed25519 is supported)", ErrUnsupported, b[0])
	}
	if len(b) != 1+ed25519.SignatureSize+ed25519.PublicKeySize {
		return fmt.Errorf("%w: Ed25519 signature is %d bytes, want %d", ErrMalformed, len(b), 1+ed25519.SignatureSize+ed25519.PublicKeySize)
	}
	sig, pk := b[1:1+ed25519.SignatureSize], ed25519.PublicKey(b[1+ed25519.SignatureSize:])
	if Ed25519Address(pk) != addr {
		return fmt.Errorf("%w: signer is not %s", ErrInvalidSignature, addr)
	}
	d := personalMessageDigest(msg)
	if !ed25519.Verify(pk, d[:], sig) {
		return fmt.Errorf("%w: personal-message signature does not verify", ErrInvalidSignature)
	}
	return nil
}
