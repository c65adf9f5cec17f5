package agent

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/hermesd/hermesd/internal/backoff"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/watch"
)

// Watcher is the source of change batches for one brain (a subscription
// to the process's watch hub).
type Watcher interface {
	Ready() <-chan struct{}
	Take() (watch.Batch, bool)
	Close() error
}

// Watch subscribes to changes below a directory.
type Watch func(dir string, opts watch.Options) (Watcher, error)

// Env is what the process that runs an agent's loop gives it beside the
// agent's own services: how to watch its brain, and what it shares with
// the process's other agents. Only Run uses it: SyncOnce syncs alone.
type Env struct {
	// Watch subscribes to the brain's changes.
	Watch Watch
	// Slots, when set, bounds how many agents of the process sync at
	// once (each holds a slot while it hashes and snapshots): a thousand
	// agents starting together must not run a thousand pipelines, each
	// with its buffers.
	Slots chan struct{}
	// Recovered, when set, returns a channel that is closed when the
	// services snapshots depend on come back after an outage, so a sync
	// waiting for its backoff retries at once (nil: backoff only).
	Recovered func() <-chan struct{}
}

// finalRequest is Final's request to Run.
type finalRequest struct {
	ctx  context.Context
	done chan error // buffered: Run never waits for Final
}

// Final has Run take a last snapshot for a clean stop: of changes still in
// the debounce or held back by snapshot_interval (an unchanged brain
// uploads nothing). It returns at once when Run is not running (the agent
// never became ready, or its loop was stopped), and when ctx ends. The
// pointer of that snapshot is pending like any other; the daemon's stop
// flushes it.
func (a *Agent) Final(ctx context.Context) error {
	a.mu.Lock()
	exit := a.runExit
	a.mu.Unlock()
	if exit == nil {
		return nil
	}
	req := finalRequest{ctx: ctx, done: make(chan error, 1)}
	select {
	case a.final <- req:
	case <-exit:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run watches the brain and syncs until ctx is done. Prepare must have
// succeeded. It owns its subscription; it returns when ctx is cancelled.
//
// Run only schedules: every event calls one synchronous step of the loop
// (collect a batch, sync, the last sync of a stop, save the state again,
// watch a new directory), and the steps arm the timers that wake it.
func (a *Agent) Run(ctx context.Context, env Env) {
	l := a.newLoop(env)
	defer l.close()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.recovered():
			// The outage that failed the last sync is over: retry now
			// rather than at the end of a long backoff.
			l.retryNow()
		case <-l.ready():
			// While a retry waits, changes accumulate: it includes them.
			if !l.collect() || l.waiting {
				continue
			}
		case <-l.retry.C:
			l.retryDue()
		case <-l.probe.C:
			// A local directory the failed sync needs was probed: retry
			// now if it works again, else look again soon.
			if !l.probeDirs() {
				continue
			}
		case req := <-a.final:
			req.done <- l.final(req.ctx)
			continue
		case <-a.saveFailed:
			l.armResave()
			continue
		case <-l.resave.C:
			l.resaveState()
			continue
		case <-a.rewatch:
			// A new brain directory took the old one's place.
			l.rewatch()
			if l.waiting {
				continue
			}
		case <-l.refresh.C:
			// The last snapshot nears expiry: a sync stores it again.
			if l.waiting {
				continue
			}
		}
		if l.held() {
			continue
		}
		if err := l.syncStep(ctx); err != nil && ctx.Err() != nil {
			return
		}
	}
}

// loop is Run's state: what changed since the last sync, and the timers
// and backoffs that decide when the next one runs. Only Run's goroutine
// uses it.
type loop struct {
	a   *Agent
	env Env
	w   Watcher // nil while the brain cannot be watched

	pending []string // paths changed since the last successful sync
	rescan  bool     // the next sync looks at the whole brain
	// waiting: a retry timer is armed; batches accumulate until it fires.
	waiting  bool
	uploaded time.Time // the last snapshot (snapshot_interval)

	// At most a minute between retries: the prober wakes the loop at once
	// when Walrus comes back from a visible outage, and a partial one (a
	// publisher that answers /status but fails stores) costs a minute at
	// worst.
	bo    *backoff.Backoff
	retry *time.Timer
	// While a failed sync waits for its retry, the local directories a
	// sync writes (the agent's state directory, the spool) are probed
	// every probeEvery with a one-byte write: a directory made unwritable
	// and then fixed is retried within a probe, not at the end of a
	// backoff of up to a minute. A probe that succeeds first ends the
	// probing (the fault is elsewhere); one that succeeds after a failed
	// one retries at once.
	probe   *time.Timer
	probing bool // the probe timer is armed
	// probeSeen: the last probe failed (since the last sync that
	// succeeded). A retry that failed again keeps it: the directory may
	// be fixed before the next probe.
	probeSeen bool
	// A state save that failed (after a publish, a read-back, a hold, or
	// a snapshot) is retried until it succeeds; saveStateLocked logs the
	// failure once and the recovery once.
	saveBo      backoff.Backoff
	resave      *time.Timer
	resaveArmed bool
	refresh     *time.Timer // the last snapshot nears expiry
	exit        chan struct{}
}

// newLoop starts watching the brain and arms the first pass at once: it
// looks at the whole brain, for changes made while hermesd was stopped.
func (a *Agent) newLoop(env Env) *loop {
	now := a.deps.Now
	l := &loop{
		a: a, env: env, rescan: true, waiting: true,
		bo:      &backoff.Backoff{Min: time.Second, Max: time.Minute, Log: a.log, Now: now},
		saveBo:  backoff.Backoff{Min: time.Second, Max: time.Minute, Now: now},
		retry:   time.NewTimer(0),
		probe:   time.NewTimer(time.Hour),
		resave:  time.NewTimer(time.Hour),
		refresh: time.NewTimer(time.Hour),
		exit:    make(chan struct{}),
	}
	l.probe.Stop()
	l.resave.Stop()
	l.refresh.Stop()
	a.mu.Lock()
	a.runExit = l.exit
	a.mu.Unlock()
	l.watch()
	return l
}

func (l *loop) close() {
	if l.w != nil {
		l.w.Close()
	}
	l.retry.Stop()
	l.probe.Stop()
	l.resave.Stop()
	l.refresh.Stop()
	close(l.exit)
}

// watch (re)subscribes to the brain's changes.
func (l *loop) watch() {
	if l.w != nil {
		l.w.Close()
		l.w = nil
	}
	a := l.a
	w, err := l.env.Watch(a.cfg.BrainDir, watch.Options{
		Quiet:  a.cfg.Quiet,
		MaxLag: a.cfg.MaxLag,
		Ignore: isOwnFile,
		Busy:   a.busy,
		Logger: a.log,
	})
	if err != nil {
		a.log.Error("cannot watch brain directory; will retry", "error", err)
		return
	}
	l.w = w
}

// ready is the watcher's ready signal (nil without a watcher).
func (l *loop) ready() <-chan struct{} {
	if l.w == nil {
		return nil
	}
	return l.w.Ready()
}

// recovered is the end-of-outage signal while a failed sync waits for its
// retry (nil otherwise).
func (l *loop) recovered() <-chan struct{} {
	if !l.waiting || l.bo.Failures() == 0 || l.env.Recovered == nil {
		return nil
	}
	return l.env.Recovered()
}

// collect adds the watcher's batch to what the next sync looks at; false
// when there was none.
func (l *loop) collect() bool {
	b, ok := l.w.Take()
	if !ok {
		return false
	}
	l.rescan = l.rescan || b.Rescan
	l.pending = append(l.pending, b.Paths...)
	return true
}

// retryIn arms the retry timer: until it fires, batches only accumulate.
func (l *loop) retryIn(d time.Duration) {
	l.waiting = true
	l.retry.Reset(d)
}

// retryNow drops the armed retry: the sync runs now.
func (l *loop) retryNow() {
	l.waiting = false
	l.retry.Stop()
	l.stopProbe()
}

// probeEvery is how often the local directories are probed while a
// failed sync waits for its retry.
const probeEvery = 500 * time.Millisecond

// startProbe arms the first probe after a failed sync.
func (l *loop) startProbe() {
	l.probing = true
	l.probe.Reset(probeEvery)
}

func (l *loop) stopProbe() {
	if l.probing {
		l.probing = false
		l.probe.Stop()
	}
}

// probeDirs probes the directories a sync writes and reports whether the
// sync should be retried now: they work again after a probe saw one
// fail.
func (l *loop) probeDirs() bool {
	l.probing = false
	if !l.waiting {
		return false
	}
	err := l.a.probeDirs()
	switch {
	case err != nil:
		if !l.probeSeen {
			l.a.log.Debug("a directory the sync writes is not writable; probing it until it is", "error", err)
		}
		l.probeSeen = true
		l.probing = true
		l.probe.Reset(probeEvery)
		return false
	case l.probeSeen:
		l.probeSeen = false
		l.a.log.Info("the directories the sync writes are writable again; retrying now")
		l.retryNow()
		return true
	}
	return false // writable all along: the backoff decides
}

// retryDue is the retry timer firing; without a watcher, the sync it
// starts tries to set one up again and looks at the whole brain.
func (l *loop) retryDue() {
	l.waiting = false
	l.stopProbe()
	if l.w == nil {
		l.watch()
		l.rescan = true
	}
}

// rewatch follows a new brain directory (Adopt): its watch followed the
// old one, now set aside. The next sync looks at all of it.
func (l *loop) rewatch() {
	l.watch()
	l.rescan = true
}

// held holds a sync back while snapshot_interval has not passed since the
// last upload: the changes are collected and synced once it has. Held
// changes are unsaved ones (status, the unsaved-age metric).
func (l *loop) held() bool {
	a := l.a
	next := l.uploaded.Add(a.cfg.MinInterval)
	if a.cfg.MinInterval <= 0 || !a.deps.Now().Before(next) {
		return false
	}
	if len(l.pending) > 0 || l.rescan {
		a.markUnsaved(a.deps.Now())
	}
	l.retryIn(next.Sub(a.deps.Now()))
	return true
}

// syncStep syncs what the loop collected, and schedules what follows from
// the outcome: a batch that became ready meanwhile is synced next, at
// once; a failure keeps the changes and retries them with backoff; a
// snapshot arms its refresh. It returns the sync's error (nil for a
// snapshot that gave way to a newer state).
func (l *loop) syncStep(ctx context.Context) error {
	a := l.a
	newer, stopNewer := watchNewer(l.w)
	res, err := a.sync(ctx, syncIn{paths: l.pending, rescan: l.rescan, newer: newer, slots: l.env.Slots})
	more := stopNewer() // the batch that made newer fire is taken below
	switch {
	case errors.Is(err, snapshot.ErrSuperseded):
		// Not a failure: the snapshot gave way, while it waited for its
		// quilt, to the newer state now collected.
		a.log.Debug("snapshot superseded by a newer state of the brain while it waited for its quilt")
		l.takeMore(true)
		return nil
	case err != nil:
		l.takeMore(more)
		if ctx.Err() != nil {
			return err
		}
		a.setLastErr(err.Error())
		// The changed paths are kept: the retry looks at them again.
		l.retryIn(l.bo.Failed("sync failed; will retry", err))
		l.startProbe()
		return err
	}
	l.stopProbe()
	l.probeSeen = false
	l.pending, l.rescan = nil, false
	l.takeMore(more)
	l.bo.Succeeded("sync recovered")
	// Cleared whatever this loop's backoff counted: the failure may be an
	// earlier loop's (the agent dropped and resumed, or handed back).
	a.setLastErr("")
	switch res.Outcome {
	case Restored:
		// The old directory (and its watches) are gone. An edit made
		// after the restore hashed the brain and before the new watch
		// took hold sent no event: look at the whole brain again at once,
		// as at start (an unchanged brain uploads nothing).
		l.watch()
		l.rescan = true
		l.retryIn(0)
	case Snapshotted:
		l.uploaded = a.deps.Now()
	}
	l.armRefresh()
	if l.w == nil {
		// Without a watcher nothing would wake the loop: poll until one
		// can be set up.
		l.retryIn(l.bo.Wait(1))
	}
	return nil
}

// takeMore collects the batch that became ready while a sync ran (more)
// and has it synced at once, unless a retry is armed anyway.
func (l *loop) takeMore(more bool) {
	if !more || l.w == nil {
		return
	}
	l.collect()
	if !l.waiting {
		l.retryIn(0)
	}
}

// final is the last sync of a clean stop (Final): it stores what the
// debounce or snapshot_interval still holds back, looking at the whole
// brain (a batch may be in the debounce), so a machine that goes away
// with the daemon loses nothing written before the stop.
func (l *loop) final(ctx context.Context) error {
	if l.w != nil {
		if b, ok := l.w.Take(); ok {
			l.pending = append(l.pending, b.Paths...)
		}
	}
	_, err := l.a.sync(ctx, syncIn{paths: l.pending, rescan: true, slots: l.env.Slots})
	if err == nil {
		l.pending, l.rescan = nil, false
	}
	return err
}

// armResave arms the retry of a state save that failed (Run owns it).
func (l *loop) armResave() {
	if !l.resaveArmed {
		l.resaveArmed = true
		l.resave.Reset(l.saveBo.Failed("", nil))
	}
}

// resaveState saves the state again; failing again re-arms the timer,
// with a longer wait, through saveFailed.
func (l *loop) resaveState() {
	l.resaveArmed = false
	if l.a.SaveState() == nil {
		l.saveBo.Succeeded("")
	}
}

// armRefresh wakes the loop when the last snapshot nears expiry (its
// v1/v2 blob, or a pack a v3 head needs), so an unchanged brain is stored
// again in time.
func (l *loop) armRefresh() {
	a := l.a
	l.refresh.Stop()
	a.mu.Lock()
	last := a.st.Last
	a.mu.Unlock()
	if last == nil {
		return
	}
	var at time.Time
	if a.cfg.RefreshAfter > 0 {
		at = last.CreatedAt.Add(a.cfg.RefreshAfter)
	}
	if r := a.deps.Pipeline.Renewal(a.deps.Now()); !r.At.IsZero() && (at.IsZero() || r.At.Before(at)) {
		at = r.At
	}
	if at.IsZero() {
		return
	}
	l.refresh.Reset(max(at.Sub(a.deps.Now()), time.Second))
}

// probeDirs checks, with a one-byte file created and removed in each,
// that the directories a sync writes take writes: the agent's state
// directory and the spool.
func (a *Agent) probeDirs() error {
	for _, dir := range []string{a.dir, a.deps.State.SpoolDir()} {
		if err := probeWrite(dir); err != nil {
			return err
		}
	}
	return nil
}

func probeWrite(dir string) error {
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return err
	}
	_, err = f.Write([]byte{0})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if rerr := os.Remove(f.Name()); err == nil {
		err = rerr
	}
	return err
}

// setLastErr records the last sync's failure ("" once one succeeds).
func (a *Agent) setLastErr(e string) {
	a.mu.Lock()
	a.lastErr = e
	a.mu.Unlock()
}
