package redstuff

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/hermesd/hermesd/internal/walruscost"
)

// EncodingRS2 is the encoding type byte of RS2 (RedStuff over
// Reed–Solomon), the only one Walrus accepts.
const EncodingRS2 = 1

// DefaultShards is the shard count of Walrus mainnet and testnet.
const DefaultShards = walruscost.DefaultShards

// gfOrder is the size of GF(2^16), over which both Reed–Solomon codes
// work: source and recovery symbols of one code share its 65,536
// evaluation points.
const gfOrder = 1 << 16

// ErrShards means a shard count the encoding does not support.
var ErrShards = errors.New("redstuff: unsupported shard count")

// ErrTooLarge means a blob too large to encode over the shards.
var ErrTooLarge = walruscost.ErrTooLarge

// Params is the geometry of one blob's encoding: the blob is a matrix of
// Primary rows by Secondary columns of Symbol-byte symbols, row-major,
// zero-padded at the end; rows are extended to Shards columns by the
// secondary code and the columns to Shards rows by the primary code.
type Params struct {
	Shards    int
	Primary   int // primary source symbols: rows of the source matrix
	Secondary int // secondary source symbols: its columns
	Symbol    int // symbol size in bytes (even)
	Size      int64
}

// NewParams is the geometry of a blob of size bytes over shards shards.
func NewParams(shards int, size int64) (Params, error) {
	if err := CheckShards(shards); err != nil {
		return Params{}, err
	}
	if size < 0 {
		return Params{}, fmt.Errorf("redstuff: negative blob size %d", size)
	}
	z, err := walruscost.SymbolSize(uint64(size), shards)
	if err != nil {
		return Params{}, err
	}
	p, s, _ := walruscost.SourceSymbols(shards)
	return Params{Shards: shards, Primary: p, Secondary: s, Symbol: int(z), Size: size}, nil
}

// CheckShards reports whether both codes of RS2 exist over n shards as
// Walrus's Reed–Solomon library builds them: at least one recovery
// symbol each (so at least 4 shards), and source and recovery chunks
// within the field.
func CheckShards(n int) error {
	if n < 4 || n > walruscost.MaxShards {
		return fmt.Errorf("%w: %d (RS2 needs 4..%d)", ErrShards, n, walruscost.MaxShards)
	}
	p, s, _ := walruscost.SourceSymbols(n)
	for _, k := range []int{p, s} {
		if _, err := useHighRate(k, n-k); err != nil {
			return fmt.Errorf("%w: %d (%v)", ErrShards, n, err)
		}
	}
	return nil
}

// MaxBlobSize is the largest blob n shards encode.
func MaxBlobSize(n int) (int64, error) {
	if err := CheckShards(n); err != nil {
		return 0, err
	}
	m, err := walruscost.MaxBlobSize(n)
	return int64(m), err
}

// sourceCounts is the primary and secondary source symbols over n
// shards: n−2f and n−f, f = ⌊(n−1)/3⌋.
func sourceCounts(n int) (p, s int) {
	f := (n - 1) / 3
	return n - 2*f, n - f
}

// pow2 is the smallest power of two at or above n (n ≥ 1).
func pow2(n int) int { return 1 << bits.Len(uint(n-1)) }

// useHighRate is the rate Walrus's Reed–Solomon library (reed-solomon-simd,
// DefaultRate) picks for k source and r recovery symbols: high rate
// (source symbols in chunks of pow2(r) after the recovery chunk) when the
// source symbols' power of two is the larger, low rate (recovery symbols
// in chunks of pow2(k) after the source chunk) when it is the smaller;
// when equal, high rate if k ≤ r. The two rates are different codes.
func useHighRate(k, r int) (bool, error) {
	if k <= 0 || r <= 0 || k > gfOrder || r > gfOrder {
		return false, fmt.Errorf("%d source and %d recovery symbols", k, r)
	}
	pk, pr := pow2(k), pow2(r)
	if min(pk, pr)+max(k, r) > gfOrder {
		return false, fmt.Errorf("%d source and %d recovery symbols do not fit GF(2^16)", k, r)
	}
	switch {
	case pk < pr:
		return false, nil
	case pk > pr:
		return true, nil
	}
	return k <= r, nil
}
