package compose

import (
	"context"
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"golang.org/x/sync/errgroup"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/ens"
)

// Pointer adapts the ENS client to what agents read and write: reads
// resolve on L1, and writes go to each name's own L1 resolver. Services'
// Pointer also writes records that live elsewhere (ens.records).
func Pointer(c *ens.Client) interface {
	agent.Pointer
	agent.PointerWriter
} {
	return chainPointer{c: c}
}

// Pointer is the services' pointer: reads resolve on L1 (what a fresh
// machine reads), and each update is written where its record lives —
// its name's own L1 resolver, or the ens.records contract its Target
// names — and, for the latter, confirmed through L1 resolution.
func (s *Services) Pointer() interface {
	agent.Pointer
	agent.PointerWriter
} {
	return chainPointer{c: s.Chain, records: s.Records}
}

type chainPointer struct {
	c       *ens.Client            // L1
	records map[string]*ens.Client // records clients by ens.records id
}

func (p chainPointer) Read(ctx context.Context, name string) (string, bool, error) {
	return readPointer(ctx, p.c, name)
}

// ResyncNonces makes every writer take its next nonce from its chain's
// pending nonce (after a chain went back, the counters are ahead of it).
func (p chainPointer) ResyncNonces() {
	p.c.ResyncNonce()
	for _, rc := range p.records {
		rc.ResyncNonce()
	}
}

func readPointer(ctx context.Context, c *ens.Client, name string) (string, bool, error) {
	v, err := c.Read(ctx, name)
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
// first ones first, and reports one result per update. Updates are
// grouped by where their record lives, in the order each place first
// appears.
func (p chainPointer) WritePointers(ctx context.Context, ups []agent.PointerUpdate) []agent.WriteResult {
	out := make([]agent.WriteResult, len(ups))
	var order []string
	groups := map[string][]int{}
	for i, u := range ups {
		out[i] = agent.WriteResult{Kind: agent.Failed, Err: errNotTried}
		if _, ok := groups[u.Target]; !ok {
			order = append(order, u.Target)
		}
		groups[u.Target] = append(groups[u.Target], i)
	}
	for _, target := range order {
		idx := groups[target]
		if target == "" {
			write(ctx, p.c, ups, idx, out)
			continue
		}
		rc := p.records[target]
		if rc == nil {
			for _, i := range idx {
				out[i].Err = fmt.Errorf("no writer for ens.records %s (a read-only configuration?)", target)
			}
			continue
		}
		write(ctx, rc, ups, idx, out)
		p.confirm(ctx, ups, idx, out)
	}
	return out
}

// write publishes ups[idx] through c into out[idx].
func write(ctx context.Context, c *ens.Client, ups []agent.PointerUpdate, idx []int, out []agent.WriteResult) {
	in := make([]ens.Update, len(idx))
	for j, i := range idx {
		u := ups[i]
		in[j] = ens.Update{Name: u.Name, Value: u.Value, Expected: u.Expected}
	}
	nth := map[common.Hash]int{} // updates of each transaction seen so far
	err := c.WriteBatches(ctx, in, func(r ens.UpdateResult) {
		if r.Index >= 0 && r.Index < len(idx) {
			o := &out[idx[r.Index]]
			*o = writeResult(r)
			if fee := feeShare(r, nth[r.TxHash]); fee != nil {
				nth[r.TxHash]++
				o.Fee = fee
				o.GasUsed = fee.Gas // the exact share
			}
		}
	})
	if err != nil {
		// Every update was reported before a chain-wide stop; keep the
		// cause on those that were not tried.
		for _, i := range idx {
			if out[i].Err == errNotTried {
				out[i].Err = err
			}
		}
	}
}

// confirmConcurrency bounds the L1 resolutions of one confirmation.
const confirmConcurrency = 8

// confirm reads every update written where its record lives (not on L1)
// back through L1 resolution, as a fresh machine would: one that L1 does
// not show yet is NotVisible, with what L1 shows, or why it could not be
// read (docs/design.md §7.2).
func (p chainPointer) confirm(ctx context.Context, ups []agent.PointerUpdate, idx []int, out []agent.WriteResult) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(confirmConcurrency)
	for _, i := range idx {
		if out[i].Kind != agent.Written {
			continue
		}
		g.Go(func() error {
			r := &out[i]
			res, err := p.c.Resolve(gctx, ups[i].Name)
			switch {
			case err != nil:
				r.Kind, r.Err = agent.NotVisible, fmt.Errorf("read back through L1: %w", err)
			case res.Value != ups[i].Value:
				r.Kind, r.Seen, r.SeenOK = agent.NotVisible, res.Value, true
			}
			return nil
		})
	}
	g.Wait()
}

func writeResult(r ens.UpdateResult) agent.WriteResult {
	switch r.Outcome {
	case ens.Published:
		return agent.WriteResult{Kind: agent.Written, TxHash: r.TxHash.Hex(), GasUsed: r.GasShare,
			Block: r.BlockNumber, ChainID: r.ChainID, EffectiveGasPrice: r.EffectiveGasPrice}
	case ens.Unchanged:
		return agent.WriteResult{Kind: agent.Written, Unchanged: true, ChainID: r.ChainID}
	case ens.Conflict:
		return agent.WriteResult{Kind: agent.Conflicted, Actual: r.Actual, Err: r.Err}
	case ens.NotAuthorized:
		return agent.WriteResult{Kind: agent.Unauthorized, Err: r.Err}
	}
	// NotFound, Invalid, Retry, Failed: retried later with backoff, the
	// reason in the agent's status. A mined transaction that failed still
	// cost its gas.
	res := agent.WriteResult{Kind: agent.Failed, Err: r.Err}
	if r.TxHash != (common.Hash{}) {
		res.TxHash, res.Block, res.ChainID, res.GasUsed, res.EffectiveGasPrice = r.TxHash.Hex(), r.BlockNumber, r.ChainID, r.GasShare, r.EffectiveGasPrice
	}
	return res
}

// recordPointer reads a record where it lives (a records client: its
// records contract), for resolving a hold against what is there.
type recordPointer struct{ c *ens.Client }

func (p recordPointer) Read(ctx context.Context, name string) (string, bool, error) {
	return readPointer(ctx, p.c, name)
}
