//go:build !race

package receipts

// Sizes of the big tests. The race detector makes them 5-10 times slower,
// so the race build uses the smaller ones in size_race_test.go.
const (
	roundTripN    = 100_000  // receipts in TestExportImport100k
	junkBigBody   = 64 << 20 // bytes in the large junk import
	junkSmallBody = 8 << 20
)
