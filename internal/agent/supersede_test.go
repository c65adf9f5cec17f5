package agent

import (
	"context"
	"fmt"
	"testing"

	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/wait"
	"github.com/hermesd/hermesd/internal/watch"
)

// TestSupersededSnapshotGivesWay: a snapshot waiting for its quilt gives
// way when a batch of changes becomes ready (its Newer fires); that is no
// failure, and the next snapshot, of the newer brain, is taken at once.
func TestSupersededSnapshotGivesWay(t *testing.T) {
	r := newRig(t)
	r.name = ""
	r.write("system.md", "first\n")
	a := r.open()
	if err := a.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	superseded := make(chan struct{})
	r.pipe.take = func(ctx context.Context, in snapshot.Input) (snapshot.Result, error) {
		if r.pipe.Takes() == 1 {
			// The first snapshot waits for its batch until a newer
			// state is ready.
			select {
			case <-in.Newer:
				close(superseded)
				return snapshot.Result{}, fmt.Errorf("v3 snapshot: upload pack: %w", snapshot.ErrSuperseded)
			case <-ctx.Done():
				return snapshot.Result{}, ctx.Err()
			}
		}
		return r.pipe.store(in.Want)
	}
	w := newFakeWatcher()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Run(ctx, Env{Watch: func(string, watch.Options) (Watcher, error) { return w, nil }})
	}()
	t.Cleanup(func() { cancel(); <-done })

	wait.For(t, "the first snapshot to wait", func() bool { return r.pipe.Takes() == 1 })
	r.write("notes.md", "written while the first snapshot waited\n")
	w.mu.Lock()
	w.batch, w.has = watch.Batch{Paths: []string{"notes.md"}}, true
	w.mu.Unlock()
	w.ready <- struct{}{}
	<-superseded
	want, err := hash.Dir(t.Context(), r.brain, hash.Options{})
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the newer state's snapshot", func() bool {
		s := a.Status()
		return s.Last != nil && s.Last.BundleHash == want.Digest.String()
	})
	if n := r.pipe.Takes(); n != 2 {
		t.Errorf("%d takes, want 2: the superseded one and the newer one", n)
	}
	if s := a.Status(); s.LastError != "" || a.Failing() {
		t.Errorf("a superseded snapshot counted as a failure: %q", s.LastError)
	}
}

// TestSlotHolderLend: a sync lends its slot out while its packs wait
// (once, however many wait at once) and takes it back after the last.
func TestSlotHolderLend(t *testing.T) {
	slots := make(chan struct{}, 1)
	s := &slotHolder{slots: slots}
	if err := s.take(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.Lend()
	s.Lend()
	select {
	case slots <- struct{}{}: // another sync can take the slot now
		<-slots
	default:
		t.Fatal("the slot is still held while packs wait")
	}
	s.Reclaim(t.Context())
	if len(slots) != 0 {
		t.Fatal("the slot came back before the last wait ended")
	}
	s.Reclaim(t.Context())
	if len(slots) != 1 || !s.held {
		t.Fatal("the slot did not come back")
	}
	s.release()
	if len(slots) != 0 {
		t.Fatal("release kept the slot")
	}
	// A sync that cannot take it back (stopped) goes on without it, and
	// releases nothing it does not hold.
	s2 := &slotHolder{slots: slots}
	s2.take(t.Context())
	s2.Lend()
	slots <- struct{}{} // someone else holds it
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s2.Reclaim(ctx); err == nil {
		t.Fatal("took a slot that is held")
	}
	s2.release()
	if len(slots) != 1 {
		t.Fatal("released a slot it did not hold")
	}
}
