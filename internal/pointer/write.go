package pointer

import (
	"context"
	"errors"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/ens"
)

// Chain writes records where they live by compare-and-set, in
// gas-bounded (multicall) transactions: an *ens.Client, the L1's for
// records on L1, an ens.records client for its contract.
type Chain interface {
	WriteBatches(ctx context.Context, updates []ens.Update, each func(ens.UpdateResult)) error
	// ResyncNonce makes the next transaction take its nonce from the
	// chain's pending nonce (after a chain went back, the counter is
	// ahead of it).
	ResyncNonce()
}

// Update is one compare-and-set of an agent's record.
type Update struct {
	Name  string // normalized ENS name
	Value string
	// Expected is what the record must hold now ("" = no record).
	Expected string
}

// Kind classifies what one write did.
type Kind int

const (
	// Wrote: the record holds Value now where it lives (Tx.Hash "": it
	// did already; nothing was sent).
	Wrote Kind = iota + 1
	// Conflict: the record held Actual, not Expected; nothing was sent.
	Conflict
	// NotAuthorized: the signer may not write the name (moved to another
	// owner, or the resolver's approval withdrawn); nothing was sent.
	NotAuthorized
	// WriteFailed: anything else (the chain unreachable, a fee cap, a
	// timeout, a revert); worth retrying later.
	WriteFailed
)

// Tx is the transaction that carried an update.
type Tx struct {
	Hash    string // "" when none was sent
	Block   uint64
	ChainID uint64 // of the record's chain (0 when not reached)
	Gas     uint64 // this update's share of the gas used (Fee.Gas)
	Batch   int    // the updates in the transaction
}

// Written is what became of one update.
type Written struct {
	Kind   Kind
	Actual string // Conflict: the record's value where it lives
	Tx     Tx
	// Fee is this update's share of a mined transaction — one that set
	// the record, or one that reverted, which is paid for all the same;
	// nil when no transaction of it was mined.
	Fee *Fee
	Err error // every kind but Wrote
}

// errNotTried marks an update the chain has not reported on.
var errNotTried = errors.New("not tried")

// Write sends ups to c, the first ones first, in as few transactions as
// the chain's gas limit allows, and returns one result per update, with
// each mined transaction's fee split among its updates.
func Write(ctx context.Context, c Chain, ups []Update) []Written {
	out := make([]Written, len(ups))
	in := make([]ens.Update, len(ups))
	for i, u := range ups {
		out[i] = Written{Kind: WriteFailed, Err: errNotTried}
		in[i] = ens.Update{Name: u.Name, Value: u.Value, Expected: u.Expected}
	}
	nth := map[common.Hash]int{} // updates of each transaction seen so far
	err := c.WriteBatches(ctx, in, func(r ens.UpdateResult) {
		if r.Index < 0 || r.Index >= len(out) {
			return
		}
		w := written(r)
		if fee := split(r, nth[r.TxHash]); fee != nil {
			nth[r.TxHash]++
			w.Fee, w.Tx.Gas = fee, fee.Gas
		}
		out[r.Index] = w
	})
	if err != nil {
		// Every update was reported before a chain-wide stop; keep the
		// cause on those that were not.
		for i := range out {
			if out[i].Err == errNotTried {
				out[i].Err = err
			}
		}
	}
	return out
}

// written classifies one result of the chain.
func written(r ens.UpdateResult) Written {
	w := Written{Tx: Tx{ChainID: r.ChainID}}
	if r.TxHash != (common.Hash{}) {
		w.Tx.Hash, w.Tx.Block, w.Tx.Batch = r.TxHash.Hex(), r.BlockNumber, r.BatchSize
	}
	switch r.Outcome {
	case ens.Published, ens.Unchanged:
		w.Kind = Wrote
	case ens.Conflict:
		w.Kind, w.Actual, w.Err = Conflict, r.Actual, r.Err
	case ens.NotAuthorized:
		w.Kind, w.Err = NotAuthorized, r.Err
	default:
		// NotFound, Invalid, Retry, Failed: retried later with backoff,
		// the reason in the agent's status. A mined transaction that
		// failed still cost its gas.
		w.Kind, w.Err = WriteFailed, r.Err
	}
	return w
}

// split is the fee share of the kth update (in transaction order) of a
// mined transaction: its gas used split equally among its BatchSize
// updates, the remainder one unit each to the first, so the shares add up
// to the receipt's gas used; nil when no transaction was mined. It is the
// one place the split is computed.
func split(r ens.UpdateResult, k int) *Fee {
	if r.TxGasUsed == 0 || r.BatchSize <= 0 {
		return nil
	}
	n := uint64(r.BatchSize)
	gas := r.TxGasUsed / n
	if uint64(k) < r.TxGasUsed%n {
		gas++
	}
	return &Fee{ChainID: r.ChainID, Gas: gas, GasPrice: r.EffectiveGasPrice, Share: 1 / float64(n)}
}
