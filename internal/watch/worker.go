package watch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// work drains the inbox and the alarm until there is nothing left to do,
// then exits; the next event or alarm starts a new one.
func (w *Watcher) work() {
	defer w.wg.Done()
	for {
		w.mu.Lock()
		evs, lost, fired := w.inbox, w.lost, w.fired
		w.inbox, w.lost, w.fired = nil, false, false
		if len(evs) == 0 && !lost && !fired {
			w.running = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		w.step(evs, lost, fired)
	}
}

// step handles one helping of work, then re-arms the alarm.
func (w *Watcher) step(evs []fsnotify.Event, lost, fired bool) {
	now := time.Now()
	changed, rescan := false, false
	if lost && !w.polling.Load() {
		// Events were dropped: besides the rescan, directories created
		// meanwhile were never watched.
		w.log.Debug("filesystem events lost; rescanning", "dir", w.dir)
		w.resync(now)
		changed, rescan = true, true
	}
	for _, ev := range evs {
		if w.polling.Load() {
			break // the poll covers the tree; the events tell nothing more
		}
		c, l := w.handle(ev, now)
		changed = changed || c
		rescan = rescan || (c && l)
	}
	if changed {
		w.note(now, rescan)
	}
	if fired {
		now = time.Now()
		if !w.pollAt.IsZero() && !now.Before(w.pollAt) {
			w.poll(now)
		}
		if !w.first.IsZero() && !now.Before(w.releaseAt) {
			w.flush(now)
		}
	}
	w.rearm()
}

// note records a change seen at now and schedules the debounce: the
// earlier of quiet-after-last and max-lag-after-first.
func (w *Watcher) note(now time.Time, rescan bool) {
	w.rescan = w.rescan || rescan
	if w.first.IsZero() {
		w.first = now
	}
	w.last = now
	w.releaseAt = w.last.Add(w.opts.Quiet)
	if lag := w.first.Add(w.opts.MaxLag); lag.Before(w.releaseAt) {
		w.releaseAt = lag
	}
}

// flush releases the pending changes unless the tree is busy.
func (w *Watcher) flush(now time.Time) {
	if w.opts.Busy != nil && w.opts.Busy() && now.Sub(w.first) < w.opts.MaxLag+w.opts.MaxBusy {
		// A write is in progress; look again after another quiet period
		// rather than snapshot a half-written database.
		w.log.Debug("tree busy; holding snapshot", "dir", w.dir)
		w.releaseAt = now.Add(w.opts.Quiet)
		return
	}
	w.release(w.pending, w.rescan, w.first)
	w.pending = map[string]struct{}{}
	w.rescan = false
	w.first, w.last, w.releaseAt = time.Time{}, time.Time{}, time.Time{}
}

// rearm sets the alarm to the next debounce or poll, or clears it: an idle
// subscription has no deadline at all.
func (w *Watcher) rearm() {
	var due time.Time
	if !w.first.IsZero() {
		due = w.releaseAt
	}
	if !w.pollAt.IsZero() && (due.IsZero() || w.pollAt.Before(due)) {
		due = w.pollAt
	}
	if due.IsZero() {
		w.hub.clock.stop(w.alarm)
	} else {
		w.hub.clock.set(w.alarm, due)
	}
}

// handle records one event. It reports whether anything relevant changed,
// and whether events may have been lost (a new directory that could not be
// watched), which calls for a rescan.
func (w *Watcher) handle(ev fsnotify.Event, now time.Time) (changed, lost bool) {
	name := filepath.Clean(ev.Name)
	if name == w.root {
		// The root itself was removed or renamed: nothing below it can be
		// trusted any more. Poll until it is back.
		if ev.Op == fsnotify.Chmod {
			return false, true
		}
		if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
			w.fallBack(now, nil)
		}
		return true, true
	}
	if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
		// A watched directory left this path: drop its watches (and its
		// subdirectories'), so a renamed tree is watched again under its
		// new name and deleted ones are not remembered.
		w.forget(name)
	}
	rel, ok := w.rel(name)
	if !ok || w.opts.Ignore(rel) {
		return false, false
	}
	if ev.Op == fsnotify.Chmod {
		// Attribute changes (touch, chmod) do not change content; the
		// bundle hash ignores modes and times.
		return false, false
	}
	if ev.Has(fsnotify.Create) {
		if st, err := os.Lstat(name); err == nil && st.IsDir() {
			// Watch the new directory, then report what is already inside:
			// files created before the watch existed sent no events.
			found, err := w.addTree(name)
			switch {
			case err == nil:
			case isLimit(err):
				w.fallBack(now, err)
				return true, true
			default:
				w.warn("cannot watch new directory; will rescan", "dir", name, "error", err)
				lost = true
			}
			for _, p := range found {
				w.pending[p] = struct{}{}
			}
		}
	}
	w.pending[rel] = struct{}{}
	return true, lost
}

// addTree watches dir and every directory below it, and returns the
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
			if _, held := w.held[p]; held {
				return nil
			}
			if err := w.hub.addDir(p, false); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return fmt.Errorf("watch %s: %w", p, err)
			}
			w.held[p] = struct{}{}
			return nil
		}
		if rel, ok := w.rel(p); ok && d.Type().IsRegular() && !w.opts.Ignore(rel) {
			files = append(files, rel)
		}
		return nil
	})
	return files, err
}

// resync watches the tree afresh after lost events: every directory is
// added again (a directory replaced meanwhile has a new inode), and those
// that are gone are released.
func (w *Watcher) resync(now time.Time) {
	old := w.held
	w.held = make(map[string]struct{}, len(old))
	var err error
	w.hub.walk(func() { _, err = w.addTree(w.root) })
	for p := range old {
		w.hub.releaseDir(p)
	}
	switch {
	case err == nil:
	case isLimit(err) || errors.Is(err, fs.ErrNotExist):
		w.fallBack(now, err)
	default:
		w.warn("cannot watch directory tree after lost events; will rescan", "dir", w.dir, "error", err)
	}
}

// forget releases the watches on dir and below, if dir was watched.
func (w *Watcher) forget(dir string) {
	if _, ok := w.held[dir]; !ok {
		return
	}
	under := dirPrefix(dir)
	for p := range w.held {
		if p == dir || strings.HasPrefix(p, under) {
			delete(w.held, p)
			w.hub.releaseDir(p)
		}
	}
}

// releaseAll drops every watch of this subscription.
func (w *Watcher) releaseAll() {
	for p := range w.held {
		w.hub.releaseDir(p)
	}
	clear(w.held)
}

// rel converts an absolute event path into a slash-separated relative one.
func (w *Watcher) rel(p string) (string, bool) {
	if !strings.HasPrefix(p, w.prefix) || len(p) == len(w.prefix) {
		return "", false
	}
	return filepath.ToSlash(p[len(w.prefix):]), true
}

// dirPrefix is dir with exactly one trailing separator.
func dirPrefix(dir string) string {
	if strings.HasSuffix(dir, string(filepath.Separator)) {
		return dir
	}
	return dir + string(filepath.Separator)
}

// warn logs a fallback or watch error, at most once per LogEvery for this
// directory: a directory that keeps failing must not flood the log.
func (w *Watcher) warn(msg string, args ...any) {
	now := time.Now()
	if !w.lastLog.IsZero() && now.Sub(w.lastLog) < w.hub.opts.LogEvery {
		w.log.Debug(msg, args...)
		return
	}
	w.lastLog, w.errLogged = now, true
	w.log.Warn(msg, args...)
}
