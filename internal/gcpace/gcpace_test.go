package gcpace

import (
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"testing"

	"github.com/hermesd/hermesd/internal/wait"
)

// gogc reads the collector's percentage without changing it.
func gogc() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func metric(name string) uint64 {
	s := []rtmetrics.Sample{{Name: name}}
	rtmetrics.Read(s)
	return s[0].Value.Uint64()
}

// The collector's goal follows the live heap: a quarter past a large one,
// GOGC's own doubling for a small one, and GOGC as it was after Stop.
func TestPacerFollowsLiveHeap(t *testing.T) {
	t.Setenv("GOGC", "") // the test's own environment must not turn it off
	before := gogc()
	p := Start(Policy{Min: 1 << 20, Fraction: 0.25})
	if p == nil {
		t.Fatal("Start returned nil without GOGC set")
	}
	defer p.Stop()
	if q := Start(Daemon); q != nil {
		q.Stop()
		t.Fatal("a second pacer started beside the first")
	}

	live := make([][]byte, 96)
	for i := range live {
		live[i] = make([]byte, 1<<20)
		live[i][0] = byte(i)
	}
	wait.For(t, "a quarter of a 96 MiB live heap as headroom", func() bool {
		runtime.GC()
		return p.Percent() == 25 || p.Percent() == 24
	})
	runtime.GC() // a cycle under the new percentage sets the goal by it
	goal, heap := metric("/gc/heap/goal:bytes"), metric("/gc/heap/live:bytes")
	if float64(goal) > 1.3*float64(heap) {
		t.Fatalf("heap goal %d MiB for a live heap of %d MiB: more than the quarter's headroom", goal>>20, heap>>20)
	}
	runtime.KeepAlive(live)
	live = nil

	wait.For(t, "GOGC's own 100% back for a small live heap", func() bool {
		runtime.GC()
		return p.Percent() == 100
	})
	p.Stop()
	if got := gogc(); got != before {
		t.Fatalf("GOGC %d after Stop, want %d as before Start", got, before)
	}
	if q := Start(Daemon); q == nil {
		t.Fatal("no pacer starts after the first stopped")
	} else {
		q.Stop()
	}
	runtime.GC()
	if got := gogc(); got != before {
		t.Fatalf("GOGC %d after a collection past Stop, want %d", got, before)
	}
}

func TestStartLeavesAnOperatorsGOGC(t *testing.T) {
	t.Setenv("GOGC", "150")
	before := gogc()
	p := Start(Daemon)
	if p != nil {
		p.Stop()
		t.Fatal("Start paced the collector though GOGC is set")
	}
	runtime.GC()
	if got := gogc(); got != before {
		t.Fatalf("GOGC %d, want %d untouched", got, before)
	}
	p.Stop() // a nil pacer's Stop does nothing
}
