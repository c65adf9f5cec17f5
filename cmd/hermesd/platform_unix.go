//go:build !windows

package main

// errPlatform is nil where hermesd runs: Linux (tested in CI) and other
// Unix systems such as macOS (portable fallbacks in internal/fsys).
var errPlatform error
