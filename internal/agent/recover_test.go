package agent

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/wait"
)

// failureLog records the observer's Failed calls.
type failureLog struct {
	nopObserver
	mu     sync.Mutex
	stages []string
}

func (f *failureLog) Failed(_, stage string, _ error) {
	f.mu.Lock()
	f.stages = append(f.stages, stage)
	f.mu.Unlock()
}

func (f *failureLog) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.stages)
}

// breakDir puts a regular file where dir was (moving dir aside), which
// makes it unwritable for root too; the returned func puts it back.
func breakDir(t *testing.T, dir string) func() {
	t.Helper()
	aside := dir + ".aside"
	if err := os.Rename(dir, aside); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a directory\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := os.Remove(dir); err != nil {
			t.Fatal(err)
		}
		err := os.Rename(aside, dir)
		if errors.Is(err, os.ErrNotExist) {
			err = os.Mkdir(dir, 0o700)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A sync that fails on the spool probes the directories while its retry
// waits: a probe that fails keeps probing, one that succeeds after it
// retries at once, long before the backoff would have. A probe that
// succeeds at once (the fault is elsewhere, e.g. Walrus) ends the probing
// and leaves the retry to the backoff.
func TestLoopProbesFailedDirectories(t *testing.T) {
	r, a, l, _ := loopRig(t)
	l.retryDue()
	if err := l.syncStep(t.Context()); err != nil {
		t.Fatal(err)
	}
	spool := a.deps.State.SpoolDir()
	os.MkdirAll(spool, 0o700)
	r.pipe.take = func(context.Context, snapshot.Input) (snapshot.Result, error) {
		f, err := os.CreateTemp(spool, "blob-*")
		if err != nil {
			return snapshot.Result{}, err
		}
		f.Close()
		return snapshot.Result{}, errors.New("walrus: 503")
	}
	fix := breakDir(t, spool)
	r.write("system.md", "v2\n")
	l.pending = []string{"system.md"}
	for range 3 { // the backoff grows meanwhile
		if err := l.syncStep(t.Context()); err == nil {
			t.Fatal("the sync succeeded with the spool broken")
		}
	}
	if !l.waiting || !l.probing {
		t.Fatalf("after a failed sync: waiting %v, probing %v", l.waiting, l.probing)
	}
	if l.probeDirs() || !l.probing || !l.waiting {
		t.Fatalf("a probe of a broken spool retries now (probing %v, waiting %v)", l.probing, l.waiting)
	}
	// The backoff's retry fails again, and the spool is fixed before the
	// next probe: that probe still retries at once.
	l.retryDue()
	if err := l.syncStep(t.Context()); err == nil {
		t.Fatal("the sync succeeded with the spool broken")
	}
	fix()
	if !l.probeDirs() || l.waiting || l.probing {
		t.Fatalf("the spool is back: retry now %v, probing %v", !l.waiting, l.probing)
	}

	// The fault is not a directory's: the first probe succeeds and ends
	// the probing; the backoff decides.
	if err := l.syncStep(t.Context()); err == nil || !l.probing {
		t.Fatalf("sync: %v, probing %v", err, l.probing)
	}
	if l.probeDirs() || l.probing || !l.waiting {
		t.Fatalf("Walrus failing, directories fine: retry now %v, probing %v", !l.waiting, l.probing)
	}
	r.pipe.take = nil
	l.retryDue()
	if err := l.syncStep(t.Context()); err != nil || l.probing {
		t.Fatalf("the retry: %v, probing %v", err, l.probing)
	}
}

// Every failed sync counts once, by the stage that failed: an unwritable
// agent state directory, a spool the SQLite copies cannot go to, a failed
// upload; a snapshot that gives way to a newer state is no failure.
func TestSyncFailuresCounted(t *testing.T) {
	r := newRig(t)
	r.name = ""
	r.write("system.md", "v1\n")
	obs := &failureLog{}
	a := r.open()
	a.deps.Observer = obs
	if err := a.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}

	// The upload fails, twice.
	boom := errors.New("walrus: 503")
	r.pipe.take = func(context.Context, snapshot.Input) (snapshot.Result, error) { return snapshot.Result{}, boom }
	r.write("system.md", "v2\n")
	for range 2 {
		if _, err := a.SyncOnce(t.Context()); !errors.Is(err, boom) {
			t.Fatalf("sync: %v", err)
		}
	}
	// It gives way to a newer state: not a failure.
	r.pipe.take = func(context.Context, snapshot.Input) (snapshot.Result, error) {
		return snapshot.Result{}, snapshot.ErrSuperseded
	}
	a.SyncOnce(t.Context())
	// The state directory cannot be written: the snapshot is taken, its
	// state not saved, and the next syncs fail at the save.
	r.pipe.take = nil
	fix := breakDir(t, a.dir)
	for range 2 {
		if _, err := a.SyncOnce(t.Context()); err == nil || StageOf(err) != StageState {
			t.Fatalf("sync with the agent directory broken: %v (stage %s)", err, StageOf(err))
		}
	}
	fix()
	if _, err := a.SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := []string{StageSnapshot, StageSnapshot, StageState, StageState}
	if got := obs.got(); !slices.Equal(got, want) {
		t.Fatalf("failures counted %v, want %v", got, want)
	}
}

// A change unsaved for longer than the configuration promises makes the
// agent unhealthy, whatever the cause: Status says for how long.
func TestUnsavedOverdue(t *testing.T) {
	r, a, l, _, clk := loopRigClock(t)
	a.cfg.UnsavedLimit = 40 * time.Second
	l.retryDue()
	if err := l.syncStep(t.Context()); err != nil {
		t.Fatal(err)
	}
	hung := make(chan struct{})
	r.pipe.take = func(ctx context.Context, _ snapshot.Input) (snapshot.Result, error) {
		<-hung // the store never answers
		return snapshot.Result{}, ctx.Err()
	}
	r.write("system.md", "v2\n")
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.pending = []string{"system.md"}
		l.syncStep(context.Background())
	}()
	t.Cleanup(func() { close(hung); <-done })
	wait.For(t, "the change to be unsaved", func() bool { return !a.Status().UnsavedSince.IsZero() })
	if s := a.Status(); s.UnsavedOverdue != "" {
		t.Fatalf("overdue at once: %s", s.UnsavedOverdue)
	}
	clk.add(40 * time.Second)
	if s := a.Status(); s.UnsavedOverdue != "" {
		t.Fatalf("overdue at the limit: %s", s.UnsavedOverdue)
	}
	clk.add(time.Second)
	s := a.Status()
	if !strings.Contains(s.UnsavedOverdue, "unsaved for 41s, longer than the 40s") || s.LastError != "" {
		t.Fatalf("past the limit: overdue %q, last error %q", s.UnsavedOverdue, s.LastError)
	}
}
