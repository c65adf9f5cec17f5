//go:build race

package receipts

const (
	roundTripN    = 5_000
	junkBigBody   = 16 << 20
	junkSmallBody = 8 << 20
)
