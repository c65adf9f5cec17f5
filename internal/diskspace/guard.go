package diskspace

import (
	"errors"
	"fmt"
	"io"
	"math"
)

// GuardEvery is the most bytes a Guard lets pass between two looks at
// the free space.
const GuardEvery = 64 << 20

// Room is how many more bytes the filesystem holding dir takes before
// its margin (Margin); -1 when the platform cannot tell.
func Room(dir string) (int64, error) {
	avail, size, err := statfs(dir)
	if errors.Is(err, errUnknown) {
		return -1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	margin := Margin(size)
	if avail <= margin {
		return 0, nil
	}
	return clamp(avail - margin), nil
}

// Guard passes writes to W while they leave the filesystem holding Dir
// its margin, and fails with ErrNoSpace the first that would not: a
// download of unknown length stops at the margin, as a restore of known
// size does before it starts, instead of running the disk full. It looks
// at the free space before the first write and then whenever half of the
// room it last saw is used (GuardEvery at most), so the looks come closer
// as the room shrinks; a disk someone else fills meanwhile is noticed
// within the same bound.
type Guard struct {
	W   io.Writer
	Dir string

	left  int64 // bytes that may pass before the next look
	looks int
}

func (g *Guard) Write(p []byte) (int, error) {
	n := int64(len(p))
	if g.looks == 0 || n > g.left {
		room, err := Room(g.Dir)
		if err != nil {
			return 0, err
		}
		g.looks++
		switch {
		case room < 0:
			g.left = math.MaxInt64 // cannot tell: as Check, pass
		case n > room:
			avail, size, _ := statfs(g.Dir)
			return 0, fmt.Errorf("%w: %s has %s free and the write would leave less than the margin of %s (5%% of its %s filesystem, at least %s and at most %s)",
				ErrNoSpace, g.Dir, Format(clamp(avail)), Format(clamp(Margin(size))), Format(clamp(size)), Format(MinMargin), Format(MaxMargin))
		default:
			g.left = max(n, min(room/2, GuardEvery))
		}
	}
	g.left -= n
	return g.W.Write(p)
}

// Looks is how many times the guard looked at the free space.
func (g *Guard) Looks() int { return g.looks }
