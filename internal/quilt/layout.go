package quilt

// The geometry of a QuiltV1 quilt at 1000 shards: a matrix of 334 rows
// (primary source symbols) by 667 columns (secondary source symbols) of
// symbols of an even size z; the quilt's index and each patch take whole
// columns of their own.
const (
	quiltRows    = 334
	quiltColumns = 667
	// indexEntry estimates one patch's index entry (its identifier, a
	// few bytes, and the fixed fields); indexFixed the index's own.
	indexEntry = 32
	indexFixed = 16
)

// PaddingBudget is the most padding a pack may add to a quilt it joins:
// the encoded size of a blob's fixed metadata (64,032,000 bytes at 1000
// shards) over the RS2 expansion of its bytes (1001·1000/(334·667) ≈
// 4.493). Padding beyond it costs more than storing the batch so far as
// one quilt and opening another.
const PaddingBudget = 14_250_000

// QuiltSize estimates the size of the quilt blob holding packs of these
// sizes (an index of a few bytes per pack before them). Similar sizes pad
// little; one large pack among many small ones widens every column.
func QuiltSize(sizes []int64) int64 {
	return quiltColumns * Column(indexFixed+indexEntry*int64(len(sizes)), sizes)
}

// Column is the size in bytes of one column of the smallest QuiltV1-like
// quilt holding an index of index bytes and patches of these sizes: 334
// symbols of the smallest even size z with which the index and every
// patch, each in whole columns of its own (at least one), fit the 667
// columns. At most 666 patches fit.
func Column(index int64, sizes []int64) int64 {
	largest := index
	for _, s := range sizes {
		largest = max(largest, s)
	}
	cols := func(col int64) int64 {
		n := (index + col - 1) / col
		for _, s := range sizes {
			n += max(1, (s+col-1)/col)
		}
		return n
	}
	// Search half the symbol size (it is even). At hi everything takes a
	// column of its own.
	lo, hi := int64(1), max(1, (largest+2*quiltRows-1)/(2*quiltRows))
	for lo < hi {
		mid := lo + (hi-lo)/2
		if cols(2*quiltRows*mid) <= quiltColumns {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return 2 * quiltRows * lo
}
