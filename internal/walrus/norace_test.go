//go:build !race

package walrus

const RaceEnabled = false
