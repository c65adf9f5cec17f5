package daemon

import (
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/devchain"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/wait"
)

// TestPointerRollbackThroughGateway: every read of the pointer resolves the
// name as ENS specifies, CCIP-read included, and what a gateway serves is
// judged like any other value of the record (docs/design.md §7). Here the
// agent's name is moved to ENS's OffchainResolver, whose gateway serves an
// older snapshot of the agent's own lineage: the periodic read-back takes
// it for a rollback (counted, warned about, the newest snapshot pending
// over it), never for another writer, and nothing is held. Once the name
// resolves to the newest snapshot again, the pending pointer settles
// without a second write.
func TestPointerRollbackThroughGateway(t *testing.T) {
	t.Parallel()
	if _, err := devchain.NeedCCIPArtifacts(); err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth"})
	seedBrain(t, w.brain("alpha"))
	const interval = 300 * time.Millisecond
	cfg := w.config(func(c *config.Config) { c.Chain.CheckInterval = config.Duration(interval) })
	rec := newRecorder(t)
	d := w.startWith(cfg, rec.logger())
	t.Cleanup(func() { stop(t, d) })
	first := published(t, d, "alpha")
	writeFile(t, filepath.Join(w.brain("alpha"), "notes/1.md"), "one\n", 0o644)
	second := publishedNew(t, d, "alpha", first)
	const name = "alpha.hermes.eth"

	ch := w.dn.Chain
	gwKey := devchain.DeriveKey("gateway")
	records := &devchain.TextRecords{}
	records.Set(name, ens.TextKey, first) // an older value of the lineage
	gw := httptest.NewServer(&devchain.Gateway{Key: gwKey, Answer: records.Answer})
	t.Cleanup(gw.Close)
	offchain, err := ch.DeployOffchainResolver(t.Context(), gw.URL+"/{sender}/{data}.json", crypto.PubkeyToAddress(gwKey.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.RegisterWithResolver(t.Context(), name, w.dn.Owner(), offchain); err != nil {
		t.Fatal(err)
	}
	if got := readPointer(t, w, name); got != first {
		t.Fatalf("through the gateway the record reads %q, want the older %q", got, first)
	}

	a, _ := d.Agent("alpha")
	wait.For(t, "the read-back to take the gateway's value for a rollback", func() bool {
		p, ok := a.Head().Pending()
		return checks(d, "alpha", "rollback") >= 1 && ok && p.Value == second && p.Expected == first
	})
	if a.Head().Hold() != nil {
		t.Fatalf("an older value from a gateway held publishing: %+v", a.Head().Hold())
	}
	if rec.count(slog.LevelWarn, "went back to an older snapshot", "agent", "alpha") == 0 {
		t.Error("no warning was logged")
	}

	// The name resolves on chain again, to the newest snapshot: the
	// pending pointer settles, and no transaction is sent for it (a retry
	// that finds the record already holding it, or the read-back, may
	// settle it: both without a write). The daemon signs with the names'
	// owner key; its nonce counts what it sent.
	if err := ch.RegisterWithResolver(t.Context(), name, w.dn.Owner(), ch.ResolverAddress()); err != nil {
		t.Fatal(err)
	}
	before, err := ch.Client().NonceAt(t.Context(), w.dn.Owner(), nil)
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the pending pointer to settle", func() bool {
		s := a.Status()
		return s.Pending == nil && s.Published == second && readPointer(t, w, name) == second
	})
	if a.Head().Hold() != nil {
		t.Errorf("held: %+v", a.Head().Hold())
	}
	after, err := ch.Client().NonceAt(t.Context(), w.dn.Owner(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("%d transactions sent after the name came back, want none (the record already held the newest)", after-before)
	}
}
