package walruscost

import (
	"fmt"
	"math"
	"strconv"
)

// QuiltSize bounds the size of the QuiltV1 blob that holds patches of
// these sizes over n shards. A quilt is a matrix of p rows by s columns
// of z-byte symbols (p, s the source symbols, z even) in which the index
// and every patch take whole columns of their own (at least one), and
// Walrus lays it out with the smallest z with which everything fits; its
// size is p·s·z. overhead is added to every patch (its header, identifier
// and tags) and, once per patch and once more, to the index, so that the
// bound holds for any encoding of those up to that size. More patches
// than columns, or a patch too large for any symbol size, is ErrTooLarge.
func QuiltSize(sizes []uint64, overhead uint64, n int) (uint64, error) {
	p, s, err := SourceSymbols(n)
	if err != nil {
		return 0, err
	}
	if len(sizes)+1 > s {
		return 0, fmt.Errorf("%w: %d patches, a quilt over %d shards holds at most %d", ErrTooLarge, len(sizes), n, s-1)
	}
	index := saturatingMul(overhead, uint64(len(sizes)+1))
	columns := func(z uint64) uint64 {
		col := uint64(p) * z
		need := func(b uint64) uint64 { return max(1, b/col+min(b%col, 1)) }
		total := need(index)
		for _, b := range sizes {
			total += need(saturatingAdd(b, overhead))
			if total > uint64(s) {
				break
			}
		}
		return total
	}
	// The smallest even z in 2..maxSymbolSize−1 (even) that fits.
	lo, hi := uint64(1), uint64(maxSymbolSize/2)
	if columns(2*hi) > uint64(s) {
		return 0, fmt.Errorf("%w: %d patches do not fit a quilt over %d shards", ErrTooLarge, len(sizes), n)
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if columns(2*mid) <= uint64(s) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return uint64(p) * uint64(s) * 2 * lo, nil
}

// Bound is the most an honest store answer for a blob of size bytes,
// paid for epochs epochs at price p over n shards, can report: the
// blob's encoded length by the formula, that length times the epochs, and
// its cost at p (units·(storage·epochs + write)).
func Bound(size, epochs uint64, n int, p Price) (Charge, error) {
	enc, err := EncodedLength(size, n)
	if err != nil {
		return Charge{}, err
	}
	return NewBlob(enc, epochs, p.Cost(enc, epochs)), nil
}

// Within is c with every figure above b's lowered to b's, Clamped set
// when one was, and what was over, one phrase each ("encoded length X >
// Y"). Only the figures an answer reports are checked: the encoded
// length, the encoded length times epochs, and the cost.
func (c Charge) Within(b Charge) (Charge, []string) {
	var over []string
	limit := func(what string, v *uint64, bound uint64) {
		if *v > bound {
			over = append(over, what+" "+strconv.FormatUint(*v, 10)+" > "+strconv.FormatUint(bound, 10))
			*v = bound
		}
	}
	limit("encoded length", &c.EncodedBytes, b.EncodedBytes)
	limit("encoded length × epochs", &c.EncodedByteEpochs, b.EncodedByteEpochs)
	limit("cost (FROST)", &c.FROST, b.FROST)
	if len(over) > 0 {
		c.Clamped = true
	}
	return c, over
}

func saturatingAdd(a, b uint64) uint64 {
	if a+b < a {
		return math.MaxUint64
	}
	return a + b
}
