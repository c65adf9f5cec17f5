package redstuff

import (
	"fmt"
	"sync"
)

// code is one axis's Reed–Solomon code as Walrus applies it: k source
// symbols, r recovery symbols, in the rate reed-solomon-simd picks
// (useHighRate), over GF(2^16) with the LCH transform (gf16.go).
//
// Both rates evaluate one polynomial at points ω_i whose index map is
// linear (ω_{i⊕j} = ω_i + ω_j), and differ in where the symbols sit.
// High rate takes the recovery symbols as positions [0, m), m = pow2(r),
// and the source symbols as [m, m+k) in chunks of m: the polynomial's
// coefficients are the sum of each chunk's inverse transform at its
// position, and the recovery symbols the forward transform at 0. Low rate
// takes the source symbols as positions [0, m'), m' = pow2(k) (zeros past
// k), and the recovery symbols as the following chunks [m', 2m') …: one
// inverse transform at 0, and a forward transform at each recovery chunk.
type code struct {
	k, r  int
	high  bool
	chunk int // m (high rate) or m' (low rate)
}

var codes sync.Map // [2]int{k, r} → *code

// codeFor returns the (cached) code for k source and r recovery symbols.
func codeFor(k, r int) (*code, error) {
	key := [2]int{k, r}
	if c, ok := codes.Load(key); ok {
		return c.(*code), nil
	}
	high, err := useHighRate(k, r)
	if err != nil {
		return nil, fmt.Errorf("redstuff: reed-solomon %d+%d: %w", k, r, err)
	}
	c := &code{k: k, r: r, high: high, chunk: pow2(k)}
	if high {
		c.chunk = pow2(r)
	}
	v, _ := codes.LoadOrStore(key, c)
	return v.(*code), nil
}

// scratch is what one encode of a code needs besides its inputs and
// outputs, for shards of one size: the coefficients, and a chunk being
// transformed.
type scratch struct {
	size      int
	work, tmp [][]byte
	tr        transform
}

func (c *code) newScratch(size int) *scratch {
	return &scratch{size: size, work: shards(c.chunk, size), tmp: shards(c.chunk, size), tr: transform{t: tables()}}
}

// encode computes the r recovery shards of the k source shards (all of
// sc.size bytes, in the Leopard layout: 64-byte blocks of 32 low bytes
// then 32 high bytes of 32 GF(2^16) elements). src is left as it is.
func (c *code) encode(src, rec [][]byte, sc *scratch) error {
	if len(src) != c.k || len(rec) != c.r {
		return fmt.Errorf("redstuff: %d source and %d recovery shards for a %d+%d code", len(src), len(rec), c.k, c.r)
	}
	for _, s := range src {
		if len(s) != sc.size {
			return fmt.Errorf("redstuff: a %d-byte source shard, want %d", len(s), sc.size)
		}
	}
	m := c.chunk
	// load copies a chunk of shards into dst, zeros past them.
	load := func(dst, from [][]byte) {
		for i := range dst {
			if i < len(from) {
				copy(dst[i], from[i])
			} else {
				clear(dst[i])
			}
		}
	}
	if c.high {
		for c0 := 0; c0 < c.k; c0 += m {
			part := src[c0:min(c0+m, c.k)]
			dst := sc.work
			if c0 > 0 {
				dst = sc.tmp
			}
			load(dst, part)
			sc.tr.ifft(dst, m+c0, len(part))
			if c0 > 0 {
				for i := range sc.work {
					xorInto(sc.work[i], dst[i])
				}
			}
		}
		sc.tr.fft(sc.work, 0, c.r)
		for i := range rec {
			copy(rec[i], sc.work[i])
		}
		return nil
	}
	load(sc.work, src)
	sc.tr.ifft(sc.work, 0, c.k)
	for r0 := 0; r0 < c.r; r0 += m {
		out := rec[r0:min(r0+m, c.r)]
		load(sc.tmp, sc.work)
		sc.tr.fft(sc.tmp, m+r0, len(out))
		for i := range out {
			copy(out[i], sc.tmp[i])
		}
	}
	return nil
}
