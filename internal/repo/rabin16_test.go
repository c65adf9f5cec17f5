package repo

import (
	"fmt"
	"slices"
	"testing"
)

// TestScan16MatchesScalar: the vector scan finds exactly the candidates
// of the one-lane scan, for dense and sparse masks, lanes at the length
// threshold, lengths that leave tails in every lane and after the last,
// and windows straddling the lanes' edges.
func TestScan16MatchesScalar(t *testing.T) {
	// The CI machine may lack AVX-512: say which path was compared.
	if haveRabin16 {
		t.Log("scan path: AVX-512 (rabinPrime16, rabinRun16) and the portable lanes, each compared with one lane")
	} else {
		t.Log("scan path: the portable lanes only (no AVX-512 VBMI2 here, or -tags purego), compared with one lane")
	}
	r, err := newRabin(testPolynomial(t, 3))
	if err != nil {
		t.Fatal(err)
	}
	for n := range 256 {
		if r.vec[n&15]^r.vec[16+n>>4] != r.out[n] || r.vec[32+n&15]^r.vec[48+n>>4] != r.mod[n] {
			t.Fatalf("the nibble tables do not split entry %#x", n)
		}
	}
	datas := map[string][]byte{
		"random": randomBytes(21, 1<<20),
		"zeros":  make([]byte, 300<<10),
		"low":    lowEntropy(3, 600<<10),
	}
	var hits [16][]int64
	for name, data := range datas {
		for _, bits := range []int{0, 1, 3, 8, 13, AvgBits} {
			mask := uint64(1)<<bits - 1
			for _, span := range []struct{ from, to int }{
				{window, len(data) + 1},
				{window, window + 16*minLane16},        // the shortest vector scan
				{window, window + 16*minLane16 - 1},    // one short: the portable lanes
				{1000, 1000 + 16*minLane16 + 16*7 + 5}, // tails of 7 steps, 5 after the lanes
				{window + 3, window + 3 + 16*(minLane16+8) + 15},
				{len(data) - 70000, len(data) + 1},
			} {
				t.Run(fmt.Sprintf("%s/bits=%d/%d-%d", name, bits, span.from, span.to), func(t *testing.T) {
					want := r.scanLane(data, span.from, span.to, mask, 7, nil)
					got := r.scan(data, span.from, span.to, mask, 7, nil, &hits)
					if !slices.Equal(got, want) {
						t.Fatalf("%d candidates %v…, one lane finds %d %v…", len(got), clip64(got), len(want), clip64(want))
					}
					if haveRabin16 && (span.to-span.from)/16 >= minLane16 {
						got = r.scan16(data, span.from, span.to, mask, 7, nil, &hits)
						if !slices.Equal(got, want) {
							t.Fatalf("scan16: %d candidates %v…, one lane finds %d %v…", len(got), clip64(got), len(want), clip64(want))
						}
					}
				})
			}
		}
	}
}

func clip64(xs []int64) []int64 {
	if len(xs) > 8 {
		return xs[:8]
	}
	return xs
}
