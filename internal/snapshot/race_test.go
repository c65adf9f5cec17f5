//go:build race

package snapshot_test

// raceEnabled shrinks the biggest brains under the race detector, which
// slows hashing and chunking some tenfold.
const raceEnabled = true
