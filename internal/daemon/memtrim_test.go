package daemon

import (
	"log/slog"
	"runtime"
	"testing"
)

func TestTrimmerDecides(t *testing.T) {
	for _, c := range []struct {
		name string
		busy bool
		free int64
		want bool
	}{
		{"idle with free heap", false, trimAbove, true},
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
	before := heapFree()
	if before < 32<<20 {
		t.Fatalf("after dropping 64 MiB the runtime holds %d bytes free", before)
	}
	tr := newTrimmer(func() bool { return false }, slog.New(slog.DiscardHandler))
	if !tr.once() {
		t.Fatal("an idle daemon with 64 MiB free did not trim")
	}
	if after := heapFree(); after > before/2 {
		t.Fatalf("free heap %d bytes after the trim, %d before", after, before)
	}
}
