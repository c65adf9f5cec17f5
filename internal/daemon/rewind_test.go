package daemon

import (
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/devchain"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/wait"
)

// switchProxy is a JSON-RPC endpoint in front of a chain that a test can
// point at another chain between two requests: to the daemon, the node it
// talks to restored an older copy of its chain, without an outage.
type switchProxy struct {
	target atomic.Pointer[url.URL]
	srv    *httptest.Server
}

func newSwitchProxy(t *testing.T, to string) *switchProxy {
	t.Helper()
	p := &switchProxy{}
	p.point(t, to)
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(p.target.Load())
	}}
	p.srv = httptest.NewServer(rp)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *switchProxy) point(t *testing.T, to string) {
	t.Helper()
	u, err := url.Parse(to)
	if err != nil {
		t.Fatal(err)
	}
	p.target.Store(u)
}

// copyDir copies a directory tree (a stopped chain's data directory).
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o700)
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, src); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestChainRestoredOlder: the node the daemon talks to comes back with an
// older copy of its chain — without an outage the daemon could notice —
// whose record names an older snapshot of the agent and whose signer is
// two nonces behind. With the defaults check_interval 5m and tx_timeout
// 5m, the rewound head is seen by the head watch (not only at the next
// read-back, with readiness green meanwhile), the rollback is repaired,
// and the repair is mined within seconds of the rollback being seen: the
// nonce is read from the chain again rather than sent from the counter,
// whose transaction would wait out tx_timeout.
func TestChainRestoredOlder(t *testing.T) {
	t.Parallel()
	chainDir := filepath.Join(t.TempDir(), "chain")
	w := newWorldWith(t, devnet.Options{ChainDataDir: chainDir}, devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth"})
	seedBrain(t, w.brain("alpha"))
	proxy := newSwitchProxy(t, w.dn.Chain.URL())
	cfg := w.config(func(c *config.Config) {
		c.Chain.RPC = proxy.srv.URL
		c.Chain.TxTimeout = config.Duration(5 * time.Minute)     // the default
		c.Chain.CheckInterval = config.Duration(5 * time.Minute) // the default
		c.Chain.HeadInterval = config.Duration(200 * time.Millisecond)
	})
	if def := config.Default(); cfg.Chain.TxTimeout != def.Chain.TxTimeout || cfg.Chain.CheckInterval != def.Chain.CheckInterval {
		t.Fatalf("the test means the defaults: tx_timeout %v, check_interval %v", def.Chain.TxTimeout, def.Chain.CheckInterval)
	}

	// The first snapshot is published; then the chain is stopped and an
	// older copy of it is kept.
	d := w.startWith(cfg, testLogger(t))
	old := published(t, d, "alpha")
	stop(t, d)
	if err := w.dn.Chain.Close(); err != nil {
		t.Fatal(err)
	}
	oldDir := filepath.Join(t.TempDir(), "chain-copy")
	copyDir(t, chainDir, oldDir)
	restart := func(dir string) *devchain.Chain {
		c, err := devchain.Start(t.Context(), devchain.Config{DataDir: dir, DevKey: w.dn.SignerKey})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	chainA := restart(chainDir)
	proxy.point(t, chainA.URL())

	// Two more snapshots are published on it: the signer is two nonces
	// further than in the copy.
	rec := newRecorder(t)
	d = w.startWith(cfg, rec.logger())
	a, _ := d.Agent("alpha")
	blob := old
	for i := range 2 {
		writeFile(t, filepath.Join(w.brain("alpha"), "skills", "later.md"), strings.Repeat("later\n", i+1), 0o644)
		blob = publishedNew(t, d, "alpha", blob)
	}
	headA, err := chainA.Client().BlockNumber(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the publisher to know the chain's height", func() bool {
		seen, mined := d.pub.Watched()
		return max(seen.Number, mined) >= headA
	})

	// The node now serves the older copy of its chain.
	chainB := restart(oldDir)
	onB, err := ens.New(t.Context(), ens.Config{RPCURL: chainB.URL(), PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(onB.Close)
	if v, err := onB.Read(t.Context(), "alpha.hermes.eth"); err != nil || v != old {
		t.Fatalf("the older chain's record: %q, %v; want %s", v, err, old)
	}
	switched := time.Now()
	proxy.point(t, chainB.URL())

	wait.Within(t, 2*time.Minute, "the newest snapshot on the older chain", func() bool {
		v, err := onB.Read(t.Context(), "alpha.hermes.eth")
		return err == nil && v == blob
	})
	repaired := time.Since(switched)
	if n := rec.count(slog.LevelWarn, "head went back"); n == 0 {
		t.Error("the rewound head was not logged")
	}
	if n := rec.count(slog.LevelWarn, "went back to an older snapshot", "agent", "alpha"); n == 0 {
		t.Error("the rollback was not logged")
	}
	// The repair was sent with the chain's nonce at once: no transaction
	// waited, not even until it was found hopeless (ErrTxDropped).
	rec.mu.Lock()
	for _, r := range *rec.recs {
		if e := r.attrs["error"] + r.attrs["reason"]; strings.Contains(e, "not mined within") || strings.Contains(e, "dropped") {
			t.Errorf("a transaction was sent with a nonce the chain is below: %s %v", r.msg, r.attrs)
		}
	}
	rec.mu.Unlock()
	// Within the deadline above, far below check_interval and tx_timeout.
	t.Logf("the rollback repaired %v after the node served the older chain (check_interval %v, tx_timeout %v, head_interval %v)",
		repaired.Round(time.Millisecond), cfg.Chain.CheckInterval, cfg.Chain.TxTimeout, cfg.Chain.HeadInterval)
	wait.For(t, "the daemon to publish over the rollback", func() bool {
		s := a.Status()
		return s.Pending == nil && s.Published == blob
	})
	// Once the head watch has looked at the repaired chain, the rewind
	// has been counted once: the blocks lost are forgotten with it.
	headB, err := chainB.Client().BlockNumber(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the head watch to see the repaired chain", func() bool {
		seen, _ := d.pub.Watched()
		return seen.Number >= headB
	})
	if n := testutil.ToFloat64(d.metrics.headRewinds); n != 1 {
		t.Errorf("%v rewinds counted, want 1", n)
	}
	if resp, err := http.Get("http://" + d.Addr() + "/readyz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("readyz after the repair: %v %v", resp, err)
	}
}

// TestPointerUnverifiedSince: while the chain cannot be read, a published
// pointer is not known to be what the chain holds: once no read-back
// succeeded for longer than check_interval, status, /v1/status and
// /readyz say "unverified since" and hermesd_pointer_check_age_seconds
// grows — readiness stays 200 (docs/operations.md#series-to-alert-on: the chain's
// view is a fact with an age to alert on, not this machine failing its
// job) — and it clears when a read-back succeeds again.
func TestPointerUnverifiedSince(t *testing.T) {
	t.Parallel()
	w := newWorld(t, devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth"})
	seedBrain(t, w.brain("alpha"))
	proxy := newSwitchProxy(t, w.dn.Chain.URL())
	const every = time.Second
	cfg := w.config(func(c *config.Config) {
		c.Chain.RPC = proxy.srv.URL
		c.Chain.CheckInterval = config.Duration(every)
	})
	d := w.startWith(cfg, testLogger(t))
	published(t, d, "alpha")
	if s := statusOf(t, d, "alpha"); s.PointerUnverified != "" || s.PointerCheckedAt.IsZero() {
		t.Fatalf("just published: %+v", s)
	}

	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // nothing listens there any more
	proxy.point(t, gone.URL)
	var st agent.Status
	wait.For(t, "the pointer to be unverified", func() bool {
		st = statusOf(t, d, "alpha")
		return st.PointerUnverified != ""
	})
	if !strings.HasPrefix(st.PointerUnverified, "unverified since ") {
		t.Errorf("status says %q", st.PointerUnverified)
	}
	if age := metricValue(t, getMetrics(t, d), `hermesd_pointer_check_age_seconds{agent="alpha"}`); age <= every.Seconds() {
		t.Errorf("check age %v s while unverified", age)
	}
	if code, r := getReadyz(t, d); code != http.StatusOK || len(r.Agents) != 1 || !strings.Contains(r.Agents[0].Note, "pointer unverified since") {
		t.Errorf("readyz while unverified: %d %+v", code, r)
	}

	proxy.point(t, w.dn.Chain.URL())
	wait.For(t, "the pointer to be verified again", func() bool {
		return statusOf(t, d, "alpha").PointerUnverified == ""
	})
	if after := statusOf(t, d, "alpha").PointerCheckedAt; !after.After(st.PointerCheckedAt) {
		t.Errorf("verified again, but last checked at %v (before: %v)", after, st.PointerCheckedAt)
	}
}
