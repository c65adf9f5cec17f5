//go:build !linux

package snapshot

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// syncTree makes everything written under dir durable, one fsync per file
// and directory (there is no syncfs here).
func syncTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("sync restored files: %w", err)
		}
		defer f.Close()
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync restored files: %w", err)
		}
		return nil
	})
}
