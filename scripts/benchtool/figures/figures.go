// Package figures holds what benchtool's commands share: the "BENCH
// {json}" line a measured process prints, and order statistics.
package figures

import (
	"encoding/json"
	"fmt"
	"sort"
)

// Emit prints the in-process figures of one run for `benchtool measure`
// to collect.
func Emit(m map[string]float64) {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	fmt.Printf("BENCH %s\n", b)
}

// Median returns the median of xs (0 for none).
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Quantile returns the nearest-rank q-quantile (q in (0,1]).
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(q*float64(len(s))+0.999999) - 1
	i = max(0, min(i, len(s)-1))
	return s[i]
}

// MinMax returns the extremes of xs (0, 0 for none).
func MinMax(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	lo, hi = xs[0], xs[0]
	for _, x := range xs[1:] {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}
