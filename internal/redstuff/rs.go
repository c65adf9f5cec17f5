package redstuff

import (
	"fmt"
	"sync"

	"github.com/klauspost/reedsolomon"
)

// code is one axis's Reed–Solomon code as Walrus applies it (k source
// symbols, r recovery symbols, the rate reed-solomon-simd picks), built
// from klauspost/reedsolomon's Leopard GF(2^16) encoder, which computes
// the same field, basis and transforms but only in high rate.
//
// Both libraries evaluate polynomials over GF(2^16) at points ω_i whose
// index map is linear (ω_{i⊕j} = ω_i + ω_j). High rate, which both do
// alike, takes the recovery symbols as positions [0, m), m = pow2(r),
// and the source symbols as [m, m+k). A high-rate encoder with at most m
// source symbols interpolates the polynomial of degree < m through
// positions [m, 2m) (zeros past k) and evaluates it on [0, m).
//
// Low rate, which only reed-solomon-simd has, takes the source symbols
// as positions [0, m'), m' = pow2(k) (zeros past k), and the recovery
// symbols as [m', m'+r): the polynomial f of degree < m' through the
// first chunk, evaluated on the following chunks. Since g(x) = f(x+ω_M)
// has f's degree, a single-chunk high-rate encode of f's values on
// [0, M) (any power of two M ≥ m') yields f on [M, 2M): the known
// prefix doubles per step, m' → 2m' → 4m' …, until it covers the
// recovery symbols.
type code struct {
	k, r  int
	high  bool
	steps []step // one for high rate
}

// step is one encode: data source shards (the known prefix, or the
// source symbols), parity outputs of which the first use are recovery
// symbols from recovery index from on.
type step struct {
	enc          reedsolomon.Encoder
	data, parity int
	from, use    int
}

var codes sync.Map // [2]int{k, r} → *code

// codeFor returns the (cached) code for k source and r recovery symbols.
func codeFor(k, r int) (*code, error) {
	key := [2]int{k, r}
	if c, ok := codes.Load(key); ok {
		return c.(*code), nil
	}
	c, err := newCode(k, r)
	if err != nil {
		return nil, err
	}
	v, _ := codes.LoadOrStore(key, c)
	return v.(*code), nil
}

func newCode(k, r int) (*code, error) {
	high, err := useHighRate(k, r)
	if err != nil {
		return nil, err
	}
	c := &code{k: k, r: r, high: high}
	add := func(data, parity, from, use int) error {
		enc, err := reedsolomon.New(data, parity, reedsolomon.WithLeopardGF16(true))
		if err != nil {
			return fmt.Errorf("reed-solomon %d+%d: %w", data, parity, err)
		}
		c.steps = append(c.steps, step{enc: enc, data: data, parity: parity, from: from, use: use})
		return nil
	}
	if high {
		return c, add(k, r, 0, r)
	}
	// Low rate: the known prefix [0, known) doubles each step. A step
	// must compute more than half its chunk, or the encoder's chunk
	// (pow2 of its parity count) would be smaller than the prefix.
	m := pow2(k)
	for known := m; known < m+r; known *= 2 {
		use := min(known, m+r-known)
		parity := use
		if known > 1 {
			parity = max(use, known/2+1)
		}
		data := known
		if known == m {
			data = k // the zeros past k are implied
		}
		if err := add(data, parity, known-m, use); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// scratch is what one encode of a code needs besides its inputs and
// outputs, for shards of one size: parity outputs beyond the recovery
// symbols, and a zero shard.
type scratch struct {
	size  int
	extra [][]byte
	zero  []byte
	ptrs  [][]byte
}

func (c *code) newScratch(size int) *scratch {
	s := &scratch{size: size}
	most, total := 0, 0
	for _, st := range c.steps {
		most = max(most, st.parity-st.use)
		total = max(total, st.data+st.parity)
	}
	s.extra = make([][]byte, most)
	for i := range s.extra {
		s.extra[i] = make([]byte, size)
	}
	s.zero = make([]byte, size)
	s.ptrs = make([][]byte, 0, total)
	return s
}

// encode computes the r recovery shards of the k source shards (all of
// sc.size bytes, in the Leopard layout: 64-byte blocks of 32 low bytes
// then 32 high bytes of 32 GF(2^16) elements).
func (c *code) encode(src, rec [][]byte, sc *scratch) error {
	if len(src) != c.k || len(rec) != c.r {
		return fmt.Errorf("redstuff: %d source and %d recovery shards for a %d+%d code", len(src), len(rec), c.k, c.r)
	}
	m := pow2(c.k)
	for _, st := range c.steps {
		sh := sc.ptrs[:0]
		sh = append(sh, src...)
		if st.data > c.k { // low rate after its first step: the known prefix
			for range m - c.k {
				sh = append(sh, sc.zero)
			}
			sh = append(sh, rec[:st.data-m]...)
		}
		sh = append(sh, rec[st.from:st.from+st.use]...)
		sh = append(sh, sc.extra[:st.parity-st.use]...)
		if err := st.enc.Encode(sh); err != nil {
			return fmt.Errorf("redstuff: reed-solomon encode: %w", err)
		}
	}
	return nil
}
