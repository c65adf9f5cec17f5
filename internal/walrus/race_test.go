//go:build race

package walrus

// RaceEnabled shrinks the biggest blobs under the race detector, which
// slows blob ids and hashing some tenfold (exported for the external
// tests; test files only).
const RaceEnabled = true
