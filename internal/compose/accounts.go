package compose

import (
	"log/slog"
	"sync"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/ledger"
	"github.com/hermesd/hermesd/internal/pointer"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
	"github.com/hermesd/hermesd/internal/walruscost"
)

// ledgers holds the cost ledger of the state directory the services'
// agents were opened on.
type ledgers struct {
	mu sync.Mutex
	l  *ledger.Ledger
}

// Ledger is the cost ledger of sd, the state directory the caller holds
// locked: every agent opened on sd records its spend there (OpenAgent).
func (s *Services) Ledger(sd *state.Dir) *ledger.Ledger {
	if s.ledgers == nil {
		return ledger.Open(sd.Path(), ledger.Options{Logger: s.Log})
	}
	s.ledgers.mu.Lock()
	defer s.ledgers.mu.Unlock()
	if s.ledgers.l == nil || s.ledgers.l.Dir() != sd.Path() {
		s.ledgers.l = ledger.Open(sd.Path(), ledger.Options{Logger: s.Log.With("component", "ledger")})
	}
	return s.ledgers.l
}

// Prices are the configuration's prices for the ledger's reports.
func Prices(c *config.Config) ledger.Prices {
	return ledger.Prices{
		Walrus: costPrice(c),
		WALUSD: c.Cost.WALUSD, ETHUSD: c.Cost.ETHUSD, SuiTxUSD: c.Cost.SuiTxUSD,
		L1: c.Chain.ChainID,
	}
}

func costPrice(c *config.Config) walruscost.Price {
	return walruscost.Price{Storage: c.Cost.WalrusStoragePrice, Write: c.Cost.WalrusWritePrice}
}

// accounts records agents' spend in a ledger (agent.Accounts,
// pointer.Accounts).
type accounts struct {
	l   *ledger.Ledger
	c   *config.Config
	log *slog.Logger
}

var (
	_ agent.Accounts   = accounts{}
	_ pointer.Accounts = accounts{}
)

func (a accounts) record(id string, s ledger.Spend) {
	if err := a.l.Record(id, s); err != nil {
		a.log.Warn("cost not recorded", "agent", id, "error", err)
	}
}

// Snapshotted records a verified snapshot and what it would have cost as
// one whole-brain blob: v1, v2 and seal store exactly that, so their blob
// is it; a v3 brain's is estimated from its files and bytes.
func (a accounts) Snapshotted(id string, r snapshot.Result) {
	size := ledger.NaiveBlobSize(r.Files, r.Bytes)
	if r.Format != snapshot.FormatV3 && r.Size > 0 {
		size = uint64(r.Size)
	}
	epochs := uint64(a.c.Walrus.Epochs)
	if ac, err := a.c.Agent(id); err == nil {
		epochs = uint64(a.c.EpochsOf(ac))
	}
	a.record(id, ledger.Snapshot(size, epochs, a.c.Cost.WalrusShards))
}

// Paid records an agent's share of a mined pointer transaction.
func (a accounts) Paid(id string, f pointer.Fee) {
	a.record(id, ledger.Tx(f.ChainID, f.Gas, f.GasPrice, f.Share))
}

// account is one agent's account in the ledger, which its pipeline's
// stores charge: the answers of its blob stores, and its packs' shares
// of the quilts they were stored in, each as the store returned it.
type account struct {
	accounts
	id string
}

// charge records one store answer's charge, or one pack's share of a
// quilt's (Charge.Patch).
func (a *account) charge(c walruscost.Charge) { a.record(a.id, ledger.Store(c)) }
