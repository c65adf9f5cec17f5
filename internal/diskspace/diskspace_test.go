package diskspace

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	if err := Check(dir, 1); err != nil {
		t.Fatalf("one byte: %v", err)
	}
	err := Check(dir, math.MaxInt64)
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("an exabyte: %v", err)
	}
	if err := Check(dir+"/missing", 1); err == nil || errors.Is(err, ErrNoSpace) {
		t.Fatalf("missing dir: %v", err)
	}
}

// TestMargin: the margin follows the filesystem's size (5 %, at least
// 1 MiB, at most 64 MiB), so a restore that fits a small filesystem is
// taken (a fixed 64 MiB would refuse a 3 MiB restore on a 16 MiB
// filesystem forever), and the refusal states the rule.
func TestMargin(t *testing.T) {
	const MiB, GiB = 1 << 20, 1 << 30
	for _, tc := range []struct {
		size, margin uint64
	}{
		{0, MiB}, {16 * MiB, MiB}, {20 * MiB, MiB}, {40 * MiB, 2 * MiB},
		{256 * MiB, 256 * MiB / 20}, {1280 * MiB, 64 * MiB}, {GiB << 10, 64 * MiB},
	} {
		if got := Margin(tc.size); got != tc.margin {
			t.Errorf("Margin(%d) = %d, want %d", tc.size, got, tc.margin)
		}
	}
	for _, tc := range []struct {
		name              string
		avail, size, need uint64
		ok                bool
	}{
		{"3 MiB on a 16 MiB filesystem", 15 * MiB, 16 * MiB, 3 * MiB, true},
		{"up to the margin", 15 * MiB, 16 * MiB, 14 * MiB, true},
		{"a byte into the margin", 15 * MiB, 16 * MiB, 14*MiB + 1, false},
		{"more than is free", 15 * MiB, 16 * MiB, 16 * MiB, false},
		{"a large filesystem keeps 64 MiB", 100 * MiB, 100 * GiB, 36 * MiB, true},
		{"a large filesystem: one more byte", 100 * MiB, 100 * GiB, 36*MiB + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			statfs = func(string) (uint64, uint64, error) { return tc.avail, tc.size, nil }
			defer func() { statfs = space }()
			err := Check("/srv/brains", int64(tc.need))
			if tc.ok != (err == nil) || err != nil && !errors.Is(err, ErrNoSpace) {
				t.Fatalf("Check: %v", err)
			}
			if err != nil && !strings.Contains(err.Error(), "5% of its") {
				t.Errorf("the refusal does not state the rule: %v", err)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.000 KiB",
		1<<30 - 1: "1024.000 MiB", 1 << 30: "1.000 GiB", 1<<30 + 1<<20: "1.001 GiB"} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestGuard: an endless stream onto a filesystem with little room stops
// with ErrNoSpace before the margin, looking at the free space more often
// as the room shrinks, and never lets a write into the margin.
func TestGuard(t *testing.T) {
	const MiB = 1 << 20
	size := uint64(16 * MiB)
	avail := uint64(15 * MiB) // margin 1 MiB: 14 MiB of room
	statfs = func(string) (uint64, uint64, error) { return avail, size, nil }
	defer func() { statfs = space }()
	var written uint64
	w := writerFunc(func(p []byte) (int, error) {
		if uint64(len(p)) > avail {
			return 0, errors.New("ENOSPC") // the disk itself is full
		}
		avail -= uint64(len(p))
		written += uint64(len(p))
		return len(p), nil
	})
	g := &Guard{W: w, Dir: "/srv/spool"}
	buf := make([]byte, 32<<10)
	var err error
	for err == nil {
		_, err = g.Write(buf)
	}
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "margin") {
		t.Fatalf("stopped with %v", err)
	}
	if avail < Margin(size) || avail-Margin(size) >= uint64(len(buf)) {
		t.Errorf("stopped with %d bytes free (margin %d): not at the margin", avail, Margin(size))
	}
	if g.Looks() > 20 {
		t.Errorf("%d looks at the free space for %d bytes", g.Looks(), written)
	}
	// A filesystem that cannot tell passes, as Check does.
	statfs = func(string) (uint64, uint64, error) { return 0, 0, errUnknown }
	g = &Guard{W: writerFunc(func(p []byte) (int, error) { return len(p), nil }), Dir: "/x"}
	if _, err := g.Write(buf); err != nil {
		t.Errorf("unknown free space: %v", err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
