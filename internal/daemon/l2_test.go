package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/devchain"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/pointertest"
	"github.com/hermesd/hermesd/internal/wait"
)

// The daemon with an agent whose record lives on the devnet's L2
// (docs/design.md §7.2): it writes there, confirms through L1 resolution
// (registry walk → ENS's OffchainResolver → the gateway → the L2), and
// waits — no hold, no second write — while the gateway lags.

const scoutName = "scout.l2.hermes.eth"

func newL2World(t *testing.T, agents ...devnet.Agent) *world {
	t.Helper()
	return newWorldWith(t, devnet.Options{L2: &devnet.L2Options{}}, agents...)
}

// l2Writes is the signer's transaction count on the L2.
func (w *world) l2Writes() uint64 {
	w.t.Helper()
	n, err := w.dn.L2.Chain.Client().PendingNonceAt(w.t.Context(), w.dn.Owner())
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

// l1Writes is the signer's transaction count on L1.
func (w *world) l1Writes() uint64 {
	w.t.Helper()
	n, err := w.dn.Chain.Client().PendingNonceAt(w.t.Context(), w.dn.Owner())
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

// l2Config is the devnet's configuration with a short read-back interval
// and the L2's visibility timeout set.
func (w *world) l2Config(visibility time.Duration) *config.Config {
	return w.config(func(c *config.Config) {
		c.Chain.CheckInterval = config.Duration(200 * time.Millisecond)
		recs := append([]config.RecordsTarget(nil), c.ENS.Records...)
		recs[0].VisibilityTimeout = config.Duration(visibility)
		c.ENS.Records = recs
	})
}

func notVisibleSeconds(t *testing.T, d *Daemon, id string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + d.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, `hermesd_pointer_not_visible_seconds{agent="`+id+`"} `) {
			if v, err := strconv.ParseFloat(strings.Fields(l)[1], 64); err == nil {
				return v
			}
		}
	}
	t.Fatalf("no hermesd_pointer_not_visible_seconds for %s", id)
	return 0
}

// Snapshot → L2 write → read back through L1 + gateway → published; then
// the gateway lags: the daemon says so and waits, with no hold and no
// second L2 write, and publishes when the gateway catches up. Nothing is
// sent on L1.
func TestL2PointerLagging(t *testing.T) {
	t.Parallel()
	w := newL2World(t, devnet.Agent{ID: "scout", ENSName: scoutName, OnL2: true})
	seedBrain(t, w.brain("scout"))
	l1Before := w.l1Writes()
	rec := newRecorder(t)
	d := w.startWith(w.l2Config(time.Hour), rec.logger())
	t.Cleanup(func() { stop(t, d) })

	first := published(t, d, "scout")
	if got := readPointer(t, w, scoutName); got != first {
		t.Fatalf("through L1 the record reads %q, want %q", got, first)
	}
	l2After := w.l2Writes()

	// The first publish may itself have waited for the gateway (and said
	// so): what counts is this lag's lines.
	logged := rec.count(slog.LevelInfo, "not yet visible from L1", "agent", "scout")
	w.dn.L2.Records.SetLag(1) // the gateway answers one L2 block behind
	writeFile(t, w.brain("scout")+"/notes/1.md", "one\n", 0o644)
	a, _ := d.Agent("scout")
	var second string
	wait.For(t, "the new pointer to be written on the L2 and not visible from L1", func() bool {
		s := a.Status()
		if s.Pending == nil || s.Pending.Written == nil || s.Pending.Written.Value != s.Pending.Value {
			return false
		}
		second = s.Pending.Value
		return strings.Contains(s.PointerNote, "not yet visible from L1") && checks(d, "scout", "lagging") >= 2
	})
	if got := readPointer(t, w, scoutName); got != first {
		t.Fatalf("while lagging L1 reads %q, want the older %q", got, first)
	}
	if n := w.l2Writes(); n != l2After+1 {
		t.Fatalf("%d L2 transactions for one snapshot while the gateway lags, want 1", n-l2After)
	}
	if s := a.Status(); s.Hold != nil || checks(d, "scout", "rollback") != 0 || checks(d, "scout", "held") != 0 {
		t.Fatalf("lag taken for a rollback or another writer: hold %+v, rollbacks %v", s.Hold, checks(d, "scout", "rollback"))
	}
	if code, r := readyz(t, d); code != http.StatusOK || !r.Ready || !strings.Contains(r.agent("scout").Note, "not yet visible from L1") {
		t.Fatalf("readyz while lagging: %d %+v", code, r)
	}
	if v := notVisibleSeconds(t, d, "scout"); v <= 0 {
		t.Errorf("hermesd_pointer_not_visible_seconds = %v while lagging", v)
	}
	if n := rec.count(slog.LevelInfo, "not yet visible from L1", "agent", "scout") - logged; n != 1 {
		t.Errorf("the lag was logged %d times, want once", n)
	}

	w.dn.L2.Records.SetLag(0)
	wait.For(t, "the pointer to be visible from L1 and published", func() bool {
		s := a.Status()
		return s.Pending == nil && s.Published == second && s.PointerNote == ""
	})
	if got := readPointer(t, w, scoutName); got != second {
		t.Fatalf("through L1: %q, want %q", got, second)
	}
	if n := w.l2Writes(); n != l2After+1 {
		t.Fatalf("%d L2 transactions for one snapshot, want 1", n-l2After)
	}
	if n := w.l1Writes(); n != l1Before {
		t.Errorf("%d L1 transactions for an agent whose record is on the L2", n-l1Before)
	}
	// Gas by chain, from the one account of what was paid (the ledger).
	m := getMetrics(t, d)
	gas := metricValue(t, m, `hermesd_gas_used_total{agent="scout",chain_id="1338"}`)
	if l1 := `hermesd_gas_used_total{agent="scout",chain_id="1337"}`; gas <= 0 || strings.Contains(m, l1+" ") && metricValue(t, m, l1) != 0 {
		t.Errorf("gas by chain: L2 %v, L1 %s", gas, l1)
	}
}

// Past visibility_timeout a gateway that still shows an older value,
// cannot be reached, or whose answers the L1 resolver rejects is a clear
// error that keeps the pointer pending:
// never a hold, never another L2 write; the agent stays ready. When the
// gateway answers with the value, it is published.
func TestL2PointerNotVisiblePastTimeout(t *testing.T) {
	t.Parallel()
	w := newL2World(t, devnet.Agent{ID: "scout", ENSName: scoutName, OnL2: true})
	seedBrain(t, w.brain("scout"))
	d := w.startWith(w.l2Config(300*time.Millisecond), testLogger(t))
	t.Cleanup(func() { stop(t, d) })
	published(t, d, "scout")
	l2After := w.l2Writes()
	a, _ := d.Agent("scout")

	for _, tc := range []struct {
		name, want string
		fault      func(on bool)
	}{
		{"an older value", "an older snapshot of this agent", func(on bool) {
			w.dn.L2.Records.SetLag(map[bool]uint64{true: 1, false: 0}[on])
		}},
		{"gateway down", "could not be read", w.dn.L2.Records.SetDown},
		{"signature rejected", "resolver rejected the gateway's answer", func(on bool) {
			// The parent's OffchainResolver trusts another key than the
			// gateway's while on.
			signer := w.dn.L2.GatewayKey
			if on {
				signer = crypto.PubkeyToAddress(devchain.DeriveKey("not-the-gateway").PublicKey)
			}
			if _, err := w.dn.Chain.EnsureOffchainResolver(t.Context(), w.dn.L2.Parent, w.dn.Owner(), w.dn.L2.GatewayURL, signer); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		tc.fault(true)
		writeFile(t, w.brain("scout")+"/notes/"+strings.ReplaceAll(tc.name, " ", "-")+".md", tc.name+"\n", 0o644)
		var second string
		wait.For(t, tc.name+": the error past the timeout", func() bool {
			s := a.Status()
			if s.Pending == nil {
				return false
			}
			second = s.Pending.Value
			return strings.Contains(s.Pending.LastErr, "not visible from L1 after 300ms") &&
				strings.Contains(s.Pending.LastErr, tc.want) && strings.Contains(s.PointerNote, "past visibility_timeout")
		})
		if s := a.Status(); s.Hold != nil {
			t.Fatalf("%s: held: %+v", tc.name, s.Hold)
		}
		if code, r := readyz(t, d); code != http.StatusOK || !strings.Contains(r.agent("scout").Note, "past visibility_timeout") {
			t.Fatalf("%s: readyz %d %+v", tc.name, code, r)
		}
		tc.fault(false)
		wait.For(t, tc.name+": published once the gateway shows it", func() bool {
			s := a.Status()
			return s.Pending == nil && s.Published == second
		})
		l2After++
		if n := w.l2Writes(); n != l2After {
			t.Fatalf("%s: %d L2 transactions in all, want one per snapshot (%d)", tc.name, n, l2After)
		}
	}
	if f := d.metrics.failures.get("scout", "visibility"); f < 3 {
		t.Errorf("visibility failures counted: %v", f)
	}
}

// Another writer where the record lives is another writer, whatever
// chain it is on: the L1 read-back sees its value and holds (after the
// lag, nothing else).
func TestL2ForeignWriterHolds(t *testing.T) {
	t.Parallel()
	w := newL2World(t, devnet.Agent{ID: "scout", ENSName: scoutName, OnL2: true})
	seedBrain(t, w.brain("scout"))
	d := w.startWith(w.l2Config(time.Minute), testLogger(t))
	t.Cleanup(func() { stop(t, d) })
	first := published(t, d, "scout")
	const foreign = "Zm9yZWlnbi1zbmFwc2hvdC1vZi1hbm90aGVyLXdyaXRlcg"
	if err := w.dn.L2.Chain.SetText(t.Context(), w.dn.SignerKey, w.dn.L2.Resolver(), scoutName, ens.TextKey, foreign); err != nil {
		t.Fatal(err)
	}
	a, _ := d.Agent("scout")
	wait.For(t, "the foreign value to hold publishing", func() bool {
		h := a.Head().Hold()
		return h != nil && h.Value == foreign
	})
	if s := a.Status(); s.Published != first {
		t.Errorf("published %q", s.Published)
	}
}

// Each record layout publishes on its own: with the L2's RPC hung (a node
// that accepts and never answers), an agent whose record is on L1 still
// has its edit published while the L2 agent's write still hangs, not
// after that write gives up.
// The stop then names only the L2 agent as pending.
func TestHungL2DoesNotHoldBackL1(t *testing.T) {
	t.Parallel()
	w := newL2World(t, devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth"}, devnet.Agent{ID: "scout", ENSName: scoutName, OnL2: true})
	seedBrain(t, w.brain("alpha"))
	seedBrain(t, w.brain("scout"))
	proxy := pointertest.NewChainProxy(t, w.dn.L2.RPC())
	cfg := w.config(func(c *config.Config) {
		recs := append([]config.RecordsTarget(nil), c.ENS.Records...)
		recs[0].RPC = proxy.URL
		c.ENS.Records = recs
	})
	d := w.startWith(cfg, testLogger(t))
	t.Cleanup(proxy.Pass) // let the hung requests go before the world stops
	alphaFirst := published(t, d, "alpha")
	scoutFirst := published(t, d, "scout")

	proxy.Hang()
	writeFile(t, w.brain("scout")+"/notes/hung.md", "written while the L2 hangs\n", 0o644)
	scout, _ := d.Agent("scout")
	wait.For(t, "the scout's write to hang on the L2", func() bool {
		s := scout.Status()
		return s.Last != nil && s.Last.BlobID != scoutFirst && proxy.Counts().Hung > 0
	})

	alpha, _ := d.Agent("alpha")
	// A hung request its sender gives up on counts as dropped: while none
	// is, the L2 write has not returned, so nothing waited for it.
	dropped := proxy.Counts().Dropped
	start := time.Now()
	writeFile(t, w.brain("alpha")+"/notes/edit.md", "an edit on the L1 agent\n", 0o644)
	var stored, done time.Duration
	wait.For(t, "the L1 agent's edit to be published", func() bool {
		s := alpha.Status()
		if s.Last != nil && s.Last.BlobID != alphaFirst && stored == 0 {
			stored = time.Since(start)
		}
		if s.Last == nil || s.Last.BlobID == alphaFirst || s.Pending != nil || s.Published != s.Last.BlobID {
			return false
		}
		done = time.Since(start)
		return true
	})
	t.Logf("L1 agent with the L2 hung: snapshot stored after %v, published after %v (quiet %v)", stored, done, cfg.QuietPeriod(&cfg.Agents[0]))
	if c := proxy.Counts(); c.Dropped != dropped {
		t.Errorf("the L1 agent was published only after the hung L2 write gave up (%d → %d requests dropped)", dropped, c.Dropped)
	}
	if s := scout.Status(); s.Pending == nil || s.Published != scoutFirst {
		t.Fatalf("the L2 agent published through a hung RPC: %+v", s)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := d.Close(ctx)
	if !errors.Is(err, ErrPending) || !strings.Contains(err.Error(), "scout") || strings.Contains(err.Error(), "alpha") {
		t.Fatalf("Close: %v, want ErrPending naming scout only", err)
	}
}

// A stop with a pointer written on the L2 and not yet visible from L1
// exits cleanly: it is on chain and needs nothing more from this machine
// (docs/design.md §7, Durable). The next start confirms it by reading,
// with no second L2 transaction.
func TestL2StopWhileNotVisible(t *testing.T) {
	t.Parallel()
	w := newL2World(t, devnet.Agent{ID: "scout", ENSName: scoutName, OnL2: true})
	seedBrain(t, w.brain("scout"))
	rec := newRecorder(t)
	d := w.startWith(w.l2Config(time.Hour), rec.logger())
	first := published(t, d, "scout")
	w.dn.L2.Records.SetLag(1)
	writeFile(t, w.brain("scout")+"/notes/1.md", "one\n", 0o644)
	a, _ := d.Agent("scout")
	var second string
	wait.For(t, "the pointer to be written on the L2, not visible from L1", func() bool {
		s := a.Status()
		if s.Pending == nil || s.Pending.Written == nil || s.Pending.Written.Value != s.Pending.Value {
			return false
		}
		second = s.Pending.Value
		return true
	})
	l2 := w.l2Writes()
	stop(t, d) // no ErrPending
	if rec.count(slog.LevelInfo, "confirmed after the next start", "agent", "scout") != 1 {
		t.Error("the stop did not say the written pointer is confirmed after the next start")
	}
	if got := readPointer(t, w, scoutName); got != first {
		t.Fatalf("L1 shows %s while lagging", got)
	}

	w.dn.L2.Records.SetLag(0)
	d = w.startWith(w.l2Config(time.Hour), testLogger(t))
	t.Cleanup(func() { stop(t, d) })
	if got := published(t, d, "scout"); got != second {
		t.Fatalf("published %s after the restart, want %s", got, second)
	}
	if n := w.l2Writes(); n != l2 {
		t.Errorf("%d more L2 transactions to confirm a written pointer, want 0", n-l2)
	}
}
