package seal

import (
	"encoding/hex"
	"math/big"
	"testing"

	bls "github.com/consensys/gnark-crypto/ecc/bls12-381"
)

func TestKDFRegression(t *testing.T) {
	// crates/crypto/src/ibe.rs test_kdf_regression (and move/seal kdf.move).
	r := big.NewInt(12345)
	gt := pair(&g1Gen, &g2Gen)
	var x bls.GT
	x.Exp(gt, r)
	var nonce bls.G2Affine
	nonce.ScalarMultiplicationBase(r)
	gid := hashID([]byte{0})
	nb, gb := nonce.Bytes(), gid.Bytes()
	got := kdf(&x, &nb, &gb, Address{}, 42)
	const want = "89befdfd6aecdce1305ddbca891d1c29f0507cfd5225cd6b11e52e60f088ea87"
	if hex.EncodeToString(got[:]) != want {
		t.Fatalf("kdf = %x, want %s", got, want)
	}
}

func TestHashToG1Regression(t *testing.T) {
	// crates/crypto/src/lib.rs test_hash_with_prefix_regression.
	h := hashID(FullID(Address{}, []byte{1, 2, 3, 4}))
	b := h.Bytes()
	const want = "a2f2624fda29c88ccacd286b560572d8c1261a5687e0c0cdbdcbef93bf0ec5c373563fac64a2cb5bb326cc6181ee65d7"
	if hex.EncodeToString(b[:]) != want {
		t.Fatalf("H1 = %x, want %s", b, want)
	}
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
