package compose

import (
	"context"
	"errors"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/ens"
)

// Pointer adapts the ENS client to what agents read and write.
func Pointer(c *ens.Client) interface {
	agent.Pointer
	agent.PointerWriter
} {
	return chainPointer{c}
}

type chainPointer struct{ c *ens.Client }

func (p chainPointer) Read(ctx context.Context, name string) (string, bool, error) {
	v, err := p.c.Read(ctx, name)
	if errors.Is(err, ens.ErrNoPointer) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return v, true, nil
}

// feeShare is the share of the kth update (in transaction order) of a
// mined transaction of n updates: the gas used split equally, the
// remainder one unit each to the first updates, so the shares add up to
// the receipt's gas used; nil when no transaction was mined.
func feeShare(r ens.UpdateResult, k int) *agent.TxFee {
	if r.TxGasUsed == 0 || r.BatchSize <= 0 {
		return nil
	}
	n := uint64(r.BatchSize)
	gas := r.TxGasUsed / n
	if uint64(k) < r.TxGasUsed%n {
		gas++
	}
	return &agent.TxFee{ChainID: r.ChainID, Gas: gas, GasPrice: r.EffectiveGasPrice, Share: 1 / float64(n)}
}

// errNotTried marks an update the writer has not reported on.
var errNotTried = errors.New("not tried")

// WritePointers publishes the updates in gas-bounded transactions, the
// first ones first, and reports one result per update.
func (p chainPointer) WritePointers(ctx context.Context, ups []agent.PointerUpdate) []agent.WriteResult {
	out := make([]agent.WriteResult, len(ups))
	in := make([]ens.Update, len(ups))
	for i, u := range ups {
		in[i] = ens.Update{Name: u.Name, Value: u.Value, Expected: u.Expected}
		out[i] = agent.WriteResult{Kind: agent.Failed, Err: errNotTried}
	}
	nth := map[common.Hash]int{} // updates of each transaction seen so far
	err := p.c.WriteBatches(ctx, in, func(r ens.UpdateResult) {
		if r.Index >= 0 && r.Index < len(out) {
			out[r.Index] = writeResult(r)
			if fee := feeShare(r, nth[r.TxHash]); fee != nil {
				nth[r.TxHash]++
				out[r.Index].Fee = fee
				if out[r.Index].Kind == agent.Written {
					out[r.Index].GasUsed = fee.Gas
				}
			}
		}
	})
	if err != nil {
		// Every update was reported before a chain-wide stop; keep the
		// cause on those that were not tried.
		for i := range out {
			if out[i].Err == errNotTried {
				out[i].Err = err
			}
		}
	}
	return out
}

func writeResult(r ens.UpdateResult) agent.WriteResult {
	switch r.Outcome {
	case ens.Published:
		return agent.WriteResult{Kind: agent.Written, TxHash: r.TxHash.Hex(), GasUsed: r.GasShare}
	case ens.Unchanged:
		return agent.WriteResult{Kind: agent.Written, Unchanged: true}
	case ens.Conflict:
		return agent.WriteResult{Kind: agent.Conflicted, Actual: r.Actual, Err: r.Err}
	case ens.NotAuthorized:
		return agent.WriteResult{Kind: agent.Unauthorized, Err: r.Err}
	}
	// NotFound, Invalid, Retry, Failed: retried later with backoff, the
	// reason in the agent's status.
	return agent.WriteResult{Kind: agent.Failed, Err: r.Err}
}
