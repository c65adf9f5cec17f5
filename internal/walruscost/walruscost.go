package walruscost

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// DefaultShards is the shard count of Walrus mainnet and testnet.
const DefaultShards = 1000

// MaxShards is the most shards the encoding supports (a 16-bit count).
const MaxShards = math.MaxUint16

// UnitSize is a storage unit: prices are per unit of encoded length.
const UnitSize = 1 << 20

// FROSTPerWAL converts FROST, the unit of prices and costs, to WAL.
const FROSTPerWAL = 1_000_000_000

// maxSymbolSize is the largest RS2 symbol: 16 bits, even.
const maxSymbolSize = math.MaxUint16 - 1

// SuiTxPerBlob is how many Sui transactions storing a new blob takes:
// register (with its storage reservation in the same transaction) and
// certify.
const SuiTxPerBlob = 2

// ErrTooLarge means a blob cannot be encoded over the given shards.
var ErrTooLarge = errors.New("walruscost: blob too large to encode")

// SourceSymbols returns the primary and secondary source symbols of RS2
// over n shards: n−2f and n−f, f = ⌊(n−1)/3⌋.
func SourceSymbols(n int) (primary, secondary int, err error) {
	if n < 1 || n > MaxShards {
		return 0, 0, fmt.Errorf("walruscost: %d shards is outside 1..%d", n, MaxShards)
	}
	f := (n - 1) / 3
	return n - 2*f, n - f, nil
}

// SymbolSize is the RS2 symbol size of a blob of size bytes over n shards:
// ⌈max(size,1)/(p·s)⌉ rounded up to even.
func SymbolSize(size uint64, n int) (uint64, error) {
	p, s, err := SourceSymbols(n)
	if err != nil {
		return 0, err
	}
	symbols := uint64(p) * uint64(s)
	z := (max(size, 1)-1)/symbols + 1
	z += z & 1
	if z > maxSymbolSize {
		return 0, fmt.Errorf("%w: %d bytes over %d shards (at most %d)", ErrTooLarge, size, n, symbols*maxSymbolSize)
	}
	return z, nil
}

// MaxBlobSize is the largest blob n shards encode.
func MaxBlobSize(n int) (uint64, error) {
	p, s, err := SourceSymbols(n)
	if err != nil {
		return 0, err
	}
	return uint64(p) * uint64(s) * maxSymbolSize, nil
}

// MetadataLength is the metadata every blob stores over n shards, on all of
// them: n·(n·2·32 + 32) bytes (64,032,000 at 1000 shards).
func MetadataLength(n int) uint64 {
	return uint64(n) * (uint64(n)*64 + 32)
}

// EncodedLength is the length Walrus charges for a blob of size bytes over
// n shards: its slivers on every shard plus the metadata (package doc).
func EncodedLength(size uint64, n int) (uint64, error) {
	z, err := SymbolSize(size, n)
	if err != nil {
		return 0, err
	}
	p, s, _ := SourceSymbols(n)
	return uint64(n)*uint64(p+s)*z + MetadataLength(n), nil
}

// Units is the number of storage units an encoded length takes (1 MiB
// each, rounded up).
func Units(encoded uint64) uint64 {
	return encoded/UnitSize + min(encoded%UnitSize, 1)
}

// Price is what Walrus charges per storage unit, in FROST: Storage for
// every epoch, Write once per registration. The system object on Sui holds
// the current figures (`walrus info` shows them).
type Price struct {
	Storage uint64 `json:"storagePerUnitEpoch"`
	Write   uint64 `json:"writePerUnit"`
}

// DefaultPrice is early Walrus mainnet's price as quoted in Walrus's
// documentation: about 0.0001 WAL (100,000 FROST) per unit per epoch and a
// write fee of 20,000 FROST per unit. It is a default for what hermesd
// cannot ask a publisher; real costs are taken from the publishers'
// answers.
var DefaultPrice = Price{Storage: 100_000, Write: 20_000}

// Cost is the price in FROST of registering an encoded length for epochs
// epochs: units·(Storage·epochs + Write). It saturates at the largest
// uint64 rather than wrapping.
func (p Price) Cost(encoded uint64, epochs uint64) uint64 {
	per, ok := mulAdd(p.Storage, epochs, p.Write)
	if !ok {
		return math.MaxUint64
	}
	return saturatingMul(Units(encoded), per)
}

// ForEpochs is x (an encoded length, or storage units) held for epochs
// epochs: the byte-epochs or unit-epochs a store pays for, x·epochs. It
// saturates at the largest uint64 rather than wrapping.
func ForEpochs(x, epochs uint64) uint64 {
	return saturatingMul(x, epochs)
}

// mulAdd is a·b + c, and false when it overflows.
func mulAdd(a, b, c uint64) (uint64, bool) {
	hi, lo := bits.Mul64(a, b)
	sum, carry := bits.Add64(lo, c, 0)
	return sum, hi == 0 && carry == 0
}

// Charge is what one store answer cost, or one patch's share of it.
type Charge struct {
	// New: the store registered a blob (newlyCreated). A blob that was
	// already certified long enough costs nothing and registers nothing.
	New bool `json:"new"`
	// Patch: this is one patch's share of a quilt (Split).
	Patch bool `json:"patch,omitempty"`
	// EncodedBytes is the encoded length held; EncodedByteEpochs the
	// encoded length times the epochs this store paid for.
	EncodedBytes      uint64 `json:"encodedBytes"`
	EncodedByteEpochs uint64 `json:"encodedByteEpochs"`
	// FROST is the store's cost as the publisher reported it.
	FROST uint64 `json:"frost"`
	// SuiTx is the Sui transactions the store took (SuiTxPerBlob for a
	// new blob); a patch's share is a fraction.
	SuiTx float64 `json:"suiTx"`
	// Clamped: the answer reported more than Walrus's formula allows for
	// what was sent, and the figures are the formula's bound (Within).
	Clamped bool `json:"clamped,omitempty"`
}

// NewBlob is the charge of a newly created blob of encoded length, stored
// for epochs epochs, that cost frost.
func NewBlob(encoded, epochs, frost uint64) Charge {
	return Charge{New: true, EncodedBytes: encoded, EncodedByteEpochs: ForEpochs(encoded, epochs),
		FROST: frost, SuiTx: SuiTxPerBlob}
}

// Split shares a quilt's charge among its patches in proportion to their
// sizes in bytes (weights): every integer field by the largest remainder
// method, so the shares add up exactly to c (a remainder goes to the
// earliest patches with the largest fractional parts), and SuiTx in exact
// proportion. All-zero weights share equally. Each share is a Patch.
func (c Charge) Split(weights []uint64) []Charge {
	out := make([]Charge, len(weights))
	if len(weights) == 0 {
		return out
	}
	w := weights
	var total uint64
	for _, x := range w {
		total += x
		if total < x { // overflow: fall back to shares of whole KiB
			return c.Split(scaleDown(weights))
		}
	}
	if total == 0 {
		w = make([]uint64, len(weights))
		for i := range w {
			w[i] = 1
		}
		total = uint64(len(w))
	}
	enc := apportion(c.EncodedBytes, w, total)
	ep := apportion(c.EncodedByteEpochs, w, total)
	fr := apportion(c.FROST, w, total)
	for i := range out {
		out[i] = Charge{New: c.New, Patch: true, EncodedBytes: enc[i], EncodedByteEpochs: ep[i], FROST: fr[i],
			SuiTx: c.SuiTx * float64(w[i]) / float64(total), Clamped: c.Clamped}
	}
	return out
}

// apportion divides v among weights w (summing to total) by the largest
// remainder method: the shares sum to v exactly.
func apportion(v uint64, w []uint64, total uint64) []uint64 {
	out := make([]uint64, len(w))
	rem := make([]uint64, len(w))
	var given uint64
	for i, x := range w {
		hi, lo := bits.Mul64(v, x)
		// v·x/total < 2^64 because x ≤ total, so hi < total.
		q, r := bits.Div64(hi, lo, total)
		out[i], rem[i] = q, r
		given += q
	}
	for left := v - given; left > 0; left-- {
		best := -1
		for i, r := range rem {
			if best < 0 || r > rem[best] {
				best = i
			}
		}
		out[best]++
		rem[best] = 0
	}
	return out
}

// scaleDown divides weights so that their sum fits in 64 bits.
func scaleDown(w []uint64) []uint64 {
	out := make([]uint64, len(w))
	for i, x := range w {
		out[i] = x >> 10
		if x > 0 && out[i] == 0 {
			out[i] = 1
		}
	}
	return out
}

// saturatingMul is a·b, or the largest uint64 where that overflows.
func saturatingMul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}
