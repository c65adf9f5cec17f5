package daemon

import (
	"context"
	"log/slog"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"time"
)

// A snapshot's peak leaves its heap free but kept: the Go runtime returns
// free pages after a collection, and an idle daemon allocates too little
// to run one for minutes (the forced one comes every two). The trimmer
// looks at the free heap now and then and, while no agent syncs, returns
// it at once: after one agent's 220 MB first snapshot its RSS fell from
// the peak's to about its live heap's.
const (
	trimEvery = 10 * time.Second
	// trimAbove is the free heap worth a collection and its system calls
	// (FreeOSMemory costs a collection: a few ms at the daemon's heap).
	trimAbove = 16 << 20
)

// trimmer returns free heap to the system when there is enough of it and
// nothing runs that would only take it again.
type trimmer struct {
	busy func() bool  // a sync is running
	free func() int64 // free heap bytes not yet returned
	trim func()       // return them
	log  *slog.Logger
}

func newTrimmer(busy func() bool, log *slog.Logger) *trimmer {
	return &trimmer{busy: busy, free: heapFree, trim: debug.FreeOSMemory, log: log}
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
	t.log.Debug("returned free heap to the system", "bytes", free)
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

// heapFree is the heap the runtime holds free and has not returned.
func heapFree() int64 {
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}
