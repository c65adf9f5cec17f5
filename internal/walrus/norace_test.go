//go:build !race

package walrus_test

const raceEnabled = false
