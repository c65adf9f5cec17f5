package redstuff

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/reedsolomon"
)

// TestHighRateMatchesKlauspost: the high-rate code computes the recovery
// symbols klauspost/reedsolomon's Leopard GF(2^16) encoder computes (an
// independent implementation of the same code), for one chunk and
// several, full and partial, with shards of one and several blocks.
func TestHighRateMatchesKlauspost(t *testing.T) {
	r := rand.New(rand.NewPCG(38, 1))
	for _, c := range []struct{ k, r, size int }{
		{1, 1, 64}, {3, 2, 64}, {4, 4, 128}, {9, 5, 64}, {17, 9, 192}, {64, 30, 64},
		{667, 333, 128}, {600, 400, 64}, {40, 3, 64},
	} {
		t.Run(fmt.Sprintf("%d+%d", c.k, c.r), func(t *testing.T) {
			if high, err := useHighRate(c.k, c.r); err != nil || !high {
				t.Fatalf("%d+%d is not a high-rate code: %v", c.k, c.r, err)
			}
			cd, err := codeFor(c.k, c.r)
			if err != nil {
				t.Fatal(err)
			}
			src := shards(c.k, c.size)
			for _, s := range src {
				for i := range s {
					s[i] = byte(r.Uint32())
				}
			}
			keep := make([][]byte, len(src))
			for i, s := range src {
				keep[i] = bytes.Clone(s)
			}
			rec := shards(c.r, c.size)
			if err := cd.encode(src, rec, cd.newScratch(c.size)); err != nil {
				t.Fatal(err)
			}
			enc, err := reedsolomon.New(c.k, c.r, reedsolomon.WithLeopardGF16(true))
			if err != nil {
				t.Fatal(err)
			}
			all := append(append([][]byte{}, keep...), shards(c.r, c.size)...)
			if err := enc.Encode(all); err != nil {
				t.Fatal(err)
			}
			for i := range rec {
				if !bytes.Equal(rec[i], all[c.k+i]) {
					t.Fatalf("recovery shard %d differs from klauspost's", i)
				}
			}
			for i := range src {
				if !bytes.Equal(src[i], keep[i]) {
					t.Fatalf("source shard %d was modified", i)
				}
			}
		})
	}
}

// TestGFTables: the field's tables are consistent: exp and log are
// inverse, and multiplication by a table (mulTable) agrees with mulLog.
func TestGFTables(t *testing.T) {
	g := tables()
	for x := 1; x < gfOrder; x++ {
		if g.exp[g.log[x]] != uint16(x) {
			t.Fatalf("exp(log(%#x)) = %#x", x, g.exp[g.log[x]])
		}
	}
	if g.log[0] != gfModulus {
		t.Fatalf("log(0) = %d, want %d", g.log[0], gfModulus)
	}
	var mt mulTable
	for _, logM := range []uint16{0, 1, 2, 12345, gfModulus - 1} {
		g.fill(&mt, logM)
		for _, x := range []uint16{0, 1, 2, 0xff, 0x100, 0xabcd, 0xffff} {
			got := mt.lo[x&0xff] ^ mt.hi[x>>8]
			if want := g.mulLog(x, logM); got != want {
				t.Fatalf("%#x·exp(%d): table %#x, mulLog %#x", x, logM, got, want)
			}
		}
	}
}

// TestMulAdd: mulAdd adds to every element of a shard in the Leopard
// layout its product with the table's constant, as mulLog computes it,
// and leaves a trailing partial block alone.
func TestMulAdd(t *testing.T) {
	g := tables()
	rng := rand.New(rand.NewPCG(1, 2))
	var mt mulTable
	for _, logM := range []uint16{0, 1, 777, 12345, gfModulus - 1} {
		g.fill(&mt, logM)
		for _, blocks := range []int{1, 2, 7} {
			y := make([]byte, 64*blocks+5)
			x := make([]byte, len(y))
			for i := range y {
				y[i], x[i] = byte(rng.Uint32()), byte(rng.Uint32())
			}
			want := bytes.Clone(x)
			for b := range blocks {
				for e := range 32 {
					lo, hi := 64*b+e, 64*b+32+e
					p := g.mulLog(uint16(y[lo])|uint16(y[hi])<<8, logM)
					want[lo] ^= byte(p)
					want[hi] ^= byte(p >> 8)
				}
			}
			mt.mulAdd(x, y)
			if !bytes.Equal(x, want) {
				t.Fatalf("logM %d, %d blocks: products differ", logM, blocks)
			}
		}
	}
}

func BenchmarkMulAdd(b *testing.B) {
	var mt mulTable
	tables().fill(&mt, 12345)
	x, y := make([]byte, 64<<10), make([]byte, 64<<10)
	for i := range y {
		y[i] = byte(i * 7)
	}
	b.SetBytes(int64(len(y)))
	for b.Loop() {
		mt.mulAdd(x, y)
	}
}

// TestComputeOneAtATime: while a computation runs, another waits, and
// gives up when its context ends.
func TestComputeOneAtATime(t *testing.T) {
	computing <- struct{}{} // a computation under way
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Compute(ctx, bytes.NewReader([]byte("x")), 1, 10)
	<-computing
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Compute while another runs, context ended: %v", err)
	}
	if _, err := Compute(context.Background(), bytes.NewReader([]byte("x")), 1, 10); err != nil {
		t.Fatalf("Compute once the other ended: %v", err)
	}
}
