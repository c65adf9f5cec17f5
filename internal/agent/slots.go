package agent

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/hermesd/hermesd/internal/snapshot"
)

// slotHolder is one sync's hold on a process-wide sync slot (Env.Slots).
// The slot bounds work on the cores; a snapshot whose packs wait for a
// quilt batch lends it out meanwhile (snapshot.Slot), so that the other
// agents' snapshots can join the batch, and takes it back afterwards.
type slotHolder struct {
	slots chan struct{} // nil: no bound

	mu    sync.Mutex
	held  bool
	waits int // packs of this sync waiting for their batches
}

var _ snapshot.Slot = (*slotHolder)(nil)

func (s *slotHolder) take(ctx context.Context) error {
	if s.slots == nil {
		return nil
	}
	select {
	case s.slots <- struct{}{}:
		s.held = true
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *slotHolder) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held {
		<-s.slots
		s.held = false
	}
}

// Lend gives the slot up for a wait (the first of concurrent ones).
func (s *slotHolder) Lend() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waits++
	if s.waits == 1 && s.held {
		<-s.slots
		s.held = false
	}
}

// Reclaim ends a wait, the last one taking the slot back. A sync that
// cannot take it back (it is being stopped) goes on without.
func (s *slotHolder) Reclaim(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waits--; s.waits > 0 || s.slots == nil {
		return nil
	}
	select {
	case s.slots <- struct{}{}:
		s.held = true
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// watchNewer returns a channel closed when w has a batch of changes
// ready while a sync runs (the sync's snapshot may then give way to a
// newer one), and stop, which ends the watch and reports whether it
// consumed w's ready signal: the caller then takes the batch itself.
func watchNewer(w Watcher) (newer <-chan struct{}, stop func() bool) {
	if w == nil {
		return nil, func() bool { return false }
	}
	ch := make(chan struct{})
	done, finished := make(chan struct{}), make(chan struct{})
	var fired atomic.Bool
	go func() {
		defer close(finished)
		select {
		case <-w.Ready():
			fired.Store(true)
			close(ch)
		case <-done:
		}
	}()
	return ch, func() bool {
		close(done)
		<-finished
		return fired.Load()
	}
}
