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

// The margin a write leaves free on its filesystem, for the daemon's
// state, logs and the next spool file: MarginShare of the filesystem,
// at least MinMargin and at most MaxMargin. It follows the filesystem's
// size, so a small one (a 16 MiB volume, a RAM disk) can take a restore
// that fits it, while a large one keeps a fixed headroom.
const (
	MinMargin   = 1 << 20
	MaxMargin   = 64 << 20
	MarginShare = 20 // 1/20 = 5 %
)

// ErrNoSpace matches a refusal for lack of space.
var ErrNoSpace = errors.New("not enough free disk space")

// errUnknown means the platform cannot tell free space.
var errUnknown = errors.New("free space unknown on this platform")

// statfs is where free space comes from: the platform's (space), or a
// test's.
var statfs = space

// Check fails with ErrNoSpace unless the filesystem holding dir has room
// for need more bytes plus a margin (Margin). Where the platform cannot
// tell, it passes.
func Check(dir string, need int64) error {
	avail, size, err := statfs(dir)
	if errors.Is(err, errUnknown) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("free space of %s: %w", dir, err)
	}
	margin := Margin(size)
	if need < 0 {
		need = 0
	}
	if uint64(need) > avail || avail-uint64(need) < margin {
		return fmt.Errorf("%w: %s has %s free, %s are needed plus a margin of %s (5%% of its %s filesystem, at least %s and at most %s)",
			ErrNoSpace, dir, Format(clamp(avail)), Format(need), Format(clamp(margin)), Format(clamp(size)),
			Format(MinMargin), Format(MaxMargin))
	}
	return nil
}

// Margin is the free space a write must leave on a filesystem of size
// bytes.
func Margin(size uint64) uint64 {
	return min(uint64(MaxMargin), max(uint64(MinMargin), size/MarginShare))
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
