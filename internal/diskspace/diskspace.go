// Package diskspace checks that a filesystem has room before hermesd
// writes something large to it (a spool file, a restored brain), so a
// full disk is reported in one clear line before anything is written
// rather than as a failed write halfway through.
package diskspace

import (
	"errors"
	"fmt"
	"math"
)

// MinMargin is the least free space a write leaves on its filesystem: the
// daemon's state, logs and the next spool need room too.
const MinMargin = 64 << 20

// ErrNoSpace matches a refusal for lack of space.
var ErrNoSpace = errors.New("not enough free disk space")

// errUnknown means the platform cannot tell free space.
var errUnknown = errors.New("free space unknown on this platform")

// Check fails with ErrNoSpace unless the filesystem holding dir has room
// for need more bytes plus a margin of max(MinMargin, 1% of the
// filesystem). Where the platform cannot tell, it passes.
func Check(dir string, need int64) error {
	avail, size, err := space(dir)
	if errors.Is(err, errUnknown) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("free space of %s: %w", dir, err)
	}
	margin := max(uint64(MinMargin), size/100)
	if need < 0 {
		need = 0
	}
	if uint64(need) > avail || avail-uint64(need) < margin {
		return fmt.Errorf("%w: %s has %s free, %s are needed plus a margin of %s",
			ErrNoSpace, dir, Format(clamp(avail)), Format(need), Format(clamp(margin)))
	}
	return nil
}

func clamp(n uint64) int64 {
	if n > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(n)
}

// Format prints a byte count in binary units, precisely enough that two
// different sizes near a limit do not print the same.
func Format(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	f, i := float64(n), 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.3f %s", f, units[i])
}
