package seal

import (
	"crypto/sha3"

	bls "github.com/consensys/gnark-crypto/ecc/bls12-381"
)

// KeySize is the size of Seal's symmetric keys: the base key, the shares and
// the DEM key.
const KeySize = 32

// Domain-separation tags, as in Seal's crypto crate and the TypeScript SDK.
var (
	dstID        = []byte("SUI-SEAL-IBE-BLS12381-00")     // prefixed to the full ID before hashing to G1
	dstPoP       = []byte("SUI-SEAL-IBE-BLS12381-POP-00") // proof of possession
	dstKDF       = []byte("SUI-SEAL-IBE-BLS12381-H2-00")  // per-share key from the pairing
	dstDeriveKey = []byte("SUI-SEAL-IBE-BLS12381-H3-00")  // DEM key and randomness key from the base key
)

// Key purposes of deriveKey.
const (
	purposeRandomness byte = 0
	purposeDEM        byte = 1
)

// hashID is H1(full ID): the G1 point whose master-key multiple is the user
// secret key for that identity.
func hashID(fullID []byte) bls.G1Affine { return hashToG1(dstID, fullID) }

// kdf turns the pairing value of one share into its 32-byte pad:
// SHA3-256(H2 ‖ GT(576) ‖ nonce(96) ‖ H1(id)(48) ‖ key-server object ID ‖ share index).
// nonce and gid are the compressed encodings.
func kdf(x *bls.GT, nonce *[G2Size]byte, gid *[G1Size]byte, server Address, index uint8) [KeySize]byte {
	h := sha3.New256()
	h.Write(dstKDF)
	g := gtBytes(x)
	h.Write(g[:])
	h.Write(nonce[:])
	h.Write(gid[:])
	h.Write(server[:])
	h.Write([]byte{index})
	var out [KeySize]byte
	h.Sum(out[:0])
	return out
}

// deriveKey derives the DEM key or the randomness key from the base key,
// binding the threshold, every encrypted share and every key server:
// SHA3-256(H3 ‖ base ‖ purpose ‖ threshold ‖ shares… ‖ object IDs…).
func deriveKey(purpose byte, base *[KeySize]byte, threshold uint8, shares [][KeySize]byte, services []Service) [KeySize]byte {
	h := sha3.New256()
	h.Write(dstDeriveKey)
	h.Write(base[:])
	h.Write([]byte{purpose, threshold})
	for i := range shares {
		h.Write(shares[i][:])
	}
	for i := range services {
		h.Write(services[i].ObjectID[:])
	}
	var out [KeySize]byte
	h.Sum(out[:0])
	return out
}

func xor32(a, b *[KeySize]byte) [KeySize]byte {
	var out [KeySize]byte
	for i := range out {
		out[i] = a[i] ^ b[i]
	}
	return out
}
