package seal

import (
	"crypto/rand"
	"fmt"
	"io"
)

// Shamir secret sharing over GF(2^8) with the Rijndael polynomial
// x^8+x^4+x^3+x+1 (0x11B) and generator 3, byte by byte, as Seal's tss and
// gf256 modules and the TypeScript SDK do. Share indices are 1..n.

var gfExp [510]byte // gfExp[i] = 3^i, doubled so log sums need no reduction
var gfLog [256]byte // gfLog[3^i] = i; gfLog[0] unused

func init() {
	x := byte(1)
	for i := 0; i < 255; i++ {
		gfExp[i] = x
		gfExp[i+255] = x
		gfLog[x] = byte(i)
		// x *= 3, i.e. x ^ 2x, reducing by 0x11B.
		d := x << 1
		if x&0x80 != 0 {
			d ^= 0x1b
		}
		x ^= d
	}
}

func gfMul(a, b byte) byte {
	if a == 0 || b == 0 {
		return 0
	}
	return gfExp[int(gfLog[a])+int(gfLog[b])]
}

// gfDiv is a/b for b ≠ 0.
func gfDiv(a, b byte) byte {
	if a == 0 {
		return 0
	}
	return gfExp[int(gfLog[a])+255-int(gfLog[b])]
}

// share is one point of the 32 byte-wise polynomials.
type share struct {
	index uint8
	value [KeySize]byte
}

// split shares secret with threshold t among n parties (indices 1..n): a
// random polynomial of degree t-1 per byte with the secret byte as constant.
func split(rnd io.Reader, secret *[KeySize]byte, t, n int) ([]share, error) {
	if t < 1 || t > n || n > MaxServices {
		return nil, fmt.Errorf("%w: threshold %d of %d shares", ErrInvalidConfig, t, n)
	}
	if rnd == nil {
		rnd = rand.Reader
	}
	// coef[j][i] is coefficient j of byte i's polynomial.
	coef := make([][KeySize]byte, t)
	coef[0] = *secret
	for j := 1; j < t; j++ {
		if _, err := io.ReadFull(rnd, coef[j][:]); err != nil {
			return nil, fmt.Errorf("split: %w", err)
		}
	}
	shares := make([]share, n)
	for s := range shares {
		x := byte(s + 1)
		shares[s].index = x
		for i := 0; i < KeySize; i++ {
			// Horner from the highest coefficient.
			var y byte
			for j := t - 1; j >= 0; j-- {
				y = gfMul(y, x) ^ coef[j][i]
			}
			shares[s].value[i] = y
		}
	}
	return shares, nil
}

// interpolateAt evaluates at x the polynomial through the shares (Lagrange),
// byte by byte. Indices must be distinct and non-zero.
func interpolateAt(shares []share, x byte) ([KeySize]byte, error) {
	var out [KeySize]byte
	if len(shares) == 0 {
		return out, fmt.Errorf("%w: no shares", ErrNotEnoughKeys)
	}
	var seen [256]bool
	for _, s := range shares {
		if s.index == 0 || seen[s.index] {
			return out, fmt.Errorf("%w: share index %d is zero or repeated", ErrMalformed, s.index)
		}
		seen[s.index] = true
	}
	for j, sj := range shares {
		// l_j(x) = Π_{m≠j} (x - x_m) / (x_j - x_m); subtraction is XOR.
		num, den := byte(1), byte(1)
		for m, sm := range shares {
			if m == j {
				continue
			}
			num = gfMul(num, x^sm.index)
			den = gfMul(den, sj.index^sm.index)
		}
		l := gfDiv(num, den)
		if l == 0 {
			continue
		}
		for i := range out {
			out[i] ^= gfMul(l, sj.value[i])
		}
	}
	return out, nil
}

// combine recovers the secret (the value at 0) from at least threshold shares.
func combine(shares []share) ([KeySize]byte, error) { return interpolateAt(shares, 0) }
