//go:build !unix

package atomicfile

// sameDevice cannot tell here; CreateOutside then falls back to Create.
func sameDevice(a, b string) bool { return false }
