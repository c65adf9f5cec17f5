package redstuff

// lanes packs the symbols of w independent codewords of one code into
// shared Leopard shards: shard j holds symbol j of every codeword.
// Reed–Solomon works element by element (a GF(2^16) element at one
// position of a shard depends only on the elements at the same position
// of the other shards), so any placement of the codewords' elements
// works, as long as each symbol's bytes map to elements the way Walrus's
// library maps them.
//
// reed-solomon-simd reads a symbol of z bytes (z even) as z/2 elements:
// each whole 64-byte block of it as 32 low bytes then 32 high bytes (the
// Leopard layout), and a last partial block of t bytes as t/2 low bytes
// then t/2 high bytes. Here a shard holds first every codeword's whole
// blocks, copied as they are, then every codeword's tail elements, packed
// densely into Leopard blocks.
type lanes struct {
	w      int // codewords
	blocks int // whole 64-byte blocks per symbol
	tail   int // tail elements per symbol (tail bytes / 2)
	base   int // element index of the tails' region
	size   int // shard size in bytes (a multiple of 64)
}

func newLanes(w, symbol int) lanes {
	l := lanes{w: w, blocks: symbol / 64, tail: symbol % 64 / 2}
	l.base = 32 * w * l.blocks
	elems := l.base + w*l.tail
	l.size = 2 * ((elems + 31) &^ 31)
	return l
}

// put stores sym (a symbol) as codeword i's element in shard.
func (l lanes) put(shard []byte, i int, sym []byte) {
	n := 64 * l.blocks
	copy(shard[n*i:n*(i+1)], sym[:n])
	if l.tail == 0 {
		return
	}
	lo, hi := sym[n:n+l.tail], sym[n+l.tail:n+2*l.tail]
	for e := l.base + i*l.tail; len(lo) > 0; {
		at, off := 64*(e/32), e%32
		k := copy(shard[at+off:at+32], lo)
		copy(shard[at+32+off:at+64], hi[:k])
		lo, hi, e = lo[k:], hi[k:], e+k
	}
}

// get reads codeword i's symbol from shard into sym.
func (l lanes) get(sym, shard []byte, i int) {
	n := 64 * l.blocks
	copy(sym[:n], shard[n*i:n*(i+1)])
	if l.tail == 0 {
		return
	}
	lo, hi := sym[n:n+l.tail], sym[n+l.tail:n+2*l.tail]
	for e := l.base + i*l.tail; len(lo) > 0; {
		at, off := 64*(e/32), e%32
		k := copy(lo, shard[at+off:at+32])
		copy(hi[:k], shard[at+32+off:at+64])
		lo, hi, e = lo[k:], hi[k:], e+k
	}
}
