package watch

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// sink is a slog handler that keeps every record, for counting log lines.
type sink struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (s *sink) Enabled(context.Context, slog.Level) bool { return true }
func (s *sink) Handle(_ context.Context, r slog.Record) error {
	s.mu.Lock()
	s.recs = append(s.recs, r.Clone())
	s.mu.Unlock()
	return nil
}
func (s *sink) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s *sink) WithGroup(string) slog.Handler      { return s }

// lines returns the records at level or above whose message contains msg,
// each rendered as "message key=value ...".
func (s *sink) lines(level slog.Level, msg string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.recs {
		if r.Level < level || !strings.Contains(r.Message, msg) {
			continue
		}
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
			return true
		})
		out = append(out, b.String())
	}
	return out
}

func (s *sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.recs)
}

func newHub(t *testing.T, o HubOptions) *Hub {
	t.Helper()
	h, err := NewHub(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("hub close: %v", err)
		}
	})
	return h
}

func watchOn(t *testing.T, h *Hub, root string, o Options) *Watcher {
	t.Helper()
	if o.Quiet == 0 {
		o.Quiet = 30 * time.Millisecond
	}
	w, err := h.Watch(root, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// nextRescan takes batches until one asks for a rescan.
func nextRescan(t *testing.T, w *Watcher) Batch {
	t.Helper()
	for {
		if b := next(t, w); b.Rescan {
			return b
		}
	}
}

// settled takes every released batch of w and reports whether no worker
// runs and no change waits for its debounce: what happens next starts a
// batch of its own (a pending Rescan would absorb its paths).
func settled(w *Watcher) bool {
	for {
		if _, ok := w.Take(); !ok {
			break
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.running && w.first.IsZero() // first: the worker's, which cannot start meanwhile
}

// idle reports whether no worker runs for w.
func idle(w *Watcher) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.running
}

// inotifyFDs counts this process's inotify instances.
func inotifyFDs(t *testing.T) int {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("counts inotify instances in /proc/self/fd")
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && l == "anon_inode:inotify" {
			n++
		}
	}
	return n
}
