//go:build unix

package atomicfile

import (
	"os"
	"syscall"
)

// sameDevice reports whether a and b are on the same filesystem, so a
// rename between them is atomic.
func sameDevice(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false
	}
	da, ok1 := sa.Sys().(*syscall.Stat_t)
	db, ok2 := sb.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && da.Dev == db.Dev
}
