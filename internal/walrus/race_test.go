//go:build race

package walrus_test

// raceEnabled shrinks the biggest blobs under the race detector, which
// slows blob ids and hashing some tenfold.
const raceEnabled = true
