// Package sha256x computes SHA-256 (FIPS 180-4), like crypto/sha256, and
// in addition feeds the same bytes to two digests at once.
//
// The builder hashes every byte of a large file twice: into the file's
// digest (the bundle hash) and into the id of the chunk holding it.
// SHA-NI rounds are a chain of dependent instructions, so one stream
// leaves most of a core idle; WriteBoth runs the two streams' rounds
// interleaved (block_amd64.s), which takes little more time than one.
// Elsewhere, or without SHA-NI, it is two plain passes in Go.
//
// Digests equal crypto/sha256's; the tests and FuzzWriteBoth compare them.
package sha256x

import (
	"encoding/binary"
	"math/bits"
)

// Size is the size of a digest in bytes.
const Size = 32

const blockSize = 64

// Digest is a SHA-256 state. The zero value is not ready: call Reset.
type Digest struct {
	h   [8]uint32
	x   [blockSize]byte
	nx  int
	len uint64
}

var iv = [8]uint32{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19}

// New returns a reset digest.
func New() *Digest {
	d := new(Digest)
	d.Reset()
	return d
}

// Reset starts a new message.
func (d *Digest) Reset() {
	d.h, d.nx, d.len = iv, 0, 0
}

// Write adds p to the message. It never fails.
func (d *Digest) Write(p []byte) (int, error) {
	n := len(p)
	d.len += uint64(n)
	if d.nx > 0 {
		c := copy(d.x[d.nx:], p)
		d.nx += c
		p = p[c:]
		if d.nx < blockSize {
			return n, nil
		}
		blocks(&d.h, d.x[:])
		d.nx = 0
	}
	if k := len(p) &^ (blockSize - 1); k > 0 {
		blocks(&d.h, p[:k])
		p = p[k:]
	}
	d.nx = copy(d.x[:], p)
	return n, nil
}

// Sum256 returns the digest of the message so far; d is unchanged.
func (d *Digest) Sum256() [Size]byte {
	c := *d
	var pad [blockSize + 8]byte
	pad[0] = 0x80
	k := 55 - int(c.len%blockSize)
	if k < 0 {
		k += blockSize
	}
	binary.BigEndian.PutUint64(pad[1+k:], c.len<<3)
	c.Write(pad[:1+k+8])
	var out [Size]byte
	for i, v := range c.h {
		binary.BigEndian.PutUint32(out[4*i:], v)
	}
	return out
}

// WriteBoth adds p to the messages of a and b (two distinct digests):
// what a.Write(p) then b.Write(p) does, in about the time of one where
// the CPU has SHA-NI.
func WriteBoth(a, b *Digest, p []byte) {
	if !havePair || a == b {
		a.Write(p)
		b.Write(p)
		return
	}
	// Each digest first completes its partial block; then both take whole
	// blocks of p at their own offsets, side by side, as far as both can.
	oa, ob := fill(a, p), fill(b, p)
	n := min(len(p)-oa, len(p)-ob) / blockSize
	if n > 0 {
		blocksPair(&a.h, &b.h, p[oa:oa+n*blockSize], p[ob:ob+n*blockSize])
	}
	finish(a, p, oa+n*blockSize)
	finish(b, p, ob+n*blockSize)
	a.len += uint64(len(p))
	b.len += uint64(len(p))
}

// fill completes d's partial block from p (hashing it when full) and
// returns how many bytes of p it took. d.len is not counted.
func fill(d *Digest, p []byte) int {
	if d.nx == 0 {
		return 0
	}
	c := copy(d.x[d.nx:], p)
	d.nx += c
	if d.nx == blockSize {
		blocks(&d.h, d.x[:])
		d.nx = 0
	}
	return c
}

// finish hashes the whole blocks of p[off:] and keeps the rest in d's
// buffer. d.len is not counted.
func finish(d *Digest, p []byte, off int) {
	if off >= len(p) {
		return
	}
	p = p[off:]
	if d.nx > 0 { // fill took all of p without completing the block
		return
	}
	if k := len(p) &^ (blockSize - 1); k > 0 {
		blocks(&d.h, p[:k])
		p = p[k:]
	}
	d.nx = copy(d.x[:], p)
}

var k256 = [64]uint32{
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
}

// blocksGeneric is the compression function in Go, FIPS 180-4 §6.2.2,
// over whole blocks of p.
func blocksGeneric(h *[8]uint32, p []byte) {
	var w [64]uint32
	for ; len(p) >= blockSize; p = p[blockSize:] {
		for t := range 16 {
			w[t] = binary.BigEndian.Uint32(p[4*t:])
		}
		for t := 16; t < 64; t++ {
			s0 := bits.RotateLeft32(w[t-15], -7) ^ bits.RotateLeft32(w[t-15], -18) ^ w[t-15]>>3
			s1 := bits.RotateLeft32(w[t-2], -17) ^ bits.RotateLeft32(w[t-2], -19) ^ w[t-2]>>10
			w[t] = s1 + w[t-7] + s0 + w[t-16]
		}
		a, b, c, d, e, f, g, hh := h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
		for t := range 64 {
			t1 := hh + (bits.RotateLeft32(e, -6) ^ bits.RotateLeft32(e, -11) ^ bits.RotateLeft32(e, -25)) + (e&f ^ ^e&g) + k256[t] + w[t]
			t2 := (bits.RotateLeft32(a, -2) ^ bits.RotateLeft32(a, -13) ^ bits.RotateLeft32(a, -22)) + (a&b ^ a&c ^ b&c)
			hh, g, f, e, d, c, b, a = g, f, e, d+t1, c, b, a, t1+t2
		}
		h[0] += a
		h[1] += b
		h[2] += c
		h[3] += d
		h[4] += e
		h[5] += f
		h[6] += g
		h[7] += hh
	}
}

// Paired reports whether WriteBoth runs the two streams interleaved
// (SHA-NI): otherwise it costs two passes on one goroutine, and a caller
// with other cores to spare may do better hashing the second stream
// elsewhere.
var Paired = havePair
