package watch

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/hermesd/hermesd/internal/wait"
)

// The watcher tests again, each subscription on one hub shared with
// bystander roots.
func TestSharedHubSemantics(t *testing.T) {
	h := newHub(t, HubOptions{})
	for range 20 {
		watchOn(t, h, t.TempDir(), Options{})
	}
	sharedHub = h
	t.Cleanup(func() { sharedHub = nil })
	for _, tc := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"CreateWriteRemoveRename", TestCreateWriteRemoveRename},
		{"NewDirectoryIsWatchedAndScanned", TestNewDirectoryIsWatchedAndScanned},
		{"IgnoreAndChmod", TestIgnoreAndChmod},
		{"MaxLagUnderContinuousWrites", TestMaxLagUnderContinuousWrites},
		{"BusyHoldsBatch", TestBusyHoldsBatch},
		{"BatchesCoalesceUntilTaken", TestBatchesCoalesceUntilTaken},
		{"RootRemovedMeansRescan", TestRootRemovedMeansRescan},
	} {
		t.Run(tc.name, tc.f)
	}
	if n := h.Stats().Roots; n != 20 {
		t.Errorf("roots after the subtests closed theirs = %d, want the 20 bystanders", n)
	}
}

// A thousand roots on one instance: a change reaches its root only, and
// the idle hub has no timer, no worker and no log line.
func TestHubThousandRoots(t *testing.T) {
	const n = 1000
	base := t.TempDir()
	roots := make([]string, n+1)
	for i := range n {
		roots[i] = filepath.Join(base, fmt.Sprintf("brain%04d", i))
	}
	const target = 537
	// A sibling whose name extends the target's: a string-prefix router
	// would hand it the target's events.
	roots[n] = roots[target] + "x"
	for _, r := range roots {
		write(t, filepath.Join(r, "skills", "a.md"), "a")
	}

	fdsBefore := inotifyFDs(t)
	goroutinesBefore := runtime.NumGoroutine()
	logs := &sink{}
	h := newHub(t, HubOptions{Logger: slog.New(logs)})
	ws := make([]*Watcher, len(roots))
	for i, r := range roots {
		ws[i] = watchOn(t, h, r, Options{Logger: slog.New(logs)})
	}
	if got := inotifyFDs(t); got != fdsBefore+1 {
		t.Fatalf("inotify instances: %d before, %d with %d roots; want one more", fdsBefore, got, len(roots))
	}
	want := Stats{Roots: n + 1, Watches: 2 * (n + 1), Instances: 1}
	if st := h.Stats(); st != want {
		t.Fatalf("stats = %+v, want %+v", st, want)
	}

	write(t, filepath.Join(roots[target], "skills", "new.md"), "new")
	if b := until(t, ws[target], "skills/new.md"); b.Rescan {
		t.Errorf("unexpected rescan: %+v", b)
	}
	for i, w := range ws {
		if i == target {
			continue
		}
		if k := w.events.Load(); k != 0 {
			t.Errorf("root %s got %d events of another root", roots[i], k)
		}
		if _, ok := w.Take(); ok {
			t.Errorf("root %s has a batch", roots[i])
		}
	}

	// Idle: every worker gone, no alarm armed (so nothing can wake the
	// hub), a constant number of goroutines, not one log line.
	wait.For(t, "idle workers", func() bool {
		for _, w := range ws {
			if !idle(w) {
				return false
			}
		}
		return true
	})
	if k := h.clock.armed(); k != 0 {
		t.Errorf("%d alarms armed while idle", k)
	}
	// Router, clock, fsnotify's reader.
	wait.For(t, "three hub goroutines", func() bool { return runtime.NumGoroutine() <= goroutinesBefore+3 })
	if k := logs.count(); k != 0 {
		t.Errorf("%d log lines, want none: %q", k, logs.lines(slog.LevelDebug, ""))
	}

	for _, w := range ws {
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if st := h.Stats(); st != (Stats{Instances: 1}) {
		t.Errorf("stats after closing every root = %+v", st)
	}
}

// Events go to the subscriptions whose root is the path or a parent of it,
// by path element, not by string prefix.
func TestRouting(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := newHub(t, HubOptions{})
	names := []string{"brain", "brain2", "brain/inner", "x"}
	ws := map[string]*Watcher{}
	for _, n := range names {
		p := filepath.Join(base, n)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range names {
		ws[n] = watchOn(t, h, filepath.Join(base, n), Options{Quiet: time.Hour})
	}
	tests := []struct {
		name string
		op   fsnotify.Op
		want []string
	}{
		{"brain/a.md", fsnotify.Write, []string{"brain"}},
		{"brain2/a.md", fsnotify.Write, []string{"brain2"}},
		{"brain/inner/x/y.md", fsnotify.Create, []string{"brain", "brain/inner"}},
		{"brain", fsnotify.Remove, []string{"brain"}},
		{"brainx", fsnotify.Create, nil},
		{"x/y/z", fsnotify.Rename, []string{"x"}},
		{"", fsnotify.Write, nil},
		{"brain/a.md", fsnotify.Chmod, nil}, // attribute changes are dropped at the router
	}
	for _, tc := range tests {
		t.Run(tc.name+"/"+tc.op.String(), func(t *testing.T) {
			before := map[string]int64{}
			for n, w := range ws {
				before[n] = w.events.Load()
			}
			h.dispatch(fsnotify.Event{Name: filepath.Join(base, filepath.FromSlash(tc.name)), Op: tc.op})
			var got []string
			for _, n := range names {
				if ws[n].events.Load() != before[n] {
					got = append(got, n)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("delivered to %q, want %q", got, tc.want)
			}
		})
	}
}

// ENOSPC from inotify_add_watch: one message naming the sysctl, the tree
// is polled, a change is reported as a rescan, and once room is back the
// tree is watched again.
func TestWatchLimitPollsAndRecovers(t *testing.T) {
	var full atomic.Bool
	logs := &sink{}
	h := newHub(t, HubOptions{
		Logger:       slog.New(logs),
		PollInterval: 20 * time.Millisecond,
		LogEvery:     time.Hour,
		racy:         -1,
		addWatch: func(fsw *fsnotify.Watcher, dir string) error {
			if full.Load() {
				return fmt.Errorf("%w", syscall.ENOSPC)
			}
			return fsw.Add(dir)
		},
	})
	a := watchOn(t, h, t.TempDir(), Options{Logger: slog.New(logs)})
	full.Store(true)
	rootB, rootC := t.TempDir(), t.TempDir()
	write(t, filepath.Join(rootB, "sub", "b.md"), "b")
	b := watchOn(t, h, rootB, Options{Logger: slog.New(logs)})
	c := watchOn(t, h, rootC, Options{Logger: slog.New(logs)})
	if a.Polling() || !b.Polling() || !c.Polling() {
		t.Fatalf("polling: a %v b %v c %v, want false true true", a.Polling(), b.Polling(), c.Polling())
	}
	if st := h.Stats(); st != (Stats{Roots: 3, Polled: 2, Watches: 1, Instances: 1}) {
		t.Errorf("stats = %+v", st)
	}
	msgs := logs.lines(slog.LevelInfo, "")
	if len(msgs) != 1 {
		t.Fatalf("log lines = %q, want exactly one", msgs)
	}
	for _, s := range []string{"inotify watch limit reached", "sysctl=fs.inotify.max_user_watches",
		fmt.Sprintf("value=%v", sysctlValue(readSysctl(sysctlWatches))), "sudo sysctl -w fs.inotify.max_user_watches=", "every 20ms"} {
		if !strings.Contains(msgs[0], s) {
			t.Errorf("limit message %q lacks %q", msgs[0], s)
		}
	}

	// Idle polls report nothing.
	start := b.polls.Load()
	wait.For(t, "three polls", func() bool { return b.polls.Load() >= start+3 })
	if batch, ok := b.Take(); ok {
		t.Fatalf("idle polled tree released %+v", batch)
	}
	// A change is found by the next poll.
	write(t, filepath.Join(rootB, "sub", "b.md"), "changed")
	nextRescan(t, b)

	// Room again: closing a frees its watch, so the polled trees fit.
	full.Store(false)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "b and c watched again", func() bool { return !b.Polling() && !c.Polling() })
	if st := h.Stats(); st != (Stats{Roots: 2, Watches: 3, Instances: 1}) {
		t.Errorf("stats after recovery = %+v", st)
	}
	write(t, filepath.Join(rootB, "sub", "later.md"), "later")
	until(t, b, "sub/later.md")
	if got := logs.lines(slog.LevelInfo, "watching directory again"); len(got) != 2 {
		t.Errorf("recovery lines = %q, want one per tree", got)
	}
	if got := logs.lines(slog.LevelWarn, ""); len(got) != 1 {
		t.Errorf("warnings = %q, want only the limit message", got)
	}
}

// The hub's own watch budget: a tree that does not fit is polled, and a
// watched tree that outgrows it falls back with a rescan.
func TestWatchBudget(t *testing.T) {
	logs := &sink{}
	h := newHub(t, HubOptions{Logger: slog.New(logs), MaxWatches: 3, PollInterval: 20 * time.Millisecond, racy: -1})
	rootA, rootB := t.TempDir(), t.TempDir()
	write(t, filepath.Join(rootA, "one", "x.md"), "x")
	write(t, filepath.Join(rootB, "one", "x.md"), "x")
	a := watchOn(t, h, rootA, Options{})
	b := watchOn(t, h, rootB, Options{})
	if a.Polling() || !b.Polling() {
		t.Fatalf("polling: a %v b %v, want false true", a.Polling(), b.Polling())
	}
	if st := h.Stats(); st.Watches != 2 {
		t.Errorf("watches = %d, want a's 2 (b's partial watch released)", st.Watches)
	}
	write(t, filepath.Join(rootA, "two", "y.md"), "y") // third watch: fits
	until(t, a, "two/y.md")
	write(t, filepath.Join(rootA, "three", "z.md"), "z") // fourth: does not
	nextRescan(t, a)
	if !a.Polling() {
		t.Fatal("a still watched beyond the budget")
	}
	msgs := logs.lines(slog.LevelWarn, "")
	if len(msgs) != 1 || !strings.Contains(msgs[0], "max_watches=3") {
		t.Errorf("warnings = %q, want one naming max_watches=3", msgs)
	}
	// Shrink a back into the budget: the poll sees the change, then a
	// later poll finds room and watches it again.
	if err := os.RemoveAll(filepath.Join(rootA, "three")); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	nextRescan(t, a)
	wait.For(t, "a watched again", func() bool { return !a.Polling() })
	// A poll may still have a rescan on its way (a removal it saw half
	// done): let it go first, or it would absorb the path below.
	wait.For(t, "a settled", func() bool { return settled(a) })
	write(t, filepath.Join(rootA, "one", "later.md"), "later")
	until(t, a, "one/later.md")
}

// inotify_init failing (max_user_instances): one message naming the
// sysctl, every tree polled, and the instance retried until it works.
func TestNoInstanceFallsBack(t *testing.T) {
	var fail atomic.Bool
	fail.Store(true)
	logs := &sink{}
	fdsBefore := inotifyFDs(t)
	h := newHub(t, HubOptions{
		Logger:       slog.New(logs),
		PollInterval: 20 * time.Millisecond,
		LogEvery:     time.Hour,
		racy:         -1,
		newFS: func() (*fsnotify.Watcher, error) {
			if fail.Load() {
				return nil, fmt.Errorf("couldn't initialize inotify: %w", syscall.EMFILE)
			}
			return fsnotify.NewBufferedWatcher(16)
		},
	})
	if st := h.Stats(); st.Instances != 0 {
		t.Fatalf("stats = %+v, want no instance", st)
	}
	msgs := logs.lines(slog.LevelWarn, "")
	if len(msgs) != 1 {
		t.Fatalf("warnings = %q, want one", msgs)
	}
	for _, s := range []string{"cannot create an inotify instance", "sysctl=fs.inotify.max_user_instances",
		"sudo sysctl -w fs.inotify.max_user_instances=", "open_files_limit="} {
		if !strings.Contains(msgs[0], s) {
			t.Errorf("message %q lacks %q", msgs[0], s)
		}
	}
	root := t.TempDir()
	w := watchOn(t, h, root, Options{Logger: slog.New(logs)})
	if !w.Polling() {
		t.Fatal("tree watched without an instance")
	}
	write(t, filepath.Join(root, "a.md"), "a")
	nextRescan(t, w)

	fail.Store(false)
	wait.For(t, "the tree watched", func() bool { return !w.Polling() })
	if got := inotifyFDs(t); got != fdsBefore+1 {
		t.Errorf("inotify instances = %d, want %d", got, fdsBefore+1)
	}
	write(t, filepath.Join(root, "b.md"), "b")
	until(t, w, "b.md")
	if got := logs.lines(slog.LevelWarn, ""); len(got) != 1 {
		t.Errorf("warnings = %q, want only the first", got)
	}
	if got := logs.lines(slog.LevelInfo, "inotify instance created"); len(got) != 1 {
		t.Errorf("instance recovery lines = %q, want one", got)
	}
}

// A fallback error is logged once per LogEvery per tree, whatever the
// number of polls, and its recovery once.
func TestFallbackErrorsAreRateLimited(t *testing.T) {
	var fail, deny atomic.Bool
	fail.Store(true)
	deny.Store(true)
	logs := &sink{}
	h := newHub(t, HubOptions{
		Logger:       slog.New(logs),
		PollInterval: 10 * time.Millisecond,
		LogEvery:     time.Hour,
		racy:         -1,
		newFS: func() (*fsnotify.Watcher, error) {
			if fail.Load() {
				return nil, errors.New("no inotify here")
			}
			return fsnotify.NewBufferedWatcher(16)
		},
		addWatch: func(fsw *fsnotify.Watcher, dir string) error {
			if deny.Load() {
				return fmt.Errorf("%w", os.ErrPermission)
			}
			return fsw.Add(dir)
		},
	})
	w := watchOn(t, h, t.TempDir(), Options{Logger: slog.New(logs)})
	fail.Store(false)
	wait.For(t, "an instance", func() bool { return h.Stats().Instances == 1 })
	start := w.polls.Load()
	wait.For(t, "ten polls", func() bool { return w.polls.Load() >= start+10 })
	if got := logs.lines(slog.LevelWarn, "cannot watch directory"); len(got) != 1 {
		t.Errorf("error lines over 10 polls = %q, want one", got)
	}
	deny.Store(false)
	wait.For(t, "the tree watched", func() bool { return !w.Polling() })
	if got := logs.lines(slog.LevelInfo, "watching directory again"); len(got) != 1 {
		t.Errorf("recovery lines = %q, want one", got)
	}
}

// A root that vanishes is polled, and watched again when it is back.
func TestRootGoneThenBack(t *testing.T) {
	h := newHub(t, HubOptions{PollInterval: 20 * time.Millisecond, racy: -1})
	root := filepath.Join(t.TempDir(), "brain")
	write(t, filepath.Join(root, "sub", "a.md"), "a")
	w := watchOn(t, h, root, Options{})
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	nextRescan(t, w)
	wait.For(t, "polling", w.Polling)
	if st := h.Stats(); st.Watches != 0 {
		t.Errorf("watches of a vanished tree = %d", st.Watches)
	}
	write(t, filepath.Join(root, "sub", "b.md"), "b")
	nextRescan(t, w)
	wait.For(t, "watched again", func() bool { return !w.Polling() })
	write(t, filepath.Join(root, "sub", "c.md"), "c")
	until(t, w, "sub/c.md")
}

// An event queue overflow makes every root rescan and re-walk: a directory
// whose creation event was lost is watched afterwards.
func TestOverflowRescansEveryRoot(t *testing.T) {
	logs := &sink{}
	h := newHub(t, HubOptions{Logger: slog.New(logs), LogEvery: time.Hour})
	var ws []*Watcher
	var roots []string
	for range 3 {
		r, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		roots = append(roots, r)
		ws = append(ws, watchOn(t, h, r, Options{}))
	}
	// Lose the watch of a new directory, as an overflow would.
	sub := filepath.Join(roots[0], "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	until(t, ws[0], "sub")
	wait.For(t, "idle worker", func() bool { return idle(ws[0]) })
	ws[0].mu.Lock() // no worker can start while held
	delete(ws[0].held, sub)
	h.releaseDir(sub)
	ws[0].mu.Unlock()

	for range 2 {
		h.lostAll(fsnotify.ErrEventOverflow)
		for _, w := range ws {
			nextRescan(t, w)
		}
	}
	if got := logs.lines(slog.LevelWarn, "overflowed"); len(got) != 1 || !strings.Contains(got[0], "sysctl=fs.inotify.max_queued_events") {
		t.Errorf("overflow lines = %q, want one naming the sysctl", got)
	}
	write(t, filepath.Join(sub, "x.md"), "x")
	until(t, ws[0], "sub/x.md")
}

// Events beyond a subscription's inbox bound are dropped and turn the
// batch into a rescan.
func TestInboxOverflowMeansRescan(t *testing.T) {
	h := newHub(t, HubOptions{})
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	unblock := make(chan struct{})
	blocked := make(chan struct{})
	var once sync.Once
	w := watchOn(t, h, root, Options{Ignore: func(rel string) bool {
		if rel == "block" {
			once.Do(func() {
				close(blocked)
				<-unblock
			})
		}
		return false
	}})
	write(t, filepath.Join(root, "block"), "b")
	<-blocked
	for i := range maxInbox + 10 {
		w.deliver(fsnotify.Event{Name: filepath.Join(root, fmt.Sprintf("f%d", i)), Op: fsnotify.Write})
	}
	w.mu.Lock()
	lost, queued := w.lost, len(w.inbox)
	w.mu.Unlock()
	close(unblock)
	if !lost || queued != maxInbox {
		t.Fatalf("lost %v, queued %d; want true, %d", lost, queued, maxInbox)
	}
	nextRescan(t, w)
}

// A renamed directory is watched under its new name and its old watches
// are released; removed directories leave nothing behind.
func TestDirectoryRenameAndRemove(t *testing.T) {
	h := newHub(t, HubOptions{})
	root := t.TempDir()
	write(t, filepath.Join(root, "a", "b", "x.md"), "x")
	w := watchOn(t, h, root, Options{})
	if err := os.Rename(filepath.Join(root, "a"), filepath.Join(root, "c")); err != nil {
		t.Fatal(err)
	}
	until(t, w, "c")
	write(t, filepath.Join(root, "c", "b", "y.md"), "y")
	b := until(t, w, "c/b/y.md")
	if slices.Contains(b.Paths, "a/b/y.md") {
		t.Errorf("a write under the new name reported under the old one: %v", b.Paths)
	}
	wait.For(t, "three watches: root, c, c/b", func() bool { return h.Stats().Watches == 3 })

	for i := range 20 {
		if err := os.MkdirAll(filepath.Join(root, "tmp", fmt.Sprint(i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	until(t, w, "tmp")
	if err := os.RemoveAll(filepath.Join(root, "tmp")); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the removed tree's watches released", func() bool { return h.Stats().Watches == 3 })
}

// Close unsubscribes: the root's watches go, its events stop; a closed hub
// refuses new roots and releases its instance.
func TestCloseUnsubscribes(t *testing.T) {
	fdsBefore := inotifyFDs(t)
	h, err := NewHub(HubOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rootA, rootB := t.TempDir(), t.TempDir()
	write(t, filepath.Join(rootA, "sub", "a.md"), "a")
	a := watchOn(t, h, rootA, Options{})
	b := watchOn(t, h, rootB, Options{})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if st := h.Stats(); st != (Stats{Roots: 1, Watches: 1, Instances: 1}) {
		t.Errorf("stats = %+v", st)
	}
	// The kernel queue is ordered: once b's event is through, a's would
	// have been too.
	write(t, filepath.Join(rootA, "sub", "late.md"), "late")
	write(t, filepath.Join(rootB, "b.md"), "b")
	until(t, b, "b.md")
	if k := a.events.Load(); k != 0 {
		t.Errorf("closed root got %d events", k)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Watch(rootB, Options{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Watch on a closed hub: %v, want ErrClosed", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("closing a root of a closed hub: %v", err)
	}
	if got := inotifyFDs(t); got != fdsBefore {
		t.Errorf("inotify instances after Close = %d, want %d", got, fdsBefore)
	}
}

// A racy digest (times too recent to trust) reports the next poll as a
// change even when nothing moved.
func TestRacyPollForcesRescan(t *testing.T) {
	h := newHub(t, HubOptions{PollInterval: 10 * time.Millisecond, racy: time.Hour,
		newFS: func() (*fsnotify.Watcher, error) { return nil, errors.New("no inotify here") }})
	root := t.TempDir()
	write(t, filepath.Join(root, "a.md"), "a")
	w := watchOn(t, h, root, Options{})
	nextRescan(t, w)
}

func TestNewHubRejectsNegativeOptions(t *testing.T) {
	for _, o := range []HubOptions{{PollInterval: -1}, {MaxWatches: -1}, {LogEvery: -1}} {
		if _, err := NewHub(o); err == nil {
			t.Errorf("NewHub(%+v) succeeded", o)
		}
	}
}

func TestParseSysctl(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"8192\n", 8192, true},
		{"128", 128, true},
		{" 65536 \n", 65536, true},
		{"", 0, false},
		{"\n", 0, false},
		{"-1\n", 0, false},
		{"12ab\n", 0, false},
		{"99999999999999999999\n", 0, false},
		{"9223372036854775807\n", 9223372036854775807, true},
	}
	for _, tc := range tests {
		got, ok := parseSysctl([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseSysctl(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParent(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/a/b/c", "/a/b"},
		{"/a", "/"},
		{"/", ""},
		{"a/b", "a"},
		{"a", ""},
		{"", ""},
	}
	for _, tc := range tests {
		if got := parent(tc.in); got != tc.want {
			t.Errorf("parent(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Two subscriptions on one root share its watches: both see a change, and
// closing one leaves the other watching.
func TestSameRootTwice(t *testing.T) {
	h := newHub(t, HubOptions{})
	root := t.TempDir()
	write(t, filepath.Join(root, "sub", "a.md"), "a")
	first := watchOn(t, h, root, Options{})
	second := watchOn(t, h, root, Options{})
	if st := h.Stats(); st.Watches != 2 {
		t.Errorf("watches = %d, want 2 shared", st.Watches)
	}
	write(t, filepath.Join(root, "sub", "b.md"), "b")
	until(t, first, "sub/b.md")
	until(t, second, "sub/b.md")
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, "sub", "c.md"), "c")
	until(t, second, "sub/c.md")
}
