// Package watch turns filesystem events under a brain directory into
// debounced batches of changed paths.
//
// fsnotify is not recursive, so every directory gets its own watch, and a
// directory that appears is watched and then scanned (files created before
// its watch was in place would otherwise be missed). Events are coalesced
// until the tree has been quiet for a while, or until the oldest pending
// change has waited the maximum lag. An event queue overflow turns the
// batch into a full rescan. Batches that are not taken yet merge, so changes
// made while a snapshot runs become exactly one more batch.
package watch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
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
	// that could not be added): the consumer must re-examine the whole tree.
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

// Watcher watches a directory tree. Create it with New, read Ready and Take
// batches, and Close it when done.
type Watcher struct {
	root string
	opts Options
	log  *slog.Logger
	fsw  *fsnotify.Watcher

	cancel context.CancelFunc
	wg     sync.WaitGroup
	ready  chan struct{} // capacity 1: a batch is waiting in taken

	mu    sync.Mutex
	batch *Batch // released, not yet taken
}

// New starts watching root, which must exist.
func New(root string, opts Options) (*Watcher, error) {
	if opts.Quiet <= 0 {
		opts.Quiet = 500 * time.Millisecond
	}
	if opts.MaxLag <= 0 {
		opts.MaxLag = 10 * opts.Quiet
	}
	if opts.MaxLag < opts.Quiet {
		opts.MaxLag = opts.Quiet
	}
	if opts.MaxBusy <= 0 {
		opts.MaxBusy = 5 * opts.MaxLag
	}
	if opts.Ignore == nil {
		opts.Ignore = func(string) bool { return false }
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", root, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("watch %s: not a directory", root)
	}
	fsw, err := fsnotify.NewBufferedWatcher(1024)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", root, err)
	}
	w := &Watcher{
		root:   filepath.Clean(root),
		opts:   opts,
		log:    log,
		fsw:    fsw,
		cancel: func() {},
		ready:  make(chan struct{}, 1),
	}
	if _, err := w.addTree(w.root); err != nil {
		fsw.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.run(ctx)
	}()
	return w, nil
}

// Close stops watching. Batches not yet taken are discarded.
func (w *Watcher) Close() error {
	w.cancel()
	err := w.fsw.Close()
	w.wg.Wait()
	return err
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

// run is the single goroutine that owns the pending set and the timers.
func (w *Watcher) run(ctx context.Context) {
	pending := map[string]struct{}{}
	rescan := false
	var first, last time.Time

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	arm := func(now time.Time) {
		// Fire at the earlier of quiet-after-last and max-lag-after-first.
		due := last.Add(w.opts.Quiet)
		if lag := first.Add(w.opts.MaxLag); lag.Before(due) {
			due = lag
		}
		timer.Reset(max(due.Sub(now), 0))
	}

	for {
		select {
		case <-ctx.Done():
			timer.Stop()
			return

		case ev, ok := <-w.fsw.Events:
			if !ok {
				return
			}
			now := time.Now()
			changed, lost := w.handle(ev, pending)
			if !changed {
				continue
			}
			rescan = rescan || lost
			if first.IsZero() {
				first = now
			}
			last = now
			arm(now)

		case err, ok := <-w.fsw.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				w.log.Warn("filesystem event queue overflowed; rescanning", "dir", w.root)
			} else {
				w.log.Warn("filesystem watch error; rescanning", "dir", w.root, "error", err)
			}
			now := time.Now()
			rescan = true
			if first.IsZero() {
				first = now
			}
			last = now
			arm(now)

		case now := <-timer.C:
			if first.IsZero() {
				continue
			}
			if w.opts.Busy != nil && w.opts.Busy() && now.Sub(first) < w.opts.MaxLag+w.opts.MaxBusy {
				// A write is in progress; look again after another quiet
				// period rather than snapshot a half-written database.
				w.log.Debug("tree busy; holding snapshot", "dir", w.root)
				timer.Reset(w.opts.Quiet)
				continue
			}
			w.release(pending, rescan, first)
			pending = map[string]struct{}{}
			rescan = false
			first, last = time.Time{}, time.Time{}
		}
	}
}

// handle records one event. It reports whether anything relevant changed,
// and whether events may have been lost (a new directory that could not be
// watched), which calls for a rescan.
func (w *Watcher) handle(ev fsnotify.Event, pending map[string]struct{}) (changed, lost bool) {
	if filepath.Clean(ev.Name) == w.root {
		// The root itself was removed or renamed: nothing below it can be
		// trusted any more.
		return ev.Op != fsnotify.Chmod, true
	}
	rel, ok := w.rel(ev.Name)
	if !ok || w.opts.Ignore(rel) {
		return false, false
	}
	if ev.Op == fsnotify.Chmod {
		// Attribute changes (touch, chmod) do not change content; the
		// bundle hash ignores modes and times.
		return false, false
	}
	if ev.Has(fsnotify.Create) {
		if st, err := os.Lstat(ev.Name); err == nil && st.IsDir() {
			// Watch the new directory, then report what is already inside:
			// files created before the watch existed sent no events.
			found, err := w.addTree(ev.Name)
			if err != nil {
				w.log.Warn("cannot watch new directory; will rescan", "dir", ev.Name, "error", err)
				lost = true
			}
			for _, p := range found {
				pending[p] = struct{}{}
			}
		}
	}
	pending[rel] = struct{}{}
	return true, lost
}

// addTree adds a watch to dir and every directory below it, and returns the
// relative paths of the regular files it found.
func (w *Watcher) addTree(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while we walked
			}
			return err
		}
		if d.IsDir() {
			if err := w.fsw.Add(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("watch %s: %w", p, err)
			}
			return nil
		}
		if rel, ok := w.rel(p); ok && d.Type().IsRegular() && !w.opts.Ignore(rel) {
			files = append(files, rel)
		}
		return nil
	})
	return files, err
}

// rel converts an absolute event path into a slash-separated relative one.
func (w *Watcher) rel(p string) (string, bool) {
	r, err := filepath.Rel(w.root, p)
	if err != nil || r == "." || r == ".." || strings.HasPrefix(r, "../") {
		return "", false
	}
	return filepath.ToSlash(r), true
}
