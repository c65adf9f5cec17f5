package daemon

// Daemon-level tests of the ENS pointer's life: a rollback is
// republished, a stale pointer is repaired by the read-back, another
// writer holds publishing visibly until an operator resolves it, a state
// save that fails is retried — each also across a restart. They run on the
// real devnet: the EVM with the real ENS contracts and the local Walrus.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/pointertest"
	"github.com/hermesd/hermesd/internal/state"
	"github.com/hermesd/hermesd/internal/wait"
)

// recorder is a slog.Handler that keeps every record, flattened to
// key=value strings, for the test to search.
type recorder struct {
	mu    *sync.Mutex
	recs  *[]logRecord
	attrs []slog.Attr
	next  slog.Handler // -v: also print
}

type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func newRecorder(t *testing.T) *recorder {
	return &recorder{mu: new(sync.Mutex), recs: new([]logRecord), next: testLogger(t).Handler()}
}

func (r *recorder) logger() *slog.Logger { return slog.New(r) }

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *recorder) Handle(ctx context.Context, rec slog.Record) error {
	lr := logRecord{level: rec.Level, msg: rec.Message, attrs: map[string]string{}}
	for _, a := range r.attrs {
		lr.attrs[a.Key] = a.Value.String()
	}
	rec.Attrs(func(a slog.Attr) bool {
		lr.attrs[a.Key] = a.Value.String()
		return true
	})
	r.mu.Lock()
	*r.recs = append(*r.recs, lr)
	r.mu.Unlock()
	if r.next.Enabled(ctx, rec.Level) {
		return r.next.WithAttrs(r.attrs).Handle(ctx, rec)
	}
	return nil
}

func (r *recorder) WithAttrs(as []slog.Attr) slog.Handler {
	c := *r
	c.attrs = append(append([]slog.Attr(nil), r.attrs...), as...)
	return &c
}

func (r *recorder) WithGroup(string) slog.Handler { return r }

// count is the number of records at level whose message contains msg and
// whose attributes hold every key, value pair given.
func (r *recorder) count(level slog.Level, msg string, kv ...string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
next:
	for _, lr := range *r.recs {
		if lr.level != level || !strings.Contains(lr.msg, msg) {
			continue
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if lr.attrs[kv[i]] != kv[i+1] {
				continue next
			}
		}
		n++
	}
	return n
}

// config is a copy of the devnet's configuration, changed by mod.
func (w *world) config(mod func(c *config.Config)) *config.Config {
	c := *w.dn.Config
	mod(&c)
	return &c
}

// startWith runs a daemon on cfg, logging to log.
func (w *world) startWith(cfg *config.Config, log *slog.Logger) *Daemon {
	w.t.Helper()
	d, err := New(w.t.Context(), cfg, log, compose.Options{})
	if err != nil {
		w.t.Fatal(err)
	}
	d.Start(context.Background())
	w.t.Cleanup(func() { closeAtCleanup(d) })
	return d
}

// owner writes with the key that owns every name (the daemon's own key).
func (w *world) owner() *ens.Client { return pointertest.Writer(w.t, w.dn.Chain.URL(), w.dn.SignerKey) }

// otherWriter is another writer of name's records.
func (w *world) otherWriter(name string) *ens.Client {
	return pointertest.OtherWriter(w.t, w.dn.Chain, w.dn.SignerKey, name)
}

// setPointer compare-and-sets a record, failing the test on any error.
func setPointer(t *testing.T, c *ens.Client, name, value, expected string) {
	t.Helper()
	if _, err := c.Write(t.Context(), name, value, expected); err != nil {
		t.Fatalf("set %s to %s: %v", name, value, err)
	}
}

// publishedNew waits until agent id has published a snapshot other than
// prev and returns it.
func publishedNew(t *testing.T, d *Daemon, id, prev string) string {
	t.Helper()
	a, _ := d.Agent(id)
	var blob string
	wait.For(t, id+" to publish a new snapshot of its brain", func() bool {
		s := a.Status()
		if s.Last == nil || s.Last.BlobID == prev || s.Pending != nil || s.Published != s.Last.BlobID {
			return false
		}
		// Of the brain as it is now: v3 may first re-pack the previous
		// snapshot (after an adopt, the end epochs of its packs are not
		// known), a publish of its own.
		if h, err := hash.Dir(t.Context(), s.BrainDir, hash.Options{}); err != nil || h.Digest.String() != s.Last.BundleHash {
			return false
		}
		blob = s.Last.BlobID
		return true
	})
	return blob
}

func writes(d *Daemon, id, result string) float64 {
	return d.metrics.publishes.get(id, result)
}

func checks(d *Daemon, id, result string) float64 {
	return d.metrics.pointerChecks.get(id, result)
}

// stopPending stops d, expecting pointers left pending.
func stopPending(t *testing.T, d *Daemon) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := d.Close(ctx); !errors.Is(err, ErrPending) {
		t.Fatalf("Close with the chain refusing writes: %v, want ErrPending", err)
	}
}

// TestPointerRollback: the record set back to an older snapshot of the
// agent's own lineage while a newer one is pending is a rollback: the
// newest is published over it with a warning and a metric, nothing is
// held, and other agents are not disturbed — while running and across a
// restart.
func TestPointerRollback(t *testing.T) {
	t.Parallel()
	w := newWorld(t, devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth"}, devnet.Agent{ID: "beta", ENSName: "beta.hermes.eth"})
	seedBrain(t, w.brain("alpha"))
	seedBrain(t, w.brain("beta"))
	proxy := pointertest.NewChainProxy(t, w.dn.Chain.URL())
	cfg := w.config(func(c *config.Config) {
		c.Chain.RPC = proxy.URL
		c.Chain.CheckInterval = config.Duration(time.Hour) // the write path, not the read-back
	})
	rec := newRecorder(t)
	d := w.startWith(cfg, rec.logger())
	first := published(t, d, "alpha")
	betaBlob := published(t, d, "beta")
	writeFile(t, filepath.Join(w.brain("alpha"), "notes/1.md"), "one\n", 0o644)
	second := publishedNew(t, d, "alpha", first)
	owner := w.owner()
	const name = "alpha.hermes.eth"

	var fourth string
	t.Run("while running", func(t *testing.T) {
		a, _ := d.Agent("alpha")
		proxy.Refuse()
		writeFile(t, filepath.Join(w.brain("alpha"), "notes/2.md"), "two\n", 0o644)
		var third string
		wait.For(t, "a third snapshot pending, its write refused", func() bool {
			s := a.Status()
			if s.Last == nil || s.Last.BlobID == second || s.Pending == nil || s.Pending.Value != s.Last.BlobID || proxy.Counts().Refused == 0 {
				return false
			}
			third = s.Last.BlobID
			return true
		})
		setPointer(t, owner, name, first, second) // back to the first snapshot
		// The next attempt reads the record first: a rollback, found
		// before anything is sent. It comes after the publisher's backoff,
		// which doubles from 2 s with each refused write: on a loaded
		// machine several may come before this point, and the wait for
		// the next attempt outgrow a minute.
		const retry = 5 * time.Minute
		wait.Within(t, retry, "the rollback to be seen", func() bool { return writes(d, "alpha", "rollback") >= 1 })
		if a.Head().Hold() != nil {
			t.Fatalf("a rollback held publishing: %+v", a.Head().Hold())
		}
		proxy.Pass()
		wait.Within(t, retry, "the newest snapshot published over the rollback", func() bool {
			s := a.Status()
			return readPointer(t, w, name) == third && s.Pending == nil && s.Published == third
		})
		if n := rec.count(slog.LevelWarn, "went back to an older snapshot", "agent", "alpha"); n == 0 {
			t.Error("no warning was logged")
		}
		if s := a.Status(); s.Hold != nil {
			t.Errorf("held: %+v", s.Hold)
		}
		b, _ := d.Agent("beta")
		if s := b.Status(); s.Hold != nil || s.Published != betaBlob || readPointer(t, w, "beta.hermes.eth") != betaBlob {
			t.Errorf("beta was disturbed: %+v", s)
		}
		// A fourth snapshot waits while the chain refuses writes again,
		// for the restart below.
		proxy.Refuse()
		writeFile(t, filepath.Join(w.brain("alpha"), "notes/3.md"), "three\n", 0o644)
		wait.For(t, "a fourth snapshot pending", func() bool {
			s := a.Status()
			if s.Last == nil || s.Last.BlobID == third || s.Pending == nil || s.Pending.Value != s.Last.BlobID {
				return false
			}
			fourth = s.Last.BlobID
			return true
		})
		stopPending(t, d)
		setPointer(t, owner, name, second, third) // rolled back while stopped
		proxy.Pass()
	})

	t.Run("across a restart", func(t *testing.T) {
		if fourth == "" {
			t.Fatal("nothing pending from the first part")
		}
		rec := newRecorder(t)
		d := w.startWith(cfg, rec.logger())
		a, _ := d.Agent("alpha")
		wait.For(t, "the pending snapshot published over the rollback", func() bool {
			s := a.Status()
			return readPointer(t, w, name) == fourth && s.Pending == nil && s.Published == fourth
		})
		if writes(d, "alpha", "rollback") < 1 || rec.count(slog.LevelWarn, "went back to an older snapshot", "agent", "alpha") == 0 {
			t.Error("the rollback was not counted and logged")
		}
		if a.Head().Hold() != nil {
			t.Errorf("held: %+v", a.Head().Hold())
		}
		stop(t, d)
		st, err := state.LoadAgent(state.AgentPath(cfg.StateDir, "alpha"))
		if err != nil || st.Pending != nil || st.Hold != nil || st.Published != fourth {
			t.Fatalf("state after the restart: %+v %v", st, err)
		}
	})
}

// TestPointerStaleRepaired: with nothing pending, a record set back to an
// older snapshot of ours is found by the periodic read-back
// (chain.check_interval) and repaired — while running and when it happened
// while the daemon was stopped.
func TestPointerStaleRepaired(t *testing.T) {
	t.Parallel()
	w := newWorld(t, devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth"})
	seedBrain(t, w.brain("alpha"))
	const interval = 300 * time.Millisecond
	cfg := w.config(func(c *config.Config) { c.Chain.CheckInterval = config.Duration(interval) })
	rec := newRecorder(t)
	d := w.startWith(cfg, rec.logger())
	first := published(t, d, "alpha")
	writeFile(t, filepath.Join(w.brain("alpha"), "notes/1.md"), "one\n", 0o644)
	second := publishedNew(t, d, "alpha", first)
	owner := w.owner()
	const name = "alpha.hermes.eth"

	repaired := func(t *testing.T, d *Daemon, rec *recorder) {
		t.Helper()
		a, _ := d.Agent("alpha")
		start := time.Now()
		wait.For(t, "the stale pointer to be repaired", func() bool {
			s := a.Status()
			return readPointer(t, w, name) == second && s.Pending == nil && s.Published == second
		})
		t.Logf("repaired %v after the rollback (check_interval %v)", time.Since(start).Round(time.Millisecond), interval)
		if checks(d, "alpha", "rollback") < 1 || rec.count(slog.LevelWarn, "went back to an older snapshot", "agent", "alpha") == 0 {
			t.Error("the repair was not counted and logged")
		}
		if a.Head().Hold() != nil {
			t.Errorf("held: %+v", a.Head().Hold())
		}
	}
	// Nothing is pending before each rollback, so only the periodic check
	// (not a leftover pending pointer) can repair it. (Checked before the
	// rollback: the daemon may notice it at once. While stopped: in the
	// state the stopped daemon saved.)
	nothingPending := func(t *testing.T) {
		t.Helper()
		st, err := state.LoadAgent(state.AgentPath(cfg.StateDir, "alpha"))
		if err != nil || st.Pending != nil {
			t.Fatalf("pending before the rollback: %+v %v", st.Pending, err)
		}
	}
	t.Run("while running", func(t *testing.T) {
		t.Cleanup(func() { stop(t, d) }) // also when the subtest fails
		a, _ := d.Agent("alpha")
		if _, ok := a.Head().Pending(); ok {
			t.Fatal("something is pending")
		}
		setPointer(t, owner, name, first, second)
		repaired(t, d, rec)
	})
	t.Run("while stopped", func(t *testing.T) {
		nothingPending(t)
		setPointer(t, owner, name, first, second)
		rec := newRecorder(t)
		d := w.startWith(cfg, rec.logger())
		repaired(t, d, rec)
	})
}

// httpPost posts JSON to the daemon's API with the bearer token.
func httpPost(t *testing.T, d *Daemon, token, path string) (int, map[string]string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+d.Addr()+path, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]string{}
	json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out)
	return resp.StatusCode, out
}

type readyzBody struct {
	Ready  bool         `json:"ready"`
	Agents []AgentReady `json:"agents"`
}

func getReadyz(t *testing.T, d *Daemon) (int, readyzBody) {
	t.Helper()
	resp, err := http.Get("http://" + d.Addr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r readyzBody
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, r
}

func getMetrics(t *testing.T, d *Daemon) string {
	t.Helper()
	resp, err := http.Get("http://" + d.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPointerForeignWriter: another key writes a blob id foreign to the
// agent's lineage. That agent is held — visible in its status, /readyz
// (503 naming it and why; 200 with readiness any) and metrics — while the
// others keep publishing; the hold survives a restart; the API resolves
// it by adopting the other writer's snapshot or by overriding it.
func TestPointerForeignWriter(t *testing.T) {
	t.Parallel()
	w := newWorld(t, devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth"}, devnet.Agent{ID: "beta", ENSName: "beta.hermes.eth"})
	seedBrain(t, w.brain("alpha"))
	seedBrain(t, w.brain("beta"))
	token := "a-test-token-of-32-characters-xx"
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := w.config(func(c *config.Config) {
		c.Chain.CheckInterval = config.Duration(300 * time.Millisecond)
		c.HTTP.Token = config.SecretRef{File: tokenFile}
	})
	d := w.startWith(cfg, testLogger(t))
	first := published(t, d, "alpha")
	betaBlob := published(t, d, "beta")
	const name = "alpha.hermes.eth"
	other := w.otherWriter(name)
	fork := pointertest.Fork(t, w.dn.Config, "alpha", map[string]string{"system.md": "I am the fork.\n", "fork.md": "only here\n"})
	setPointer(t, other, name, fork, first)

	a, _ := d.Agent("alpha")
	wait.For(t, "alpha to be held", func() bool { return a.Head().Hold() != nil })
	if h := a.Head().Hold(); h.Value != fork || !strings.Contains(h.Reason, "hermesd pointer adopt alpha") || !strings.Contains(h.Reason, "hermesd pointer override alpha") {
		t.Fatalf("hold: %+v", h)
	}
	visible := func(t *testing.T, d *Daemon, readiness string) {
		t.Helper()
		code, rz := getReadyz(t, d)
		want := http.StatusServiceUnavailable
		if readiness == "any" {
			want = http.StatusOK
		}
		if code != want {
			t.Errorf("readyz (readiness %s) = %d, want %d", readiness, code, want)
		}
		for _, ar := range rz.Agents {
			switch ar.ID {
			case "alpha":
				if ar.Ready || !strings.Contains(ar.Reason, "publishing held") || !strings.Contains(ar.Reason, fork) {
					t.Errorf("readyz alpha: %+v", ar)
				}
			case "beta":
				if !ar.Ready {
					t.Errorf("readyz beta: %+v", ar)
				}
			}
		}
		m := getMetrics(t, d)
		if !strings.Contains(m, `hermesd_pointer_held{agent="alpha"} 1`) || !strings.Contains(m, `hermesd_pointer_held{agent="beta"} 0`) {
			t.Errorf("metrics do not show the hold:\n%s", grepLines(m, "hermesd_pointer_held"))
		}
	}
	visible(t, d, "all")

	// Others keep publishing; the held agent keeps snapshotting, and
	// publishes nothing.
	writeFile(t, filepath.Join(w.brain("beta"), "notes/b.md"), "b\n", 0o644)
	publishedNew(t, d, "beta", betaBlob)
	writeFile(t, filepath.Join(w.brain("alpha"), "notes/mine.md"), "mine\n", 0o644)
	wait.For(t, "alpha to snapshot while held", func() bool {
		s := a.Status()
		return s.Last != nil && s.Last.BlobID != first && s.Pending != nil
	})
	if got := readPointer(t, w, name); got != fork {
		t.Fatalf("the held agent wrote its pointer: %s", got)
	}
	stop(t, d) // a held agent is not pending: a clean stop

	cfg.HTTP.Readiness = "any"
	d = w.startWith(cfg, testLogger(t))
	a, _ = d.Agent("alpha")
	wait.For(t, "alpha ready after the restart", a.Ready)
	if h := a.Head().Hold(); h == nil || h.Value != fork {
		t.Fatalf("the hold did not survive the restart: %+v", h)
	}
	// With readiness any, beta (not held) is what makes the daemon ready:
	// wait until it has restored and is watched.
	b, _ := d.Agent("beta")
	wait.For(t, "beta ready after the restart", b.Ready)
	visible(t, d, "any")

	t.Run("adopt", func(t *testing.T) {
		code, out := httpPost(t, d, token, "/v1/agents/alpha/pointer/adopt")
		if code != http.StatusOK || out["setAside"] == "" {
			t.Fatalf("adopt: %d %v", code, out)
		}
		if b, _ := os.ReadFile(filepath.Join(w.brain("alpha"), "fork.md")); string(b) != "only here\n" {
			t.Errorf("the brain is not the fork's: fork.md = %q", b)
		}
		if b, _ := os.ReadFile(filepath.Join(out["setAside"], "notes/mine.md")); string(b) != "mine\n" {
			t.Errorf("the set-aside brain lacks our last change: %q", b)
		}
		s := a.Status()
		if s.Hold != nil || s.Published != fork || s.Pending != nil || s.Last.BlobID != fork {
			t.Fatalf("after adopt: %+v", s)
		}
		if m := getMetrics(t, d); !strings.Contains(m, `hermesd_pointer_held{agent="alpha"} 0`) {
			t.Errorf("still held in the metrics")
		}
		// Publishing resumed from the adopted snapshot.
		writeFile(t, filepath.Join(w.brain("alpha"), "notes/after-adopt.md"), "x\n", 0o644)
		publishedNew(t, d, "alpha", fork)
		if code, _ := httpPost(t, d, token, "/v1/agents/alpha/pointer/adopt"); code != http.StatusConflict {
			t.Errorf("adopt with nothing held: %d, want 409", code)
		}
	})

	t.Run("override", func(t *testing.T) {
		cur := readPointer(t, w, name)
		fork2 := pointertest.Fork(t, w.dn.Config, "alpha", map[string]string{"system.md": "I am another fork.\n"})
		setPointer(t, other, name, fork2, cur)
		wait.For(t, "alpha to be held again", func() bool { h := a.Head().Hold(); return h != nil && h.Value == fork2 })
		code, out := httpPost(t, d, token, "/v1/agents/alpha/pointer/override")
		if code != http.StatusOK {
			t.Fatalf("override: %d %v", code, out)
		}
		wait.For(t, "ours to be published over the other writer's", func() bool {
			s := a.Status()
			return s.Hold == nil && s.Pending == nil && s.Published == cur && readPointer(t, w, name) == cur
		})
	})
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestPointerStateSaveFails: the agent's state file cannot be replaced (a
// non-empty directory stands in its place; the tests run as root, so a
// chmod would not stop the write). The snapshot is still published from
// memory, nothing is held, the state says it is unsaved, and it is saved
// once that is possible. Then a crash with the save lost: the restarted
// daemon recognises the record as its own newest snapshot and converges
// without uploading or publishing anything again.
func TestPointerStateSaveFails(t *testing.T) {
	t.Parallel()
	w := newWorld(t, devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth"})
	seedBrain(t, w.brain("alpha"))
	proxy := pointertest.NewChainProxy(t, w.dn.Chain.URL())
	cfg := w.config(func(c *config.Config) {
		c.Chain.RPC = proxy.URL
		c.Chain.CheckInterval = config.Duration(300 * time.Millisecond)
	})
	d := w.startWith(cfg, testLogger(t))
	first := published(t, d, "alpha")
	a, _ := d.Agent("alpha")
	const name = "alpha.hermes.eth"
	dir := state.AgentPath(cfg.StateDir, "alpha")
	sf := filepath.Join(dir, "state.json")
	// block puts a directory where the state file goes, so that every
	// save fails, and returns the state saved last. The daemon may save
	// between the remove and the mkdir (its saves rename a complete file
	// into place): then the state is read and removed again.
	block := func(t *testing.T) []byte {
		t.Helper()
		for range 100 {
			b, err := os.ReadFile(sf)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(sf); err != nil {
				t.Fatal(err)
			}
			err = os.Mkdir(sf, 0o700)
			if errors.Is(err, fs.ErrExist) {
				continue // saved in between
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(sf, "in-the-way"), 0o700); err != nil {
				t.Fatal(err)
			}
			return b
		}
		t.Fatal("the state file came back 100 times in a row")
		return nil
	}

	block(t)
	writeFile(t, filepath.Join(w.brain("alpha"), "notes/1.md"), "one\n", 0o644)
	var second string
	wait.For(t, "the second snapshot published with the state unsaved", func() bool {
		s := a.Status()
		if s.Last == nil || s.Last.BlobID == first || readPointer(t, w, name) != s.Last.BlobID {
			return false
		}
		second = s.Last.BlobID
		return true
	})
	if s := a.Status(); !s.Unsaved || s.Hold != nil {
		t.Fatalf("status: unsaved %v hold %+v", s.Unsaved, s.Hold)
	}
	// Readiness says the state is not saved: at first from the unsaved
	// state, then, once the sync that failed to save has reported, with
	// the error of that save.
	wait.For(t, "readyz to name the failed save", func() bool {
		code, rz := getReadyz(t, d)
		if code != http.StatusServiceUnavailable || !strings.Contains(rz.Agents[0].Reason, "not saved yet") && !strings.Contains(rz.Agents[0].Reason, "save agent state") {
			t.Fatalf("readyz while unsaved: %d %+v", code, rz)
		}
		return strings.Contains(rz.Agents[0].Reason, "save agent state")
	})
	if err := os.RemoveAll(sf); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the state to be saved", func() bool { return !a.Dirty() })
	st, err := state.LoadAgent(dir)
	if err != nil || st.Last == nil || st.Last.BlobID != second || st.Published != second || st.Pending != nil || st.Hold != nil {
		t.Fatalf("saved state: %+v %v", st, err)
	}
	// The failed sync is retried (with backoff) and clears the error.
	wait.For(t, "readyz to say ready", func() bool { code, _ := getReadyz(t, d); return code == http.StatusOK })

	t.Run("only the save after the publish fails", func(t *testing.T) {
		// The snapshot is saved as pending while the chain refuses
		// writes; the save after its publish fails. Nothing else is
		// left to retry (the agent's sync succeeded): the agent's loop
		// retries the save.
		proxy.Refuse()
		writeFile(t, filepath.Join(w.brain("alpha"), "notes/2.md"), "two\n", 0o644)
		var pending string
		wait.For(t, "a pending snapshot saved", func() bool {
			st, err := state.LoadAgent(dir)
			if err != nil || st.Pending == nil || st.Last == nil || st.Last.BlobID == second || proxy.Counts().Refused == 0 {
				return false
			}
			pending = st.Pending.Value
			return true
		})
		block(t)
		proxy.Pass()
		wait.For(t, "the pointer published with the state unsaved", func() bool {
			s := a.Status()
			return readPointer(t, w, name) == pending && s.Published == pending && s.Pending == nil && s.Unsaved
		})
		if s := a.Status(); s.Hold != nil || s.Pending != nil || s.LastError != "" {
			t.Fatalf("status: %+v", s)
		}
		if err := os.RemoveAll(sf); err != nil {
			t.Fatal(err)
		}
		wait.For(t, "the state to be saved", func() bool { return !a.Dirty() })
		st, err := state.LoadAgent(dir)
		if err != nil || st.Published != pending || st.Pending != nil {
			t.Fatalf("saved state: %+v %v", st, err)
		}
		second = pending
	})

	t.Run("the save is lost in a crash", func(t *testing.T) {
		old := block(t)
		writeFile(t, filepath.Join(w.brain("alpha"), "notes/3.md"), "three\n", 0o644)
		var third string
		wait.For(t, "the third snapshot published with the state unsaved", func() bool {
			s := a.Status()
			if s.Last == nil || s.Last.BlobID == second || readPointer(t, w, name) != s.Last.BlobID {
				return false
			}
			third = s.Last.BlobID
			return true
		})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := d.Close(ctx); err == nil {
			t.Fatal("Close reported nothing while the state could not be saved")
		}
		// What a kill -9 leaves: the state as it was before the third
		// snapshot.
		if err := os.RemoveAll(sf); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(sf, old, 0o600); err != nil {
			t.Fatal(err)
		}
		uploads := stores(t, w)
		head, err := w.dn.Chain.Client().BlockNumber(t.Context())
		if err != nil {
			t.Fatal(err)
		}

		d := w.startWith(cfg, testLogger(t))
		a, _ := d.Agent("alpha")
		wait.For(t, "the restarted daemon to recognise its own snapshot", func() bool {
			s := a.Status()
			return a.Ready() && s.Last != nil && s.Last.BlobID == third && s.Published == third && s.Pending == nil && !s.Unsaved
		})
		if got := readPointer(t, w, name); got != third {
			t.Errorf("pointer %s, want %s", got, third)
		}
		if got := stores(t, w); got != uploads {
			t.Errorf("the snapshot was uploaded again (%d -> %d uploads)", uploads, got)
		}
		if now, err := w.dn.Chain.Client().BlockNumber(t.Context()); err != nil || now != head {
			t.Errorf("a transaction was sent (head %d -> %d, %v)", head, now, err)
		}
		if a.Head().Hold() != nil || writes(d, "alpha", "rollback") != 0 || checks(d, "alpha", "rollback") != 0 {
			t.Errorf("treated as a rollback or held: %+v", a.Status())
		}
		stop(t, d)
		st, err := state.LoadAgent(dir)
		if err != nil || st.Last.BlobID != third || st.Published != third || st.Pending != nil {
			t.Fatalf("saved state: %+v %v", st, err)
		}
	})
}
