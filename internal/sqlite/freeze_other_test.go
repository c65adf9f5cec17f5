//go:build !linux

package sqlite

import (
	"errors"
	"testing"
)

// TestFreezeUnsupported: without open-file-description locks Freeze says
// so, and the caller keeps detect-and-retry.
func TestFreezeUnsupported(t *testing.T) {
	brain, _ := newDB(t, "WAL", 1)
	if _, err := Freeze(t.Context(), brain, "memory.db", t.TempDir(), Options{}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Freeze = %v, want ErrUnsupported", err)
	}
}
