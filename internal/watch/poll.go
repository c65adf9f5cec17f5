package watch

import (
	"errors"
	"io/fs"
	"os"
	"time"
)

// fallBack switches the subscription to polling. Its watches are released
// (a partly watched tree would report some changes and miss others), and
// the tree is digested as the baseline of the next poll. cause is the limit
// that was hit; nil or a not-exist error means the root vanished.
func (w *Watcher) fallBack(now time.Time, cause error) {
	w.releaseAll()
	w.gone = cause == nil || errors.Is(cause, fs.ErrNotExist)
	reason := "directory gone"
	if isLimit(cause) {
		w.hub.noteLimit(cause) // once per hub: the operator's message
		reason = cause.Error()
	}
	if !w.polling.Swap(true) {
		w.hub.polled.Add(1)
		w.pollSince = now
		w.log.Debug("polling directory instead of watching it", "dir", w.dir,
			"every", w.hub.opts.PollInterval, "reason", reason)
	}
	w.digest(now)
	w.pollAt = now.Add(w.hub.firstPoll())
}

// poll is one periodic look at a directory that is not watched: watch it
// again if room is likely, else report a rescan if its digest moved.
func (w *Watcher) poll(now time.Time) {
	w.polls.Add(1)
	w.pollAt = now.Add(w.hub.nextPoll())
	if w.tryWatch(now) {
		return
	}
	if w.digest(now) {
		w.note(now, true)
	}
}

// tryWatch watches the whole tree again and leaves polling, or releases
// what it added and reports false.
func (w *Watcher) tryWatch(now time.Time) bool {
	if w.gone {
		if st, err := os.Stat(w.root); err != nil || !st.IsDir() {
			return false
		}
	}
	if !w.hub.roomFor(w.need, now) {
		return false
	}
	var err error
	w.hub.walk(func() { _, err = w.addTree(w.root) })
	if err != nil {
		w.releaseAll()
		switch {
		case isLimit(err):
			w.gone = false
			w.hub.noteLimit(err)
		case errors.Is(err, fs.ErrNotExist):
			w.gone = true
		default:
			w.warn("cannot watch directory; still rescanning it periodically", "dir", w.dir, "error", err)
		}
		return false
	}
	w.pollAt, w.gone = time.Time{}, false
	w.hub.clearFull()
	// Changes between the last poll and the watches taking hold sent no
	// events: the digest tells.
	if w.digest(now) {
		w.note(now, true)
	}
	if w.errLogged || w.lastLog.IsZero() || now.Sub(w.lastLog) >= w.hub.opts.LogEvery {
		w.log.Info("watching directory again", "dir", w.dir, "polled_for", now.Sub(w.pollSince).Round(time.Second))
		w.lastLog, w.errLogged = now, false
	}
	// Last: whoever sees Polling() turn false sees everything above.
	w.hub.polled.Add(-1)
	w.polling.Store(false)
	return true
}

// digest fingerprints the tree and reports whether it moved since the
// last digest (or the last one was racy).
func (w *Watcher) digest(now time.Time) bool {
	var (
		sc  scan
		err error
	)
	w.hub.walk(func() { sc, err = fingerprint(w.root, w.opts.Ignore, w.hub.seed, now, w.hub.opts.racy) })
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		w.warn("cannot rescan directory", "dir", w.dir, "error", err)
	}
	changed := sc.sum != w.sum || w.force
	w.sum, w.force = sc.sum, sc.racy
	if sc.dirs > 0 {
		w.need = sc.dirs
	}
	return changed
}
