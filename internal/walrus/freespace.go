package walrus

import (
	"errors"
	"fmt"
	"math"
)

// minFreeMargin is the least free space a download leaves on its
// filesystem: the daemon's state, logs and the next spool need room too.
const minFreeMargin = 64 << 20

// errSpaceUnknown means the platform cannot tell free space.
var errSpaceUnknown = errors.New("free space unknown on this platform")

// CheckFreeSpace checks that the filesystem holding dir has room for need
// more bytes plus a margin of max(64 MiB, 1% of the filesystem), and
// fails with ErrNoSpace and the numbers if not. Where the platform cannot
// tell (neither Linux nor macOS), it returns nil.
func CheckFreeSpace(dir string, need int64) error {
	avail, size, err := diskSpace(dir)
	if errors.Is(err, errSpaceUnknown) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("walrus: free space of %s: %w", dir, err)
	}
	margin := max(uint64(minFreeMargin), size/100)
	if need < 0 {
		need = 0
	}
	if uint64(need) > avail || avail-uint64(need) < margin {
		return fmt.Errorf("%w: %s has %s free, %s are needed plus a margin of %s",
			ErrNoSpace, dir, FormatSize(clampInt64(avail)), FormatSize(need), FormatSize(clampInt64(margin)))
	}
	return nil
}

func clampInt64(n uint64) int64 {
	if n > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(n)
}
