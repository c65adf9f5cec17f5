package walrus

import (
	"errors"
	"fmt"

	"github.com/hermesd/hermesd/internal/diskspace"
)

// CheckFreeSpace checks that the filesystem holding dir has room for need
// more bytes plus a margin (see diskspace.Check), and fails with
// ErrNoSpace and the numbers if not.
func CheckFreeSpace(dir string, need int64) error {
	err := diskspace.Check(dir, need)
	if errors.Is(err, diskspace.ErrNoSpace) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	if err != nil {
		return fmt.Errorf("walrus: %w", err)
	}
	return nil
}
