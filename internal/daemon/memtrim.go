package daemon

import (
	"context"
	"log/slog"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"time"
)

// A snapshot's peak leaves its heap free but kept, or full of objects
// that died since the last collection: the Go runtime returns free pages
// only after a collection, and an idle daemon allocates too little to run
// one for minutes (the forced one comes every two). The trimmer looks at
// both now and then and, while no agent syncs, collects and returns them
// at once: after one agent's 220 MB first snapshot its RSS fell from the
// peak's to about its live heap's.
const (
	trimEvery = 10 * time.Second
	// trimAbove is the reclaimable heap worth a collection and its system
	// calls (FreeOSMemory costs a collection: a few ms at the daemon's
	// heap). Under the collector's pacing (gcpace) the heap grows only
	// 8 MiB or a quarter past its live size, so an idle daemon holds less
	// than 16 MiB free: at 16 it would never trim (the snapshot of 50,000
	// files left 44 MiB anonymous a minute after, 35 with 4).
	trimAbove = 4 << 20
)

// trimmer returns free heap to the system when there is enough of it and
// nothing runs that would only take it again.
type trimmer struct {
	busy func() bool  // a sync is running
	free func() int64 // heap bytes a collection would return (heapReclaimable)
	trim func()       // collect and return them
	log  *slog.Logger
}

func newTrimmer(busy func() bool, log *slog.Logger) *trimmer {
	return &trimmer{busy: busy, free: heapReclaimable, trim: debug.FreeOSMemory, log: log}
}

// once trims if it should, and reports whether it did.
func (t *trimmer) once() bool {
	if t.busy() {
		return false
	}
	free := t.free()
	if free < trimAbove {
		return false
	}
	t.trim()
	t.log.Debug("returned free heap to the system", "reclaimable", free)
	return true
}

// run trims every trimEvery until ctx ends.
func (t *trimmer) run(ctx context.Context) {
	tick := time.NewTicker(trimEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			t.once()
		}
	}
}

// heapReclaimable is the heap a collection would return: what the runtime
// holds free and has not returned, and the objects that died since the
// last collection (the heap's objects beyond the live heap it marked).
func heapReclaimable() int64 {
	s := []rtmetrics.Sample{
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/heap/live:bytes"},
	}
	rtmetrics.Read(s)
	var v [3]int64
	for i := range s {
		if s[i].Value.Kind() != rtmetrics.KindUint64 {
			return 0
		}
		v[i] = int64(s[i].Value.Uint64())
	}
	return v[0] + max(0, v[1]-v[2])
}
