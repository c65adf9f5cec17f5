//go:build !race

package repo

const raceEnabled = false
