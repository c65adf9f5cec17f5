package walruscost

import (
	"errors"
	"math"
	"testing"
)

// The documented examples and the vectors of Walrus's own tests of the
// formula (walrus-core encoding config tests, mirrored from the Move
// contract's redstuff tests), asserted exactly.
func TestEncodedLength(t *testing.T) {
	const ps = 334 * 667 // source symbols at 1000 shards
	tests := []struct {
		name   string
		size   uint64
		shards int
		want   uint64
	}{
		// Walrus's docs: the store example and the quilt example.
		{"docs store example, 17 bytes", 17, 1000, 66_034_000},
		{"docs quilt example", 1_782_224, 1000, 72_040_000},
		// Walrus's test vectors (RS2).
		{"zero, small committee", 0, 10, 10 * (2*(4+7) + 10*2*32 + 32)},
		{"one, small committee", 1, 10, 10 * (2*(4+7) + 10*2*32 + 32)},
		{"one, large committee", 1, 1000, 1000 * (2*(334+667) + 1000*2*32 + 32)},
		{"larger blob, small committee", (4 * 7) * 100, 10, 10 * ((4+7)*100 + 10*2*32 + 32)},
		{"larger blob, large committee", ps * 100, 1000, 1000 * ((334+667)*100 + 1000*2*32 + 32)},
		// Edges at 1000 shards: empty, the last size with 2-byte symbols,
		// one over, an exact multiple with an odd symbol size (rounded up
		// to even), one over that.
		{"0 bytes", 0, 1000, 66_034_000},
		{"2·p·s bytes", 2 * ps, 1000, 66_034_000},
		{"2·p·s+1 bytes", 2*ps + 1, 1000, 1000*1001*4 + 64_032_000},
		{"3·p·s bytes, odd symbol rounded up", 3 * ps, 1000, 1000*1001*4 + 64_032_000},
		{"4·p·s+1 bytes", 4*ps + 1, 1000, 1000*1001*6 + 64_032_000},
		{"10 MiB", 10 << 20, 1000, 1000*1001*48 + 64_032_000},
		// Other shard counts: 4 (f=1, p=2, s=3), 7 (f=2, p=3, s=5),
		// 100 (f=33, p=34, s=67), 1 (p=s=1).
		{"4 shards, 0 bytes", 0, 4, 4 * (2*(2+3) + 4*64 + 32)},
		{"4 shards, 12 bytes", 12, 4, 4 * (2*(2+3) + 4*64 + 32)},
		{"4 shards, 13 bytes", 13, 4, 4 * (4*(2+3) + 4*64 + 32)},
		{"4 shards, 18 bytes, odd symbol", 18, 4, 4 * (4*(2+3) + 4*64 + 32)},
		{"7 shards, 1000 bytes", 1000, 7, 7 * (68*(3+5) + 7*64 + 32)},
		{"10 shards, 29 bytes", 29, 10, 10 * (2*(4+7) + 10*64 + 32)},
		{"100 shards, 2278 bytes", 34 * 67, 100, 100 * (2*(34+67) + 100*64 + 32)},
		{"100 shards, 2·p·s+1 bytes", 34*67*2 + 1, 100, 100 * (4*(34+67) + 100*64 + 32)},
		{"1 shard, 5 bytes", 5, 1, 1 * (6*2 + 64 + 32)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EncodedLength(tc.size, tc.shards)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("EncodedLength(%d, %d) = %d, want %d", tc.size, tc.shards, got, tc.want)
			}
		})
	}
}

func TestSourceSymbols(t *testing.T) {
	// Walrus's vectors for RS2.
	for _, tc := range []struct{ n, p, s int }{
		{1, 1, 1}, {3, 3, 3}, {4, 2, 3}, {7, 3, 5}, {10, 4, 7}, {31, 11, 21},
		{100, 34, 67}, {301, 101, 201}, {1000, 334, 667},
	} {
		p, s, err := SourceSymbols(tc.n)
		if err != nil || p != tc.p || s != tc.s {
			t.Errorf("SourceSymbols(%d) = %d, %d, %v; want %d, %d", tc.n, p, s, err, tc.p, tc.s)
		}
	}
	for _, n := range []int{0, -1, MaxShards + 1} {
		if _, _, err := SourceSymbols(n); err == nil {
			t.Errorf("SourceSymbols(%d) succeeded", n)
		}
	}
}

func TestMaxBlobSize(t *testing.T) {
	max, err := MaxBlobSize(1000)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(334 * 667 * 65_534); max != want {
		t.Fatalf("MaxBlobSize(1000) = %d, want %d", max, want)
	}
	if _, err := EncodedLength(max, 1000); err != nil {
		t.Fatalf("the largest blob: %v", err)
	}
	if _, err := EncodedLength(max+1, 1000); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("one byte more: %v, want ErrTooLarge", err)
	}
	if _, err := EncodedLength(math.MaxUint64, 4); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("2^64-1 bytes: %v, want ErrTooLarge", err)
	}
}

func TestUnitsAndCost(t *testing.T) {
	for _, tc := range []struct{ enc, units uint64 }{
		{0, 0}, {1, 1}, {UnitSize, 1}, {UnitSize + 1, 2}, {66_034_000, 63}, {72_040_000, 69},
	} {
		if got := Units(tc.enc); got != tc.units {
			t.Errorf("Units(%d) = %d, want %d", tc.enc, got, tc.units)
		}
	}
	// The testnet store example: 17 bytes for one epoch cost 132,300 FROST,
	// 63 units at 2,100 FROST (storage and write together).
	if got := (Price{Storage: 1_000, Write: 1_100}).Cost(66_034_000, 1); got != 132_300 {
		t.Errorf("testnet example: %d, want 132,300", got)
	}
	// The default (early mainnet) price: 63·(100,000·5 + 20,000).
	if got := DefaultPrice.Cost(66_034_000, 5); got != 63*520_000 {
		t.Errorf("default price, 5 epochs: %d, want %d", got, 63*520_000)
	}
	if got := (Price{Storage: math.MaxUint64}).Cost(1, 2); got != math.MaxUint64 {
		t.Errorf("overflow: %d, want saturation", got)
	}
	if got := (Price{Storage: 1 << 40}).Cost(1<<50, 1<<10); got != math.MaxUint64 {
		t.Errorf("overflow of units·price: %d, want saturation", got)
	}
}

func TestForEpochs(t *testing.T) {
	for _, tc := range []struct{ x, epochs, want uint64 }{
		{0, math.MaxUint64, 0},
		{66_034_000, 5, 330_170_000},
		{1 << 32, 1 << 31, 1 << 63},
		{1 << 32, 1 << 32, math.MaxUint64},
		{math.MaxUint64, 2, math.MaxUint64},
	} {
		if got := ForEpochs(tc.x, tc.epochs); got != tc.want {
			t.Errorf("ForEpochs(%d, %d) = %d, want %d", tc.x, tc.epochs, got, tc.want)
		}
	}
	if c := NewBlob(math.MaxUint64, 3, 1); c.EncodedByteEpochs != math.MaxUint64 {
		t.Errorf("NewBlob: EncodedByteEpochs = %d, want saturation", c.EncodedByteEpochs)
	}
}

func TestSplit(t *testing.T) {
	c := Charge{New: true, EncodedBytes: 72_040_000, EncodedByteEpochs: 5 * 72_040_000, FROST: 1_001, SuiTx: 2}
	shares := c.Split([]uint64{1, 1, 1})
	var enc, ep, fr uint64
	var tx float64
	for _, s := range shares {
		if !s.New || !s.Patch {
			t.Errorf("share %+v is not a new patch", s)
		}
		enc += s.EncodedBytes
		ep += s.EncodedByteEpochs
		fr += s.FROST
		tx += s.SuiTx
	}
	if enc != c.EncodedBytes || ep != c.EncodedByteEpochs || fr != c.FROST || math.Abs(tx-2) > 1e-12 {
		t.Fatalf("shares add up to %d, %d, %d, %v; want the whole %+v", enc, ep, fr, tx, c)
	}
	// 1,001 in thirds: 333.67 each; the remainder goes to the earliest.
	if shares[0].FROST != 334 || shares[1].FROST != 334 || shares[2].FROST != 333 {
		t.Errorf("FROST shares %d, %d, %d; want 334, 334, 333", shares[0].FROST, shares[1].FROST, shares[2].FROST)
	}
	// In proportion to bytes.
	shares = Charge{New: true, FROST: 1000, SuiTx: 2}.Split([]uint64{3000, 1000})
	if shares[0].FROST != 750 || shares[1].FROST != 250 || shares[0].SuiTx != 1.5 || shares[1].SuiTx != 0.5 {
		t.Errorf("3:1 split: %+v", shares)
	}
	// All-zero weights share equally; none gives none.
	shares = Charge{FROST: 10}.Split([]uint64{0, 0})
	if shares[0].FROST != 5 || shares[1].FROST != 5 {
		t.Errorf("zero weights: %+v", shares)
	}
	if len(c.Split(nil)) != 0 {
		t.Error("no patches, some shares")
	}
	// Weights whose sum overflows still split the whole.
	shares = Charge{FROST: math.MaxUint64}.Split([]uint64{math.MaxUint64, math.MaxUint64})
	if shares[0].FROST+shares[1].FROST != math.MaxUint64 || shares[0].FROST < shares[1].FROST {
		t.Errorf("overflowing weights: %+v", shares)
	}
}

// FuzzEncodedLength checks the formula's invariants on any size and shard
// count: it grows with the size, never below the metadata, and a store's
// units cover it.
func FuzzEncodedLength(f *testing.F) {
	f.Add(uint64(17), uint16(1000))
	f.Add(uint64(0), uint16(4))
	f.Add(uint64(1<<40), uint16(7))
	f.Fuzz(func(t *testing.T, size uint64, n uint16) {
		enc, err := EncodedLength(size, int(n))
		if err != nil {
			if n != 0 && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("EncodedLength(%d, %d): %v", size, n, err)
			}
			return
		}
		if enc < MetadataLength(int(n)) {
			t.Fatalf("EncodedLength(%d, %d) = %d, below the metadata", size, n, enc)
		}
		if size > 0 {
			if less, err := EncodedLength(size-1, int(n)); err != nil || less > enc {
				t.Fatalf("EncodedLength(%d) = %d > EncodedLength(%d) = %d (%v)", size-1, less, size, enc, err)
			}
		}
		if Units(enc)*UnitSize < enc {
			t.Fatalf("units of %d do not cover it", enc)
		}
	})
}
