//go:build race

package daemon

// raceEnabled: the race detector slows the daemon some tenfold, so a
// wall-clock figure a test logs is not asserted under it.
const raceEnabled = true
