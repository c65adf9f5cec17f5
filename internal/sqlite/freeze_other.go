//go:build !linux

package sqlite

import (
	"context"
	"fmt"
)

// Freeze cannot freeze a database on this system: it needs Linux's
// open-file-description locks (F_OFD_SETLK) to hold SQLite's locks without
// another descriptor of this process dropping them. It always fails with
// ErrUnsupported; the caller falls back to detect-and-retry.
func Freeze(ctx context.Context, root, db, dir string, opts Options) (*Frozen, error) {
	return nil, fmt.Errorf("%w: %s: SQLite's locks can only be held safely on Linux (open file description locks)", ErrUnsupported, db)
}

// Supported reports whether Freeze can work on this platform.
func Supported() bool { return false }
