package walruscost

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestBound(t *testing.T) {
	// Walrus's store example, 17 bytes for 5 epochs at early mainnet's
	// prices: 66,034,000 encoded bytes, 63 units.
	b, err := Bound(17, 5, 1000, DefaultPrice)
	if err != nil {
		t.Fatal(err)
	}
	if b.EncodedBytes != 66_034_000 || b.EncodedByteEpochs != 5*66_034_000 || b.FROST != 63*(5*100_000+20_000) {
		t.Errorf("bound %+v", b)
	}
	if _, err := Bound(math.MaxUint64, 5, 1000, DefaultPrice); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a blob no shards encode: %v", err)
	}
}

func TestQuiltSize(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sizes    []uint64
		overhead uint64
		shards   int
		want     uint64
	}{
		// Small patches each take a column of the smallest symbols: the
		// docs' quilt example, 1,782,224 bytes, is z = 8 (its patches
		// fill columns of 334·8 bytes); at z = 2, 222,778·2 bytes.
		{"tiny", []uint64{10, 20, 30}, 0, 1000, 334 * 667 * 2},
		{"empty quilt", nil, 0, 1000, 334 * 667 * 2},
		// 1,000,256 bytes in at most 666 columns: 334·z ≥ 1,502, z = 6.
		{"one large", []uint64{1_000_000}, 256, 1000, 334 * 667 * 6},
		// 600 tiny patches leave 66 columns to a 4 MiB one: z = 192
		// (334·190 = 63,460 bytes a column needs 67).
		{"one large among many small", append(make([]uint64, 600), 4<<20), 0, 1000, 334 * 667 * 192},
		// 7 shards: 3 rows, 5 columns; the index and 100 bytes in 4: z = 10.
		{"seven shards", []uint64{100}, 0, 7, 3 * 5 * 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := QuiltSize(tc.sizes, tc.overhead, tc.shards)
			if err != nil || got != tc.want {
				t.Errorf("QuiltSize = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	if _, err := QuiltSize(make([]uint64, 667), 0, 1000); !errors.Is(err, ErrTooLarge) {
		t.Errorf("667 patches: %v", err)
	}
	if _, err := QuiltSize([]uint64{math.MaxUint64}, 1, 1000); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a patch no symbol size holds: %v", err)
	}
	if _, err := QuiltSize([]uint64{1}, math.MaxUint64, 1000); !errors.Is(err, ErrTooLarge) {
		t.Errorf("an overhead that overflows: %v", err)
	}
}

func TestWithin(t *testing.T) {
	bound := NewBlob(66_034_000, 5, 32_760_000)
	if c, over := NewBlob(66_034_000, 5, 32_760_000).Within(bound); c.Clamped || len(over) != 0 || c != bound {
		t.Errorf("an honest charge: %+v %v", c, over)
	}
	c, over := NewBlob(math.MaxUint64, 5, math.MaxUint64).Within(bound)
	if !c.Clamped || c.EncodedBytes != bound.EncodedBytes || c.EncodedByteEpochs != bound.EncodedByteEpochs || c.FROST != bound.FROST ||
		c.SuiTx != SuiTxPerBlob || len(over) != 3 || !strings.Contains(over[0], "encoded length 18446744073709551615 > 66034000") {
		t.Errorf("a hostile charge: %+v %q", c, over)
	}
	for _, s := range c.Split([]uint64{1, 3}) {
		if !s.Clamped {
			t.Errorf("a share of a clamped charge is not marked: %+v", s)
		}
	}
}
