package agent

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/watch"
)

// loopRig is an agent, prepared, on a clock the test moves, and its
// loop's state without Run: the tests call the loop's steps themselves,
// as Run would.
func loopRig(t *testing.T) (*rig, *Agent, *loop, *fakeWatcher) {
	t.Helper()
	r, a, l, w, _ := loopRigClock(t)
	return r, a, l, w
}

func loopRigClock(t *testing.T) (*rig, *Agent, *loop, *fakeWatcher, *clock) {
	t.Helper()
	r := newRig(t)
	r.name = ""
	clk := &clock{t: time.Now()}
	r.now = clk.now
	r.write("system.md", "v1\n")
	a := r.open()
	if err := a.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	w := newFakeWatcher()
	l := a.newLoop(Env{Watch: func(string, watch.Options) (Watcher, error) { return w, nil }})
	t.Cleanup(l.close)
	return r, a, l, w, clk
}

// push makes a batch of changes ready on w.
func (w *fakeWatcher) push(paths ...string) {
	w.mu.Lock()
	w.batch, w.has = watch.Batch{Paths: paths}, true
	w.mu.Unlock()
	w.ready <- struct{}{}
}

// The loop's first pass looks at the whole brain; a sync that succeeds
// clears what it synced and arms no retry.
func TestLoopSyncStep(t *testing.T) {
	r, a, l, _ := loopRig(t)
	if !l.rescan || !l.waiting {
		t.Fatalf("first pass: rescan %v, waiting %v; want both", l.rescan, l.waiting)
	}
	l.retryDue()
	if err := l.syncStep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if l.rescan || l.pending != nil || l.waiting || l.uploaded.IsZero() {
		t.Errorf("after a snapshot: rescan %v, pending %v, waiting %v, uploaded %v", l.rescan, l.pending, l.waiting, l.uploaded)
	}
	if r.pipe.Takes() != 1 || a.Status().Last == nil {
		t.Fatalf("%d takes, last %+v", r.pipe.Takes(), a.Status().Last)
	}
}

// failSync makes the loop sync an edit of system.md that fails with err,
// and leaves the pipeline failing so.
func failSync(t *testing.T, r *rig, l *loop, err error) {
	t.Helper()
	l.retryDue()
	l.rescan = false
	l.pending = []string{"system.md"}
	r.write("system.md", "v2\n")
	r.pipe.take = func(context.Context, snapshot.Input) (snapshot.Result, error) { return snapshot.Result{}, err }
	if got := l.syncStep(t.Context()); !errors.Is(got, err) {
		t.Fatalf("sync step: %v", got)
	}
}

// A failed sync keeps the changes it was to store, says so, and waits
// for its retry; batches meanwhile only accumulate. The next sync that
// succeeds clears the failure.
func TestLoopSyncStepFailure(t *testing.T) {
	r, a, l, w := loopRig(t)
	failSync(t, r, l, errors.New("walrus: 503"))
	if !l.waiting || !slices.Equal(l.pending, []string{"system.md"}) || !a.Failing() || a.Status().UnsavedSince.IsZero() {
		t.Fatalf("after a failure: waiting %v, pending %v, failing %v", l.waiting, l.pending, a.Failing())
	}
	w.push("notes.md")
	<-l.ready()
	if !l.collect() || !slices.Equal(l.pending, []string{"system.md", "notes.md"}) {
		t.Fatalf("collected %v", l.pending)
	}
	r.pipe.take = nil
	l.retryDue()
	if err := l.syncStep(t.Context()); err != nil || a.Failing() || l.pending != nil {
		t.Fatalf("the retry: %v, failing %v, pending %v", err, a.Failing(), l.pending)
	}
}

// A failure outlives the loop that met it (the agent is dropped and
// resumed, or handed back): the status keeps saying so until a sync of a
// later loop succeeds, and that success clears it although the new
// loop's backoff has counted no failure. (A stale failure kept a resumed
// fleet node unready for good.)
func TestLoopFailureClearedByNextLoop(t *testing.T) {
	r, a, l, _ := loopRig(t)
	failSync(t, r, l, errors.New("fenced: this node's etcd lease is not known to be held"))
	if !a.Failing() {
		t.Fatal("the failure was forgotten with its loop")
	}
	r.pipe.take = nil
	next := a.newLoop(Env{Watch: func(string, watch.Options) (Watcher, error) { return newFakeWatcher(), nil }})
	t.Cleanup(next.close)
	next.retryDue()
	if err := next.syncStep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s := a.Status(); a.Failing() || s.LastError != "" {
		t.Fatalf("after the next loop's snapshot: failing %v, last error %q", a.Failing(), s.LastError)
	}
}

// A snapshot that gives way to a newer state is no failure: the batch
// that made it give way is collected and synced at once.
func TestLoopSyncStepSuperseded(t *testing.T) {
	r, a, l, w := loopRig(t)
	l.retryDue()
	r.pipe.take = func(ctx context.Context, in snapshot.Input) (snapshot.Result, error) {
		w.push("notes.md") // while the snapshot waits for its quilt
		select {
		case <-in.Newer:
			return snapshot.Result{}, snapshot.ErrSuperseded
		case <-ctx.Done():
			return snapshot.Result{}, ctx.Err()
		}
	}
	if err := l.syncStep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if a.Failing() || !l.waiting || !l.rescan || !slices.Equal(l.pending, []string{"notes.md"}) {
		t.Fatalf("after giving way: failing %v, waiting %v, rescan %v, pending %v", a.Failing(), l.waiting, l.rescan, l.pending)
	}
	select {
	case <-l.retry.C: // armed to fire at once
	case <-time.After(time.Minute):
		t.Fatal("the newer state's sync is not due")
	}
}

// snapshot_interval holds a sync back: the changes wait, counted unsaved,
// until the interval since the last upload has passed.
func TestLoopHeld(t *testing.T) {
	r, a, l, _, clk := loopRigClock(t)
	a.cfg.MinInterval = time.Hour
	if l.held() {
		t.Fatal("held before any upload")
	}
	l.retryDue()
	if err := l.syncStep(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.write("system.md", "v2\n")
	l.pending = []string{"system.md"}
	if !l.held() || !l.waiting || a.Status().UnsavedSince.IsZero() {
		t.Fatalf("within the interval: waiting %v, unsaved since %v", l.waiting, a.Status().UnsavedSince)
	}
	clk.add(time.Hour)
	l.retryDue()
	if l.held() {
		t.Fatal("held once the interval passed")
	}
	if err := l.syncStep(t.Context()); err != nil || r.pipe.Takes() != 2 {
		t.Fatalf("after the interval: %v, %d takes", err, r.pipe.Takes())
	}
}

// The last sync of a stop takes the batch still in the debounce and looks
// at the whole brain, whatever snapshot_interval says.
func TestLoopFinal(t *testing.T) {
	r, a, l, w := loopRig(t)
	l.retryDue()
	if err := l.syncStep(t.Context()); err != nil {
		t.Fatal(err)
	}
	a.cfg.MinInterval = time.Hour
	r.write("late.md", "written just before the stop\n")
	w.mu.Lock()
	w.batch, w.has = watch.Batch{Paths: []string{"late.md"}}, true
	w.mu.Unlock()
	if err := l.final(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r.pipe.Takes() != 2 || l.pending != nil || l.rescan {
		t.Fatalf("%d takes; pending %v, rescan %v", r.pipe.Takes(), l.pending, l.rescan)
	}
	if _, ok := w.Take(); ok {
		t.Error("the debounced batch was left in the watcher")
	}
}

// A wiped brain comes back from its last snapshot; an edit made after the
// restore hashed the brain but before the new directory's watch took hold
// sent no event, so the loop looks at the whole brain again at once.
func TestLoopRestoredLooksAgain(t *testing.T) {
	r, a, l, w := loopRig(t)
	l.retryDue()
	if err := l.syncStep(t.Context()); err != nil {
		t.Fatal(err)
	}
	subscribed := 0
	l.env.Watch = func(string, watch.Options) (Watcher, error) {
		subscribed++
		r.write("skills/after.md", "written before the watch\n")
		return w, nil
	}
	if err := os.RemoveAll(r.brain); err != nil {
		t.Fatal(err)
	}
	l.rescan = true
	if err := l.syncStep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if subscribed != 1 || r.pipe.Takes() != 1 {
		t.Fatalf("after the restore: %d subscriptions, %d takes", subscribed, r.pipe.Takes())
	}
	if !l.rescan || !l.waiting {
		t.Fatalf("after the restore: rescan %v, waiting %v; want a look at the whole brain", l.rescan, l.waiting)
	}
	select {
	case <-l.retry.C: // armed to fire at once
	case <-time.After(time.Minute):
		t.Fatal("no sync due after the restore")
	}
	l.retryDue()
	if err := l.syncStep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r.pipe.Takes() != 2 || a.Status().Last == nil {
		t.Fatalf("the edit after the restore: %d takes, last %+v", r.pipe.Takes(), a.Status().Last)
	}
}
