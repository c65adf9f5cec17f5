package devchain

import (
	"crypto/ecdsa"
	"fmt"

	"github.com/ethereum/go-ethereum/crypto"
)

// DeriveKey returns a deterministic secp256k1 key for label: keccak256 of
// "hermesd/devchain/" + label. The keys are public knowledge; they exist so
// tests and devnet scripts can name well-known accounts ("dev", "agent",
// "auditor", ...) without storing key files. Never use one on a real chain.
func DeriveKey(label string) *ecdsa.PrivateKey {
	seed := crypto.Keccak256([]byte("hermesd/devchain/" + label))
	key, err := crypto.ToECDSA(seed)
	if err != nil {
		// A keccak output is a valid scalar except with negligible
		// probability; the labels in use are fixed and checked by tests.
		panic(fmt.Sprintf("devchain: derive key %q: %v", label, err))
	}
	return key
}

// DevKey is the default dev key: DeriveKey("dev"). It is funded at genesis
// and owns the ENS root.
func DevKey() *ecdsa.PrivateKey { return DeriveKey("dev") }
