package daemon

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/state"
	"github.com/hermesd/hermesd/internal/wait"
)

// world is a devnet plus helpers to run daemons on it.
type world struct {
	t  *testing.T
	dn *devnet.Devnet
}

func newWorld(t *testing.T, agents ...devnet.Agent) *world {
	t.Helper()
	return newWorldWith(t, devnet.Options{}, agents...)
}

// newWorldWith is newWorld with more devnet options (the directory,
// timings and HTTP address are always the test's).
// testShards is the test devnets' Walrus shard count: blob ids at a
// hundredth of mainnet's 1000-shard cost (what depends on the count is
// tested in internal/redstuff).
const testShards = 100

func newWorldWith(t *testing.T, o devnet.Options, agents ...devnet.Agent) *world {
	t.Helper()
	o.Dir, o.Agents, o.HTTPListen = t.TempDir(), agents, "127.0.0.1:0"
	o.Quiet, o.MaxLag = 100*time.Millisecond, time.Second
	if o.Shards == 0 {
		o.Shards = testShards
	}
	dn, err := devnet.Start(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dn.Close() })
	return &world{t: t, dn: dn}
}

func (w *world) brain(id string) string {
	a, err := w.dn.Config.Agent(id)
	if err != nil {
		w.t.Fatal(err)
	}
	return a.BrainDir
}

// testLogger logs at debug level: to stderr with -v, otherwise into a
// bounded buffer whose tail is printed if the test fails, so that a
// failure seen once under load explains itself.
func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	tl := &tailLog{max: 64 << 10}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log (last %d KiB):\n%s", tl.max>>10, tl.String())
		}
	})
	return slog.New(slog.NewTextHandler(tl, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// tailLog keeps the last max bytes written to it.
type tailLog struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (l *tailLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if over := len(l.b) - l.max; over > 0 {
		l.b = append(l.b[:0], l.b[over:]...)
	}
	return len(p), nil
}

func (l *tailLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

// start runs a daemon on the devnet's configuration.
func (w *world) start() *Daemon {
	w.t.Helper()
	log := testLogger(w.t)
	d, err := New(w.t.Context(), w.dn.Config, log, compose.Options{})
	if err != nil {
		w.t.Fatal(err)
	}
	d.Start(context.Background())
	w.t.Cleanup(func() { closeAtCleanup(d) })
	return d
}

// closeAtCleanup closes a daemon a test may have left with pointers
// pending (it failed, or it stopped the chain): the shutdown flush gives
// up after a while instead of hanging the test binary until its timeout,
// which would hide the failure that got it there.
func closeAtCleanup(d *Daemon) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d.Close(ctx)
}

func stop(t *testing.T, d *Daemon) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// stores counts the blobs the devnet's Walrus stored, after waiting for
// the server to finish recording the requests its clients already saw
// answered.
func stores(t *testing.T, w *world) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := w.dn.Walrus.Quiesce(ctx); err != nil {
		t.Fatalf("walrus quiesce: %v", err)
	}
	return w.dn.Walrus.Stats().ByRoute[localwalrus.RoutePublisher][http.StatusOK]
}

func writeFile(t *testing.T, p, content string, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func seedBrain(t *testing.T, dir string) {
	writeFile(t, filepath.Join(dir, "system.md"), "You are a test agent.\n", 0o644)
	writeFile(t, filepath.Join(dir, "skills/reentrancy.md"), "---\nname: reentrancy\n---\nLook for re-entrant calls.\n", 0o600)
	writeFile(t, filepath.Join(dir, "patterns/p1.md"), "pattern one\n", 0o640)
	writeFile(t, filepath.Join(dir, "memory.db"), strings.Repeat("sqlite page\x00", 5000), 0o644)
	writeFile(t, filepath.Join(dir, ".hidden"), "dotfile\n", 0o644)
}

// published waits until the agent's pointer names its last snapshot and
// returns that blob id.
func published(t *testing.T, d *Daemon, id string) string {
	t.Helper()
	a, _ := d.Agent(id)
	var blob string
	wait.For(t, id+" published", func() bool {
		s := a.Status()
		if s.Last == nil || s.Pending != nil || s.Published != s.Last.BlobID {
			return false
		}
		blob = s.Last.BlobID
		return true
	})
	return blob
}

func readPointer(t *testing.T, w *world, name string) string {
	t.Helper()
	c, err := ens.New(t.Context(), ens.Config{RPCURL: w.dn.Chain.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v, err := c.Read(t.Context(), name)
	if err != nil && !errors.Is(err, ens.ErrNoPointer) {
		t.Fatal(err)
	}
	return v
}

type fileInfo struct {
	content string
	mode    fs.FileMode
}

// tree records every regular file under dir except the two files hermesd
// rewrites.
func tree(t *testing.T, dir string) map[string]fileInfo {
	t.Helper()
	out := map[string]fileInfo{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == bundlelock.FileName || rel == "receipts.ndjson" {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = fileInfo{string(b), info.Mode().Perm()}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSnapshotPublishRestore(t *testing.T) {
	t.Parallel()
	alphaToken, betaToken := uint64(1), uint64(2)
	w := newWorld(t,
		devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth", TokenID: &alphaToken},
		devnet.Agent{ID: "beta", ENSName: "beta.hermes.eth", TokenID: &betaToken},
	)
	seedBrain(t, w.brain("alpha"))
	seedBrain(t, w.brain("beta"))
	writeFile(t, filepath.Join(w.brain("beta"), "system.md"), "I am beta.\n", 0o644)

	d := w.start()
	first := published(t, d, "alpha")
	published(t, d, "beta")
	if got := readPointer(t, w, "alpha.hermes.eth"); got != first {
		t.Fatalf("pointer = %q, want %q", got, first)
	}
	if resp, err := http.Get("http://" + d.Addr() + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("readyz: %v %v", resp, err)
	}

	t.Run("edit publishes a new snapshot", func(t *testing.T) {
		start := time.Now()
		writeFile(t, filepath.Join(w.brain("alpha"), "skills/new.md"), "a new skill\n", 0o644)
		var blob string
		wait.For(t, "pointer to move", func() bool {
			blob = readPointer(t, w, "alpha.hermes.eth")
			return blob != first
		})
		t.Logf("change-to-pointer latency %v (quiet period 100ms)", time.Since(start).Round(time.Millisecond))
		res, err := hash.Dir(t.Context(), w.brain("alpha"), hash.Options{})
		if err != nil {
			t.Fatal(err)
		}
		lock, err := bundlelock.Read(filepath.Join(w.brain("alpha"), bundlelock.FileName))
		if err != nil {
			t.Fatal(err)
		}
		if lock.BundleHash() != res.Digest.String() || lock.Version() != 2 {
			t.Errorf("lock hash %s v%d, tree hashes to %s", lock.BundleHash(), lock.Version(), res.Digest)
		}
		wait.For(t, "lock to name the blob", func() bool {
			l, err := bundlelock.Read(filepath.Join(w.brain("alpha"), bundlelock.FileName))
			return err == nil && l.BlobID() == blob
		})
		first = blob
	})

	t.Run("touch without change uploads nothing", func(t *testing.T) {
		a, _ := d.Agent("alpha")
		puts := stores(t, w)
		unchanged := d.metrics.snapshots.get("alpha", "unchanged")
		p := filepath.Join(w.brain("alpha"), "system.md")
		b, _ := os.ReadFile(p)
		now := time.Now()
		os.Chtimes(p, now, now)
		writeFile(t, p, string(b), 0o644) // same bytes, new mtime
		wait.For(t, "an unchanged sync", func() bool {
			return d.metrics.snapshots.get("alpha", "unchanged") > unchanged
		})
		if got := stores(t, w); got != puts {
			t.Errorf("uploads went from %d to %d", puts, got)
		}
		if s := a.Status(); s.Pending != nil || s.Last.BlobID != first {
			t.Errorf("status changed: %+v", s)
		}
	})

	receiptsBefore := func() int { a, _ := d.Agent("alpha"); return a.Receipts().Len() }()
	if receiptsBefore == 0 {
		t.Fatal("no transition receipts were recorded")
	}
	before := tree(t, w.brain("alpha"))
	stop(t, d)

	t.Run("amnesia: brain and state wiped, restart restores", func(t *testing.T) {
		if err := os.RemoveAll(w.brain("alpha")); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(state.AgentPath(w.dn.Config.StateDir, "alpha")); err != nil {
			t.Fatal(err)
		}
		puts := stores(t, w)
		d := w.start()
		wait.For(t, "alpha ready", func() bool { a, _ := d.Agent("alpha"); return a.Ready() })
		a, _ := d.Agent("alpha")
		if s := a.Status(); s.StartedAs != "restored" {
			t.Fatalf("started as %q: %+v", s.StartedAs, s)
		}
		after := tree(t, w.brain("alpha"))
		if len(after) != len(before) {
			t.Fatalf("restored %d files, had %d", len(after), len(before))
		}
		for p, fi := range before {
			if after[p] != fi {
				t.Errorf("%s: restored %v, want %v", p, after[p].mode, fi.mode)
			}
		}
		res, _ := hash.Dir(t.Context(), w.brain("alpha"), hash.Options{})
		// A machine that restored does not know when the head pack
		// expires, so the agent may renew the head at once (a re-pack of
		// the same bundle, which it publishes); it does nothing else.
		// Wait until what the lock names is published and in the state.
		var lock *bundlelock.Lock
		wait.For(t, "alpha settled", func() bool {
			l, err := bundlelock.Read(filepath.Join(w.brain("alpha"), bundlelock.FileName))
			s := a.Status()
			if err != nil || s.Pending != nil || s.Last == nil || s.Published != l.BlobID() || s.Last.BlobID != l.BlobID() {
				return false
			}
			lock = l
			return true
		})
		if lock.BundleHash() != res.Digest.String() || a.Status().Last.BundleHash != res.Digest.String() {
			t.Fatalf("re-hash %s vs lock %v and state %+v", res.Digest, lock, a.Status().Last)
		}
		if lock.BlobID() != first {
			t.Logf("the restored head %s was renewed as %s (same bundle hash)", first, lock.BlobID())
		}
		if got := stores(t, w) - puts; got > 1 {
			t.Errorf("%d blobs uploaded after the restore; at most the renewed head may be", got)
		}
		if got := a.Receipts().Len(); got != receiptsBefore {
			t.Errorf("receipts re-imported: %d, want %d", got, receiptsBefore)
		}
		stop(t, d)
	})
}

func TestSecondDaemonRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t, devnet.Agent{ID: "solo"})
	seedBrain(t, w.brain("solo"))
	w.start()
	_, err := New(t.Context(), w.dn.Config, nil, compose.Options{})
	if !errors.Is(err, state.ErrLocked) {
		t.Fatalf("second daemon: %v, want ErrLocked", err)
	}
}

func TestFailedAgentDoesNotStopOthers(t *testing.T) {
	t.Parallel()
	w := newWorld(t,
		devnet.Agent{ID: "good", ENSName: "good.hermes.eth"},
		devnet.Agent{ID: "broken", ENSName: "broken.hermes.eth"},
	)
	seedBrain(t, w.brain("good"))
	// broken's pointer names a blob that does not exist.
	c, err := ens.New(t.Context(), ens.Config{RPCURL: w.dn.Chain.URL(), Signer: ens.NewSigner(w.dn.SignerKey)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(t.Context(), "broken.hermes.eth", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", ""); err != nil {
		t.Fatal(err)
	}
	d := w.start()
	published(t, d, "good")
	b, _ := d.Agent("broken")
	wait.For(t, "broken to fail", func() bool { return b.Status().Phase == agent.PhaseFailed })
	if _, err := os.Stat(w.brain("broken")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("broken's brain directory was touched: %v", err)
	}
	resp, err := http.Get("http://" + d.Addr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("readyz = %d, want 503", resp.StatusCode)
	}
	if !strings.Contains(b.Status().Reason, "404") {
		t.Errorf("reason = %q", b.Status().Reason)
	}
}

// TestWalrusPublisherOutageKeepsChangesSafe: while the Walrus publisher
// answers 503, a change is not lost and not published (the brain, the last
// verified snapshot and the pointer stay as they were, the staleness is
// visible); when Walrus answers again the change is snapshotted and
// published without waiting for the sync's backoff (the prober notices).
func TestWalrusPublisherOutageKeepsChangesSafe(t *testing.T) {
	t.Parallel()
	w := newWorld(t, devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth"})
	seedBrain(t, w.brain("alpha"))
	d := w.start()
	first := published(t, d, "alpha")

	w.dn.Walrus.SetFaults(localwalrus.Faults{Rate: 1, Target: localwalrus.RoutePublisher,
		Kinds: []localwalrus.Fault{{Kind: localwalrus.FaultStatus, Status: 503}}})
	writeFile(t, filepath.Join(w.brain("alpha"), "skills/during-outage.md"), "x\n", 0o644)
	a, _ := d.Agent("alpha")
	wait.For(t, "the sync to fail", a.Failing)
	if s := a.Status(); s.Last.BlobID != first || s.UnsavedSince.IsZero() {
		t.Errorf("during the outage: %+v", s)
	}
	if n, err := testutil.GatherAndCount(d.metrics.reg, "hermesd_unsaved_change_age_seconds"); err != nil || n != 1 {
		t.Errorf("unsaved age series: %d, %v", n, err)
	}
	if resp, err := http.Get("http://" + d.Addr() + "/readyz"); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("readyz during the outage: %v %v", resp, err)
	}
	if _, err := os.Stat(filepath.Join(w.brain("alpha"), "skills/during-outage.md")); err != nil {
		t.Errorf("local file gone: %v", err)
	}
	if got := readPointer(t, w, "alpha.hermes.eth"); got != first {
		t.Errorf("pointer moved during the outage to %q", got)
	}

	w.dn.Walrus.SetFaults(localwalrus.Faults{})
	wait.For(t, "the pending change to publish", func() bool {
		s := a.Status()
		return s.Last.BlobID != first && s.Published == s.Last.BlobID && s.Pending == nil
	})
	if got := readPointer(t, w, "alpha.hermes.eth"); got == first || got != a.Status().Last.BlobID {
		t.Errorf("pointer after recovery: %s", got)
	}
}

func TestBrainWipedWhileRunningComesBack(t *testing.T) {
	t.Parallel()
	w := newWorld(t, devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth"})
	seedBrain(t, w.brain("alpha"))
	d := w.start()
	blob := published(t, d, "alpha")
	before := tree(t, w.brain("alpha"))
	stored := stores(t, w)

	if err := os.RemoveAll(w.brain("alpha")); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the brain to be restored", func() bool {
		_, err := os.Stat(filepath.Join(w.brain("alpha"), "system.md"))
		return err == nil
	})
	a, _ := d.Agent("alpha")
	wait.For(t, "alpha ready again", a.Ready)
	after := tree(t, w.brain("alpha"))
	if len(after) != len(before) {
		t.Fatalf("restored %d files, had %d", len(after), len(before))
	}
	for p, fi := range before {
		if after[p] != fi {
			t.Errorf("%s differs after the restore", p)
		}
	}
	// An empty brain was never snapshotted over the real one.
	if got := readPointer(t, w, "alpha.hermes.eth"); got != blob {
		t.Errorf("pointer moved to %q", got)
	}
	if got := stores(t, w); got != stored {
		t.Errorf("uploads during the wipe: %d -> %d", stored, got)
	}
	// And the watcher follows the new directory.
	writeFile(t, filepath.Join(w.brain("alpha"), "skills/after.md"), "after\n", 0o644)
	wait.For(t, "a snapshot of the restored brain", func() bool { return readPointer(t, w, "alpha.hermes.eth") != blob })
}

func TestSeedFillsOnlyWhatIsMissing(t *testing.T) {
	t.Parallel()
	seed := t.TempDir()
	writeFile(t, filepath.Join(seed, "system.md"), "seed system\n", 0o644)
	writeFile(t, filepath.Join(seed, "skills/seeded.md"), "seeded\n", 0o600)
	w := newWorld(t, devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth", SeedDir: seed})
	d := w.start()
	blob := published(t, d, "alpha")
	if b, _ := os.ReadFile(filepath.Join(w.brain("alpha"), "system.md")); string(b) != "seed system\n" {
		t.Fatalf("fresh start not seeded: %q", b)
	}
	// The brain evolves; then it is lost and restored: the seed must not
	// overwrite the restored system.md, but fills a file the snapshot lacks.
	writeFile(t, filepath.Join(w.brain("alpha"), "system.md"), "learned system\n", 0o644)
	wait.For(t, "the change to publish", func() bool { return readPointer(t, w, "alpha.hermes.eth") != blob })
	a, _ := d.Agent("alpha")
	wait.For(t, "state to settle", func() bool { s := a.Status(); return s.Pending == nil })
	stop(t, d)
	writeFile(t, filepath.Join(seed, "patterns/new-in-seed.md"), "later seed\n", 0o644)
	os.RemoveAll(w.brain("alpha"))

	d = w.start()
	wait.For(t, "alpha ready", func() bool { a, _ := d.Agent("alpha"); return a.Ready() })
	if b, _ := os.ReadFile(filepath.Join(w.brain("alpha"), "system.md")); string(b) != "learned system\n" {
		t.Errorf("seed overwrote the restored system.md: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(w.brain("alpha"), "patterns/new-in-seed.md")); string(b) != "later seed\n" {
		t.Errorf("missing seed file not filled: %q", b)
	}
}

func TestSnapshotIntervalAndRefresh(t *testing.T) {
	t.Parallel()
	dn, err := devnet.Start(t.Context(), devnet.Options{
		Dir:              t.TempDir(),
		Shards:           testShards,
		Agents:           []devnet.Agent{{ID: "alpha", ENSName: "alpha.hermes.eth"}},
		Quiet:            50 * time.Millisecond,
		MaxLag:           200 * time.Millisecond,
		SnapshotInterval: 700 * time.Millisecond,
		// Format v3 (the default) re-packs an unchanged brain once its
		// packs may be within one epoch of their end: with three 2 s
		// epochs, some 2 s after an upload.
		Epochs:        3,
		EpochDuration: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dn.Close() })
	w := &world{t: t, dn: dn}
	seedBrain(t, w.brain("alpha"))
	d := w.start()
	first := published(t, d, "alpha")
	a, _ := d.Agent("alpha")
	firstAt := a.Status().Last.CreatedAt

	// Two quick edits: the second upload waits for snapshot_interval.
	writeFile(t, filepath.Join(w.brain("alpha"), "a.md"), "a\n", 0o644)
	var second string
	wait.For(t, "a second snapshot", func() bool {
		s := a.Status()
		second = s.Last.BlobID
		return second != first
	})
	if gap := a.Status().Last.CreatedAt.Sub(firstAt); gap < 700*time.Millisecond {
		t.Errorf("second upload %v after the first, before snapshot_interval", gap)
	}

	// Nothing changes; before its packs expire the same brain is stored
	// again (a re-pack) and the pointer follows.
	hashBefore := a.Status().Last.BundleHash
	wait.For(t, "a refresh upload", func() bool {
		s := a.Status()
		return s.Last.BlobID != second && s.Published == s.Last.BlobID
	})
	if s := a.Status(); s.Last.BundleHash != hashBefore {
		t.Errorf("refresh changed the bundle hash: %s -> %s", hashBefore, s.Last.BundleHash)
	}
}
