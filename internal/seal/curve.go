package seal

import (
	"crypto/rand"
	"fmt"
	"io"
	"math/big"

	bls "github.com/consensys/gnark-crypto/ecc/bls12-381"
	"github.com/consensys/gnark-crypto/ecc/bls12-381/fp"
	"github.com/consensys/gnark-crypto/ecc/bls12-381/fr"
)

// Encoded sizes on BLS12-381 (compressed ZCash/IETF point encodings, as
// blst and fastcrypto write them).
const (
	G1Size     = 48  // user secret keys, ElGamal public keys, PoPs
	G2Size     = 96  // key-server public keys, nonces, ElGamal verification keys
	GTSize     = 576 // pairing results, only ever hashed
	ScalarSize = 32  // big-endian scalars mod r
)

// dstG1 is the RFC 9380 suite ID of the standard BLS min-sig hash to G1.
// Seal does not use its own DST: it prefixes its tags to the message.
var dstG1 = []byte("BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_")

var (
	g1Gen bls.G1Affine
	g2Gen bls.G2Affine
)

func init() { _, _, g1Gen, g2Gen = bls.Generators() }

// hashToG1 is fastcrypto's G1Element::hash_to_group_element: RFC 9380
// hash_to_curve with the min-sig suite, over the concatenated parts.
func hashToG1(parts ...[]byte) bls.G1Affine {
	var msg []byte
	for _, p := range parts {
		msg = append(msg, p...)
	}
	p, err := bls.HashToG1(msg, dstG1)
	if err != nil {
		// HashToG1 only fails for a DST longer than 255 bytes.
		panic("seal: hash to G1: " + err.Error())
	}
	return p
}

// decodeG1 reads a compressed G1 point from untrusted bytes: exactly 48
// bytes, the compression flag set, on the curve, in the prime-order
// subgroup, and not the identity.
func decodeG1(b []byte) (bls.G1Affine, error) {
	var p bls.G1Affine
	if len(b) != G1Size {
		return p, fmt.Errorf("G1 point: %d bytes, want %d", len(b), G1Size)
	}
	if b[0]&0x80 == 0 {
		return p, fmt.Errorf("G1 point: not in compressed form")
	}
	n, err := p.SetBytes(b)
	if err != nil {
		return p, fmt.Errorf("G1 point: %w", err)
	}
	if n != G1Size || p.IsInfinity() {
		return p, fmt.Errorf("G1 point: the identity is not allowed")
	}
	return p, nil
}

// decodeG2 is decodeG1 for 96-byte G2 points.
func decodeG2(b []byte) (bls.G2Affine, error) {
	var p bls.G2Affine
	if len(b) != G2Size {
		return p, fmt.Errorf("G2 point: %d bytes, want %d", len(b), G2Size)
	}
	if b[0]&0x80 == 0 {
		return p, fmt.Errorf("G2 point: not in compressed form")
	}
	n, err := p.SetBytes(b)
	if err != nil {
		return p, fmt.Errorf("G2 point: %w", err)
	}
	if n != G2Size || p.IsInfinity() {
		return p, fmt.Errorf("G2 point: the identity is not allowed")
	}
	return p, nil
}

// CheckG1 checks untrusted bytes are a compressed G1 point in the subgroup,
// not the identity.
func CheckG1(b []byte) error {
	_, err := decodeG1(b)
	return err
}

// CheckG2 is CheckG1 for G2.
func CheckG2(b []byte) error {
	_, err := decodeG2(b)
	return err
}

// gtBytes serializes a GT element as fastcrypto (blst) does, which is not
// gnark's native order: twelve 48-byte big-endian Fp values, looping over the
// Fp6 coefficient (B0, B1, B2), then the Fp12 half (C0, C1), then the Fp2
// half (A0, A1). The TypeScript SDK reaches the same order by permuting
// noble's Fp2 pairs with [0,3,1,4,2,5].
func gtBytes(e *bls.GT) [GTSize]byte {
	var out [GTSize]byte
	put := func(i int, x *fp.Element) {
		fp.BigEndian.PutElement((*[fp.Bytes]byte)(out[i*fp.Bytes:(i+1)*fp.Bytes]), *x)
	}
	halves := [2]*bls.E6{&e.C0, &e.C1}
	i := 0
	for b := 0; b < 3; b++ {
		for _, h := range halves {
			c := [3]*bls.E2{&h.B0, &h.B1, &h.B2}[b]
			put(i, &c.A0)
			put(i+1, &c.A1)
			i += 2
		}
	}
	return out
}

// pair is e(p, q). The inputs are valid subgroup points, so it cannot fail.
func pair(p *bls.G1Affine, q *bls.G2Affine) bls.GT {
	e, err := bls.Pair([]bls.G1Affine{*p}, []bls.G2Affine{*q})
	if err != nil {
		panic("seal: pairing: " + err.Error())
	}
	return e
}

// pairingEqual reports e(a, b) == e(c, d) with one multi-pairing.
func pairingEqual(a *bls.G1Affine, b *bls.G2Affine, c *bls.G1Affine, d *bls.G2Affine) bool {
	var negC bls.G1Affine
	negC.Neg(c)
	ok, err := bls.PairingCheck([]bls.G1Affine{*a, negC}, []bls.G2Affine{*b, *d})
	return err == nil && ok
}

// scalarBig converts a scalar for gnark's scalar multiplications.
func scalarBig(s *fr.Element) *big.Int {
	var b big.Int
	return s.BigInt(&b)
}

// randomScalar draws a uniform non-zero scalar from rnd (crypto/rand when
// nil): 64 bytes reduced mod r, so the bias is negligible.
func randomScalar(rnd io.Reader) (fr.Element, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	var s fr.Element
	var buf [64]byte
	for {
		if _, err := io.ReadFull(rnd, buf[:]); err != nil {
			return s, fmt.Errorf("random scalar: %w", err)
		}
		s.SetBytes(buf[:])
		if !s.IsZero() {
			return s, nil
		}
	}
}

// scalarFromBytes reads a canonical 32-byte big-endian scalar (< r).
func scalarFromBytes(b []byte) (fr.Element, error) {
	var s fr.Element
	if len(b) != ScalarSize {
		return s, fmt.Errorf("scalar: %d bytes, want %d", len(b), ScalarSize)
	}
	if err := s.SetBytesCanonical(b); err != nil {
		return s, fmt.Errorf("scalar: not below the group order")
	}
	return s, nil
}

func g1Mul(p *bls.G1Affine, s *fr.Element) bls.G1Affine {
	var r bls.G1Affine
	r.ScalarMultiplication(p, scalarBig(s))
	return r
}

func g1Base(s *fr.Element) bls.G1Affine {
	var r bls.G1Affine
	r.ScalarMultiplicationBase(scalarBig(s))
	return r
}

func g2Base(s *fr.Element) bls.G2Affine {
	var r bls.G2Affine
	r.ScalarMultiplicationBase(scalarBig(s))
	return r
}
