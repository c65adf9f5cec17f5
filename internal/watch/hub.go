package watch

import (
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// ErrClosed is returned by Watch on a closed hub.
var ErrClosed = errors.New("watch hub closed")

// HubOptions configure a Hub.
type HubOptions struct {
	// Logger receives the hub's own messages: a limit reached (once per
	// kind), an event queue overflow (rate-limited). Nil discards them.
	Logger *slog.Logger
	// PollInterval is how often a directory that cannot be watched is
	// rescanned; every wait is jittered by ±20%. Zero means 30 s.
	PollInterval time.Duration
	// MaxWatches caps the inotify watches (one per directory) the hub
	// holds, leaving the rest of the user's fs.inotify.max_user_watches to
	// other programs. Zero means no cap of our own.
	MaxWatches int
	// LogEvery is the least time between two error lines about the same
	// polled directory, and between two overflow lines. Zero means 5 min.
	LogEvery time.Duration

	// Test hooks: how the inotify instance is made and a watch is added,
	// and how recent a time must be to be racy (negative: never).
	newFS    func() (*fsnotify.Watcher, error)
	addWatch func(fsw *fsnotify.Watcher, dir string) error
	racy     time.Duration
}

// eventBuffer is the fsnotify channel's capacity, on top of the kernel's
// own queue (fs.inotify.max_queued_events, per instance).
const eventBuffer = 4096

// probeEvery is, in poll intervals, how often one polled directory tries
// to watch again although nothing suggests room (another program may have
// released watches).
const probeEvery = 10

// Hub is the process's one inotify instance, shared by any number of
// subscriptions. Create it with NewHub, subscribe with Watch, Close it
// after every subscription.
type Hub struct {
	opts  HubOptions
	log   *slog.Logger
	seed  maphash.Seed
	clock *clock
	retry *alarm        // re-creates the instance after inotify_init failed
	walks chan struct{} // bounds whole-tree walks running at once

	routeMu sync.RWMutex
	roots   map[string][]*Watcher // root → its subscriptions
	closed  bool

	dirMu      sync.Mutex
	fsw        *fsnotify.Watcher // nil while no instance could be made
	dirs       map[string]int    // watched directory → subscriptions holding it
	closing    bool              // Close drops the instance: no single removals
	full       int               // watches held when the kernel last said ENOSPC; 0: none known
	fullSysctl int64             // max_user_watches then
	fullAt     time.Time         // then, or the last probe

	polled      atomic.Int64
	lostLogAt   atomic.Int64 // unix nanoseconds of the last overflow line
	limitLogged [numLimits]atomic.Bool
	closeOnce   sync.Once
	closeErr    error
	wg          sync.WaitGroup // the router
}

// Stats describe a hub.
type Stats struct {
	Roots     int // subscriptions
	Polled    int // subscriptions in the periodic-rescan fallback
	Watches   int // inotify watches held, one per directory
	Instances int // inotify instances: 1, or 0 while none could be made
}

// NewHub starts a hub. If no inotify instance can be made (EMFILE at
// fs.inotify.max_user_instances, or no open file left) it says so once and
// runs anyway: every subscription polls, and the hub retries the instance
// every poll interval.
func NewHub(opts HubOptions) (*Hub, error) {
	if opts.PollInterval < 0 || opts.MaxWatches < 0 || opts.LogEvery < 0 {
		return nil, errors.New("watch hub: negative option")
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = 30 * time.Second
	}
	if opts.LogEvery == 0 {
		opts.LogEvery = 5 * time.Minute
	}
	if opts.racy == 0 {
		opts.racy = 2 * time.Second // coarser than any filesystem's timestamps
	}
	if opts.newFS == nil {
		opts.newFS = func() (*fsnotify.Watcher, error) { return fsnotify.NewBufferedWatcher(eventBuffer) }
	}
	if opts.addWatch == nil {
		opts.addWatch = (*fsnotify.Watcher).Add
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Hub{
		opts:  opts,
		log:   log,
		seed:  maphash.MakeSeed(),
		clock: newClock(),
		walks: make(chan struct{}, max(2, runtime.GOMAXPROCS(0))),
		roots: map[string][]*Watcher{},
		dirs:  map[string]int{},
	}
	h.retry = newAlarm(h.retryInstance)
	fsw, err := opts.newFS()
	if err != nil {
		h.noteLimit(&limitError{kind: limitInstances, err: err})
		h.clock.set(h.retry, time.Now().Add(h.nextPoll()))
		return h, nil
	}
	h.fsw = fsw
	h.wg.Add(1)
	go h.route(fsw)
	return h, nil
}

func newAlarm(fire func()) *alarm { return &alarm{idx: -1, fire: fire} }

// Watch subscribes to the tree at root, which must be a directory. Every
// directory below it is watched; if a limit stops that, the tree is polled
// instead (see the package doc) and Watch still succeeds.
func (h *Hub) Watch(root string, opts Options) (*Watcher, error) {
	opts = opts.withDefaults()
	st, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", root, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("watch %s: not a directory", root)
	}
	canon, err := filepath.Abs(root)
	if err == nil {
		// Events name the paths we watched: one spelling per directory.
		canon, err = filepath.EvalSymlinks(canon)
	}
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", root, err)
	}
	w := &Watcher{
		hub:     h,
		root:    canon,
		prefix:  dirPrefix(canon),
		dir:     filepath.Clean(root),
		opts:    opts,
		log:     opts.Logger,
		ready:   make(chan struct{}, 1),
		held:    map[string]struct{}{},
		pending: map[string]struct{}{},
		running: true, // setup owns the state: events queue meanwhile
	}
	w.alarm = newAlarm(w.wake)
	w.wg.Add(1)
	if !h.subscribe(w) {
		return nil, fmt.Errorf("watch %s: %w", root, ErrClosed)
	}
	err = w.setup()
	w.mu.Lock()
	w.running = false
	closed := w.closed
	if !closed && (len(w.inbox) > 0 || w.lost || w.fired) {
		w.startLocked()
	}
	w.mu.Unlock()
	w.wg.Done()
	switch {
	case err != nil:
		w.stop()
		return nil, err
	case closed:
		return nil, fmt.Errorf("watch %s: %w", root, ErrClosed)
	}
	return w, nil
}

// setup watches the tree, or starts polling it.
func (w *Watcher) setup() error {
	now := time.Now()
	var err error
	w.hub.walk(func() { _, err = w.addTree(w.root) })
	switch {
	case err == nil:
		return nil
	case isLimit(err):
		w.fallBack(now, err)
		w.rearm()
		return nil
	default:
		w.releaseAll()
		return err
	}
}

// Close ends every subscription still open and releases the instance.
func (h *Hub) Close() error {
	h.closeOnce.Do(func() {
		h.routeMu.Lock()
		h.closed = true
		var ws []*Watcher
		for _, l := range h.roots {
			ws = append(ws, l...)
		}
		h.routeMu.Unlock()
		h.dirMu.Lock()
		h.closing = true // closing the instance drops every watch at once
		h.dirMu.Unlock()
		for _, w := range ws {
			w.stop()
		}
		h.clock.close() // no retry can make a new instance after this
		h.dirMu.Lock()
		fsw := h.fsw
		h.fsw = nil
		clear(h.dirs)
		h.dirMu.Unlock()
		if fsw != nil {
			h.closeErr = fsw.Close()
		}
		h.wg.Wait()
	})
	return h.closeErr
}

// Stats reports the hub's current numbers.
func (h *Hub) Stats() Stats {
	var s Stats
	h.routeMu.RLock()
	for _, l := range h.roots {
		s.Roots += len(l)
	}
	h.routeMu.RUnlock()
	h.dirMu.Lock()
	s.Watches = len(h.dirs)
	if h.fsw != nil {
		s.Instances = 1
	}
	h.dirMu.Unlock()
	s.Polled = int(h.polled.Load())
	return s
}

func (h *Hub) subscribe(w *Watcher) bool {
	h.routeMu.Lock()
	defer h.routeMu.Unlock()
	if h.closed {
		return false
	}
	h.roots[w.root] = append(h.roots[w.root], w)
	return true
}

func (h *Hub) unsubscribe(w *Watcher) {
	h.routeMu.Lock()
	defer h.routeMu.Unlock()
	l := slices.DeleteFunc(h.roots[w.root], func(x *Watcher) bool { return x == w })
	if len(l) == 0 {
		delete(h.roots, w.root)
	} else {
		h.roots[w.root] = l
	}
}

// route is the one goroutine reading the instance.
func (h *Hub) route(fsw *fsnotify.Watcher) {
	defer h.wg.Done()
	events, errs := fsw.Events, fsw.Errors
	for events != nil {
		select {
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			h.dispatch(ev)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			h.lostAll(err)
		}
	}
}

// dispatch hands an event to the subscriptions whose root is the event's
// path or one of its parents: one map probe per path element.
func (h *Hub) dispatch(ev fsnotify.Event) {
	if ev.Op == fsnotify.Chmod {
		return // attribute changes never change content (see handle)
	}
	h.routeMu.RLock()
	h.lookup(ev.Name, func(w *Watcher) { w.deliver(ev) })
	h.routeMu.RUnlock()
}

// lookup calls f for each subscription whose root is name or one of its
// parents. The caller holds routeMu.
func (h *Hub) lookup(name string, f func(*Watcher)) {
	for p := name; p != ""; p = parent(p) {
		for _, w := range h.roots[p] {
			f(w)
		}
	}
}

// parent is p without its last element; "" above the top.
func parent(p string) string {
	i := strings.LastIndexByte(p, filepath.Separator)
	switch {
	case i < 0:
		return ""
	case i == 0 && len(p) > 1:
		return p[:1]
	case i == 0:
		return ""
	}
	return p[:i]
}

// lostAll makes every subscription rescan: the event queue belongs to the
// instance, so an overflow may have lost events of any directory.
func (h *Hub) lostAll(err error) {
	now := time.Now()
	if last := h.lostLogAt.Load(); last == 0 || now.Sub(time.Unix(0, last)) >= h.opts.LogEvery {
		h.lostLogAt.Store(now.UnixNano())
		msg, args := "filesystem watch error; every watched directory rescans", []any{"error", err}
		if errors.Is(err, fsnotify.ErrEventOverflow) {
			msg = "filesystem event queue overflowed; every watched directory rescans"
			args = append(args, "sysctl", "fs.inotify.max_queued_events", "value", sysctlValue(readSysctl(sysctlQueue)))
		}
		h.log.Warn(msg, append(args, "roots", h.Stats().Roots)...)
	}
	h.routeMu.RLock()
	for _, l := range h.roots {
		for _, w := range l {
			w.lose()
		}
	}
	h.routeMu.RUnlock()
}

// addDir adds a watch on dir for one more subscription, or refreshes it
// (held: the caller already counts as a holder).
func (h *Hub) addDir(dir string, held bool) error {
	h.dirMu.Lock()
	defer h.dirMu.Unlock()
	if h.closing {
		return ErrClosed
	}
	if h.fsw == nil {
		return &limitError{kind: limitInstances, err: errors.New("no inotify instance")}
	}
	n := h.dirs[dir]
	if !held && n == 0 && h.opts.MaxWatches > 0 && len(h.dirs) >= h.opts.MaxWatches {
		return &limitError{kind: limitBudget, err: fmt.Errorf("watch budget of %d directories used up", h.opts.MaxWatches)}
	}
	if err := h.opts.addWatch(h.fsw, dir); err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			h.full, h.fullAt = len(h.dirs), time.Now()
			h.fullSysctl = readSysctl(sysctlWatches)
			return &limitError{kind: limitWatches, err: fmt.Errorf("inotify_add_watch: %w", err)}
		}
		return err
	}
	if !held {
		h.dirs[dir] = n + 1
	}
	return nil
}

// releaseDir drops one subscription's hold on dir; the last one removes
// the watch.
func (h *Hub) releaseDir(dir string) {
	h.dirMu.Lock()
	defer h.dirMu.Unlock()
	n, ok := h.dirs[dir]
	if !ok {
		return
	}
	if n > 1 {
		h.dirs[dir] = n - 1
		return
	}
	delete(h.dirs, dir)
	if h.fsw != nil && !h.closing {
		// The kernel drops the watch of a deleted directory itself; then
		// this fails, harmlessly.
		if err := h.fsw.Remove(dir); err != nil && !errors.Is(err, fsnotify.ErrNonExistentWatch) {
			h.log.Debug("remove watch", "dir", dir, "error", err)
		}
	}
}

// roomFor reports whether a polled tree of need directories is likely to
// fit now, so that polled trees do not all grab and release watches every
// poll while the kernel limit holds.
func (h *Hub) roomFor(need int, now time.Time) bool {
	h.dirMu.Lock()
	full := h.full
	h.dirMu.Unlock()
	cur := int64(-1)
	if full > 0 {
		cur = readSysctl(sysctlWatches)
	}
	h.dirMu.Lock()
	defer h.dirMu.Unlock()
	if h.fsw == nil || h.closing {
		return false
	}
	n := len(h.dirs)
	if m := h.opts.MaxWatches; m > 0 && n+need > m {
		return false
	}
	switch {
	case h.full == 0:
		return true
	case cur > h.fullSysctl: // raised since
		h.full = 0
		return true
	case n+need <= h.full: // released since
		return true
	case now.Sub(h.fullAt) >= probeEvery*h.opts.PollInterval:
		h.fullAt = now // one probe per period, whoever polls first
		return true
	}
	return false
}

// clearFull forgets the kernel limit after a tree could be watched again.
func (h *Hub) clearFull() {
	h.dirMu.Lock()
	h.full = 0
	h.dirMu.Unlock()
}

// retryInstance runs on the clock after inotify_init failed.
func (h *Hub) retryInstance() {
	fsw, err := h.opts.newFS()
	if err != nil {
		h.clock.set(h.retry, time.Now().Add(h.nextPoll()))
		return
	}
	h.dirMu.Lock()
	if h.closing {
		h.dirMu.Unlock()
		fsw.Close()
		return
	}
	h.fsw = fsw
	h.dirMu.Unlock()
	h.wg.Add(1)
	go h.route(fsw)
	// Polled subscriptions watch again at their next poll.
	h.log.Info("inotify instance created; polled directories are watched again at their next poll")
}

// walk runs a whole-tree walk, a few at a time: after an overflow every
// subscription re-walks, and a thousand at once would only thrash.
func (h *Hub) walk(f func()) {
	h.walks <- struct{}{}
	defer func() { <-h.walks }()
	f()
}

// nextPoll is the poll interval ±20%, so polled trees spread out.
func (h *Hub) nextPoll() time.Duration {
	i := h.opts.PollInterval
	return i*4/5 + rand.N(i*2/5+1)
}

// firstPoll spreads the first polls of trees that fell back together over
// a whole interval.
func (h *Hub) firstPoll() time.Duration {
	i := h.opts.PollInterval
	return i/2 + rand.N(i+1)
}
