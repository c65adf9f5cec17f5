package watch

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// next waits for a batch, failing the test after a deadline.
func next(t *testing.T, w *Watcher) Batch {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		if b, ok := w.Take(); ok {
			return b
		}
		select {
		case <-w.Ready():
		case <-deadline:
			t.Fatal("no batch within 30s")
		}
	}
}

// until takes batches until one contains want, returning the union.
func until(t *testing.T, w *Watcher, want string) Batch {
	t.Helper()
	var all Batch
	for !slices.Contains(all.Paths, want) {
		b := next(t, w)
		all.Paths = append(all.Paths, b.Paths...)
		all.Rescan = all.Rescan || b.Rescan
	}
	return all
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sharedHub, when set, makes newWatcher subscribe on it rather than on
// New's private hub, so the same tests cover both.
var sharedHub *Hub

func newWatcher(t *testing.T, root string, o Options) *Watcher {
	t.Helper()
	if o.Quiet == 0 {
		o.Quiet = 30 * time.Millisecond
	}
	var (
		w   *Watcher
		err error
	)
	if sharedHub != nil {
		w, err = sharedHub.Watch(root, o)
	} else {
		w, err = New(root, o)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func TestCreateWriteRemoveRename(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "skills/a.md"), "a")
	w := newWatcher(t, root, Options{})

	write(t, filepath.Join(root, "system.md"), "hello")
	if b := until(t, w, "system.md"); b.Rescan {
		t.Errorf("unexpected rescan: %+v", b)
	}
	if err := os.Rename(filepath.Join(root, "skills/a.md"), filepath.Join(root, "skills/b.md")); err != nil {
		t.Fatal(err)
	}
	b := until(t, w, "skills/b.md")
	if !slices.Contains(b.Paths, "skills/a.md") {
		t.Errorf("rename source missing: %v", b.Paths)
	}
	if err := os.Remove(filepath.Join(root, "system.md")); err != nil {
		t.Fatal(err)
	}
	until(t, w, "system.md")
}

func TestNewDirectoryIsWatchedAndScanned(t *testing.T) {
	root := t.TempDir()
	w := newWatcher(t, root, Options{})
	// Files created in a burst right after the directory: some land before
	// its watch exists; the scan must report them anyway.
	for _, p := range []string{"patterns/deep/x.md", "patterns/deep/y.md", "patterns/z.md"} {
		write(t, filepath.Join(root, p), p)
	}
	b := until(t, w, "patterns/deep/y.md")
	for _, p := range []string{"patterns/deep/x.md", "patterns/z.md"} {
		if !slices.Contains(b.Paths, p) {
			b = until(t, w, p)
		}
	}
	// The new subdirectory is watched: a later write there is seen.
	write(t, filepath.Join(root, "patterns/deep/later.md"), "later")
	until(t, w, "patterns/deep/later.md")
}

func TestIgnoreAndChmod(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "keep.md"), "k")
	w := newWatcher(t, root, Options{Ignore: func(rel string) bool { return rel == "bundle.lock.json" }})
	write(t, filepath.Join(root, "bundle.lock.json"), "{}")
	if err := os.Chmod(filepath.Join(root, "keep.md"), 0o600); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, "sentinel"), "s")
	b := until(t, w, "sentinel")
	for _, p := range b.Paths {
		if p == "bundle.lock.json" || p == "keep.md" {
			t.Errorf("batch contains %s: %v", p, b.Paths)
		}
	}
}

func TestMaxLagUnderContinuousWrites(t *testing.T) {
	root := t.TempDir()
	w := newWatcher(t, root, Options{Quiet: 200 * time.Millisecond, MaxLag: 300 * time.Millisecond})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
				os.WriteFile(filepath.Join(root, "busy.md"), []byte{byte(i)}, 0o644)
			}
		}
	}()
	// Writes every 20 ms never leave a 200 ms quiet gap; only the maximum
	// lag can release this batch.
	b := next(t, w)
	close(stop)
	<-done
	if lag := time.Since(b.First); lag < 300*time.Millisecond {
		t.Errorf("batch released after %v, before the max lag", lag)
	}
	if !slices.Contains(b.Paths, "busy.md") {
		t.Errorf("paths = %v", b.Paths)
	}
}

func TestBusyHoldsBatch(t *testing.T) {
	root := t.TempDir()
	var busy atomic.Bool
	busy.Store(true)
	var checks atomic.Int32
	w := newWatcher(t, root, Options{Busy: func() bool { checks.Add(1); return busy.Load() }, MaxBusy: time.Hour})
	write(t, filepath.Join(root, "memory.db"), "x")
	// Wait until the watcher has consulted Busy a few times, then check
	// nothing was released.
	deadline := time.Now().Add(30 * time.Second)
	for checks.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatal("Busy never consulted")
		}
		select {
		case <-w.Ready():
			t.Fatal("batch released while busy")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if _, ok := w.Take(); ok {
		t.Fatal("batch released while busy")
	}
	busy.Store(false)
	until(t, w, "memory.db")
}

func TestBatchesCoalesceUntilTaken(t *testing.T) {
	root := t.TempDir()
	w := newWatcher(t, root, Options{})
	write(t, filepath.Join(root, "one.md"), "1")
	<-w.Ready() // released, not taken
	write(t, filepath.Join(root, "two.md"), "2")
	// Wait until the second change has been merged into the same batch.
	deadline := time.Now().Add(30 * time.Second)
	for {
		w.mu.Lock()
		n := len(w.batch.Paths)
		w.mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("second change never merged")
		}
		select {
		case <-w.Ready():
		case <-time.After(5 * time.Millisecond):
		}
	}
	b, ok := w.Take()
	if !ok || !slices.Equal(b.Paths, []string{"one.md", "two.md"}) {
		t.Fatalf("batch = %+v", b)
	}
}

func TestRootRemovedMeansRescan(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "brain")
	write(t, filepath.Join(root, "a.md"), "a")
	w := newWatcher(t, root, Options{})
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	for {
		b := next(t, w)
		if b.Rescan {
			return
		}
		select {
		case <-deadline:
			t.Fatal("no rescan after the root was removed")
		default:
		}
	}
}

func TestNewRejectsMissingRoot(t *testing.T) {
	if _, err := New(filepath.Join(t.TempDir(), "nope"), Options{}); err == nil {
		t.Fatal("New on a missing directory succeeded")
	}
}

// TestSymlinksNotFollowed: a symlink to a directory outside the brain,
// there before the watch or made during it, is reported as the path of
// the link itself and never watched through: writes in the directory it
// names are no change of the brain (the hasher and the snapshot never
// follow one either).
func TestSymlinksNotFollowed(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "before")); err != nil {
		t.Fatal(err)
	}
	w := newWatcher(t, root, Options{})
	if err := os.Symlink(outside, filepath.Join(root, "during")); err != nil {
		t.Fatal(err)
	}
	b := until(t, w, "during")
	write(t, filepath.Join(outside, "x"), "outside the brain")
	write(t, filepath.Join(outside, "sub", "y"), "deeper outside")
	write(t, filepath.Join(root, "sentinel"), "s")
	b.Paths = append(b.Paths, until(t, w, "sentinel").Paths...)
	for _, p := range b.Paths {
		if strings.HasPrefix(p, "before/") || strings.HasPrefix(p, "during/") {
			t.Errorf("a write outside the brain reported through a symlink: %q", p)
		}
	}
}
