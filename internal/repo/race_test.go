//go:build race

package repo

const raceEnabled = true
