//go:build linux

package snapshot

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// syncTree makes everything written under dir durable with one syncfs(2)
// instead of an fsync per file.
func syncTree(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("sync restored files: %w", err)
	}
	return nil
}
