package watch

import (
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Batch is a set of changes ready to be processed.
type Batch struct {
	// Paths are slash-separated paths relative to the root that changed
	// (created, written, removed or renamed). A directory path stands for
	// everything under it.
	Paths []string
	// Rescan means the event stream lost events (queue overflow, a watch
	// that could not be added, a polled directory that changed): the
	// consumer must re-examine the whole tree.
	Rescan bool
	// First is when the oldest change in the batch was seen.
	First time.Time
}

// Options configure a Watcher.
type Options struct {
	// Quiet is how long the tree must see no events before a batch is
	// released.
	Quiet time.Duration
	// MaxLag releases a batch once its oldest change is this old, even if
	// events keep coming. Zero means 10 × Quiet.
	MaxLag time.Duration
	// Ignore reports paths (relative, slash-separated) whose events are
	// dropped, e.g. files hermesd writes itself.
	Ignore func(rel string) bool
	// Busy reports whether the tree is in the middle of a multi-file write
	// (e.g. a SQLite hot journal exists). While it returns true a batch is
	// held back, up to MaxBusy past its maximum lag.
	Busy    func() bool
	MaxBusy time.Duration
	// Logger receives debug and warning messages; nil discards them.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Quiet <= 0 {
		o.Quiet = 500 * time.Millisecond
	}
	if o.MaxLag <= 0 {
		o.MaxLag = 10 * o.Quiet
	}
	if o.MaxLag < o.Quiet {
		o.MaxLag = o.Quiet
	}
	if o.MaxBusy <= 0 {
		o.MaxBusy = 5 * o.MaxLag
	}
	if o.Ignore == nil {
		o.Ignore = func(string) bool { return false }
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// maxInbox bounds the events queued for one subscription whose worker is
// behind (a slow Busy or Ignore); beyond it events are dropped and the
// batch becomes a rescan.
const maxInbox = 4096

// Watcher is one subscription: a directory tree watched through a Hub.
// Read Ready and Take batches, and Close it when done.
type Watcher struct {
	hub    *Hub
	own    bool   // hub is New's private one
	root   string // absolute, symlinks resolved: the routing key
	prefix string // root with a trailing separator
	dir    string // as the caller named it, for log lines
	opts   Options
	log    *slog.Logger
	ready  chan struct{} // capacity 1: a batch is waiting in batch
	alarm  *alarm

	polling atomic.Bool  // in the periodic-rescan fallback
	polls   atomic.Int64 // fallback polls done
	events  atomic.Int64 // events routed here

	stopOnce, closeOnce sync.Once
	closeErr            error

	mu      sync.Mutex
	batch   *Batch // released, not yet taken
	inbox   []fsnotify.Event
	lost    bool // events were dropped on the way here
	fired   bool // the alarm went off
	running bool // a worker (or Watch) owns the state below
	closed  bool
	wg      sync.WaitGroup

	// Owned by whoever has running set: one worker goroutine at a time,
	// handed over under mu.
	held      map[string]struct{} // directories this subscription watches
	pending   map[string]struct{}
	rescan    bool
	first     time.Time // oldest pending change; zero when none
	last      time.Time
	releaseAt time.Time // when the debounce looks at pending again
	gone      bool      // polling because the root vanished
	pollAt    time.Time // next fallback poll; zero when watching
	pollSince time.Time
	need      int    // directories in the tree at the last look
	sum       uint64 // fallback digest of the tree
	force     bool   // the last digest saw racy times: report the next poll
	lastLog   time.Time
	errLogged bool
}

// New starts watching root, which must exist, on a hub of its own (one
// inotify instance). Processes that watch many directories share one Hub.
func New(root string, opts Options) (*Watcher, error) {
	h, err := NewHub(HubOptions{Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	w, err := h.Watch(root, opts)
	if err != nil {
		h.Close()
		return nil, err
	}
	w.own = true
	return w, nil
}

// Close stops watching. Batches not yet taken are discarded.
func (w *Watcher) Close() error {
	w.closeOnce.Do(func() {
		w.stop()
		if w.own {
			w.closeErr = w.hub.Close()
		}
	})
	return w.closeErr
}

// Ready is signalled when a batch can be taken.
func (w *Watcher) Ready() <-chan struct{} { return w.ready }

// Take returns the released batch and clears it; ok is false when there is
// none.
func (w *Watcher) Take() (b Batch, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.batch == nil {
		return Batch{}, false
	}
	b, w.batch = *w.batch, nil
	return b, true
}

// Polling reports whether the tree is rescanned periodically instead of
// watched (a limit was reached, or the root vanished).
func (w *Watcher) Polling() bool { return w.polling.Load() }

// release merges pending changes into the batch waiting to be taken.
func (w *Watcher) release(paths map[string]struct{}, rescan bool, first time.Time) {
	w.mu.Lock()
	if w.batch == nil {
		w.batch = &Batch{First: first}
	}
	b := w.batch
	if first.Before(b.First) {
		b.First = first
	}
	b.Rescan = b.Rescan || rescan
	if b.Rescan {
		b.Paths = nil
	} else {
		have := make(map[string]struct{}, len(b.Paths))
		for _, p := range b.Paths {
			have[p] = struct{}{}
		}
		for p := range paths {
			if _, dup := have[p]; !dup {
				b.Paths = append(b.Paths, p)
			}
		}
		sort.Strings(b.Paths)
	}
	w.mu.Unlock()
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

// deliver queues one routed event. It runs on the hub's router and must
// stay cheap: the work happens on the subscription's worker.
func (w *Watcher) deliver(ev fsnotify.Event) {
	w.events.Add(1)
	w.mu.Lock()
	if !w.closed {
		if len(w.inbox) < maxInbox {
			w.inbox = append(w.inbox, ev)
		} else {
			w.lost = true
		}
		w.startLocked()
	}
	w.mu.Unlock()
}

// lose records that events for this tree were lost.
func (w *Watcher) lose() {
	w.mu.Lock()
	if !w.closed {
		w.lost = true
		w.inbox = nil
		w.startLocked()
	}
	w.mu.Unlock()
}

// wake is the alarm's fire: the debounce or the poll is due.
func (w *Watcher) wake() {
	w.mu.Lock()
	if !w.closed {
		w.fired = true
		w.startLocked()
	}
	w.mu.Unlock()
}

// startLocked starts a worker unless one runs. Workers exist only while
// there is work, so idle subscriptions cost no goroutine.
func (w *Watcher) startLocked() {
	if w.running {
		return
	}
	w.running = true
	w.wg.Add(1)
	go w.work()
}

// stop unsubscribes: no more events, no worker, watches released.
func (w *Watcher) stop() {
	w.stopOnce.Do(func() {
		w.hub.unsubscribe(w)
		w.mu.Lock()
		w.closed = true
		w.inbox = nil
		w.mu.Unlock()
		w.wg.Wait() // the worker, or Watch's setup
		w.hub.clock.stop(w.alarm)
		w.releaseAll()
		if w.polling.Load() {
			w.hub.polled.Add(-1)
		}
	})
}
