package daemon

import (
	"log/slog"
	"runtime"
	"runtime/debug"
	"testing"
)

func TestTrimmerDecides(t *testing.T) {
	for _, c := range []struct {
		name string
		busy bool
		free int64 // reclaimable
		want bool
	}{
		{"idle with heap to reclaim", false, trimAbove, true},
		{"a sync running", true, 1 << 30, false},
		{"too little to be worth it", false, trimAbove - 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			trimmed := false
			tr := &trimmer{busy: func() bool { return c.busy }, free: func() int64 { return c.free },
				trim: func() { trimmed = true }, log: slog.New(slog.DiscardHandler)}
			if got := tr.once(); got != c.want || trimmed != c.want {
				t.Fatalf("once() = %v (trimmed %v), want %v", got, trimmed, c.want)
			}
		})
	}
}

// TestTrimmerReturnsHeap: the heap a dropped 64 MiB left free is returned
// by the real runtime calls.
func TestTrimmerReturnsHeap(t *testing.T) {
	func() {
		b := make([]byte, 64<<20)
		for i := range b {
			b[i] = 1 // touched: resident
		}
		runtime.KeepAlive(b)
	}()
	runtime.GC()
	before := heapReclaimable()
	if before < 32<<20 {
		t.Fatalf("after dropping 64 MiB the runtime holds %d bytes free", before)
	}
	trimsHalf(t, before)
}

// TestTrimmerCollectsGarbage: objects that died since the last collection
// count, and the trim collects them (an idle daemon runs no collection of
// its own for minutes; collections are off here).
func TestTrimmerCollectsGarbage(t *testing.T) {
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	func() {
		keep := make([][]byte, 0, 64)
		for range 64 {
			b := make([]byte, 1<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1 // touched: resident
			}
			keep = append(keep, b)
		}
		runtime.KeepAlive(keep)
	}()
	before := heapReclaimable()
	if before < 48<<20 {
		t.Fatalf("64 MiB dead since the last collection, %d bytes reclaimable", before)
	}
	trimsHalf(t, before)
}

// trimsHalf runs one decision of an idle daemon's trimmer over the real
// runtime and fails unless it trimmed and at most half of the before
// bytes are still reclaimable.
func trimsHalf(t *testing.T, before int64) {
	t.Helper()
	tr := newTrimmer(func() bool { return false }, slog.New(slog.DiscardHandler))
	if !tr.once() {
		t.Fatalf("an idle daemon with %d reclaimable bytes did not trim", before)
	}
	if after := heapReclaimable(); after > before/2 {
		t.Fatalf("%d bytes reclaimable after the trim, %d before", after, before)
	}
}
