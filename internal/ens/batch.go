package ens

import (
	"context"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
)

// Outcome is what became of one update of WriteBatches.
type Outcome uint8

const (
	// Published: a mined transaction set the record to Value.
	Published Outcome = iota + 1
	// Unchanged: the record already held Value; nothing was sent for it.
	Unchanged
	// Conflict: the record holds Actual, neither Expected nor Value;
	// nothing was sent for it (Err is a *ConflictError).
	Conflict
	// NotAuthorized: the signer may not set the name's records; nothing
	// was sent for it (Err is a *NotAuthorizedError).
	NotAuthorized
	// NotFound: the name is not in the registry (ErrNameNotFound) or has
	// no resolver (ErrNoResolver).
	NotFound
	// Invalid: ENSIP-15 rejects the name (ErrInvalidName), or the name
	// appears twice in the call.
	Invalid
	// Retry: the update could not be done now, for a reason that passes:
	// the chain is unreachable (ErrUnavailable), the base fee is above
	// MaxFeePerGas (ErrFeeTooHigh), the transaction was not mined within
	// TxTimeout (context.DeadlineExceeded), or the caller's context ended.
	// Sending it again is safe: a record that meanwhile holds Value comes
	// back Unchanged.
	Retry
	// Failed: definitive for this attempt: the transaction reverted
	// (*RevertError), the update alone needs more than GasCap (ErrGasCap),
	// the node refused the transaction, the chain is not the configured
	// one (ErrWrongChain, ErrNoRegistry), or the client is read-only
	// (ErrReadOnly).
	Failed
)

var outcomeNames = [...]string{"", "published", "unchanged", "conflict", "not_authorized", "not_found", "invalid", "retry", "failed"}

// String is a short lower-case name, fit for a log field or metric label.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) && o != 0 {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// UpdateResult is the outcome of one update of WriteBatches.
type UpdateResult struct {
	// Index is the update's position in the slice passed.
	Index int
	// Update is the update as passed, its Name normalised when valid.
	Update  Update
	Outcome Outcome
	// Actual is the record's value on chain ("" = none) for Conflict: a
	// caller tells a rollback of its own from a foreign writer by it.
	Actual string
	// TxHash is the transaction that carried the update: set for
	// Published, for a Failed whose transaction was mined and reverted, and
	// for a Retry whose transaction was sent or may have been (it may
	// still be mined; WaitTx tells, and a retry meanwhile at worst writes
	// the same value twice).
	TxHash common.Hash
	// BlockNumber is the block of a mined transaction.
	BlockNumber uint64
	// BatchSize is the number of updates in the transaction (how its gas
	// is split among them is the caller's: internal/pointer).
	BatchSize int
	// ChainID is the chain of the update's record (0 when the client
	// could not reach its node). TxGasUsed and EffectiveGasPrice are the
	// mined transaction's receipt's (published or reverted: either way it
	// was paid for); zero and nil when none was mined. The updates of one
	// transaction are reported in the order they are in it, so a caller
	// can split its fee exactly.
	ChainID           uint64
	TxGasUsed         uint64
	EffectiveGasPrice *big.Int
	// Err says why, for every outcome but Published and Unchanged.
	Err error
}

// minUpdateGas is less than any setText of a changed value costs; the
// first batch is sized as if updates cost this, so that its estimate
// covers more than fits and is cut down in proportion.
const minUpdateGas = 10_000

// WriteBatches publishes many compare-and-set updates, in as few
// transactions as GasCap allows, and reports every update's outcome to each
// exactly once: first those the checks settle (Unchanged, Conflict,
// NotAuthorized, NotFound, Invalid), in the order given, then those of each
// transaction as it is mined. each runs on the calling goroutine and the
// next transaction waits for it.
//
// Every name is checked first, as by WriteMany, lookupConcurrency at a
// time. The updates left are sent in the order given: each transaction
// takes the next updates for the first one's resolver, as many as the gas
// estimate puts within GasCap with a margin (and at most MaxBatch), so a
// caller that orders by urgency publishes the most urgent first. Before
// each transaction after the first, its records are read again, so that a
// long run does not overwrite a record changed since the checks. A batch
// whose estimate is above the cap, or reverts as a multicall too large for
// the node's own estimate does, is split; a "would revert" is reported only
// for a single update.
//
// A failure of one transaction (a revert, the node refusing it) fails its
// updates and the run goes on with the next. A condition of the chain (it
// is unreachable, the base fee is above MaxFeePerGas, a transaction is not
// mined within TxTimeout, ctx is done) stops the run: the updates not yet
// done are reported Retry without being tried, and WriteBatches returns
// that error. It also returns the error that kept it from starting
// (ErrReadOnly, ErrWrongChain, ErrNoRegistry, ErrUnavailable), after
// reporting every update. A nil error means every update was tried.
func (c *Client) WriteBatches(ctx context.Context, updates []Update, each func(UpdateResult)) error {
	items := prepare(updates)
	reported := make([]bool, len(items))
	var chainID uint64 // known once set up
	emit := func(it *pendingWrite, tx *TxResult, size int) {
		if reported[it.index] {
			return
		}
		reported[it.index] = true
		r := UpdateResult{Index: it.index, Update: it.Update, Outcome: it.outcome, Err: it.err, ChainID: chainID}
		if it.outcome == Conflict {
			r.Actual = it.onChain
		}
		if tx != nil {
			r.TxHash, r.BlockNumber, r.BatchSize = tx.TxHash, tx.BlockNumber, size
			if tx.EffectiveGasPrice != nil {
				r.EffectiveGasPrice = new(big.Int).Set(tx.EffectiveGasPrice)
			}
			r.TxGasUsed = tx.GasUsed // a reverted transaction costs gas too
		}
		if each != nil {
			each(r)
		}
	}
	emitSettled := func(items []*pendingWrite) {
		for _, it := range items {
			if it.outcome != 0 {
				emit(it, nil, 0)
			}
		}
	}
	// stop settles what is left by err and returns err.
	stop := func(err error) error {
		o := Failed
		if retryable(err) {
			o = Retry
		}
		for _, it := range items {
			if it.outcome == 0 {
				it.settle(o, err)
			}
		}
		emitSettled(items)
		return err
	}

	if c.signer == nil {
		return stop(ErrReadOnly)
	}
	ci, err := c.setup(ctx)
	if err != nil {
		return stop(err)
	}
	chainID = ci.id.Uint64()
	if err := c.check(ctx, items); err != nil {
		return stop(err)
	}
	emitSettled(items)

	budget := c.gasCap - c.gasCap/11 // leave transact's 10% margin
	guess := c.batchGuess(budget, minUpdateGas)
	for sent := 0; ; {
		queue := unsettled(items)
		if len(queue) == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return stop(fmt.Errorf("ens: %w", ctx.Err()))
		}
		to := queue[0].rec.Resolver
		limit := guess
		if mc, err := c.hasMulticall(ctx, to); err != nil {
			return stop(err)
		} else if !mc {
			limit = 1
		}
		var group []*pendingWrite
		for _, it := range queue {
			if it.rec.Resolver == to && len(group) < limit {
				group = append(group, it)
			}
		}
		if sent > 0 {
			if err := c.recheck(ctx, group); err != nil {
				return stop(err)
			}
			emitSettled(group)
			if group = unsettled(group); len(group) == 0 {
				continue
			}
		}
		n, est, data, err := c.fit(ctx, to, group, limit, budget)
		if err != nil {
			if chainWide(err) {
				return stop(err)
			}
			group[0].settle(Failed, err)
			emit(group[0], nil, 0)
			continue
		}
		batch := group[:n]
		res, err := c.transact(ctx, ci, to, data, est, namesOf(batch), "pointer")
		sent++
		guess = c.batchGuess(budget, (max(est, txGas+1)-txGas+uint64(n)-1)/uint64(n))
		outcome := Published
		switch {
		case err == nil:
		case retryable(err):
			outcome = Retry
		default:
			outcome = Failed
		}
		var tx *TxResult
		if res.TxHash != (common.Hash{}) {
			tx = &res
		}
		for _, it := range batch {
			it.settle(outcome, err)
			emit(it, tx, n)
		}
		if outcome == Retry {
			return stop(err)
		}
	}
}

// txGas is the intrinsic gas of any transaction, the part of an estimate
// that does not grow with the batch.
const txGas = 21_000

// batchGuess is how many updates of perUpdate gas fit in budget, at least
// one and at most MaxBatch.
func (c *Client) batchGuess(budget, perUpdate uint64) int {
	g := max(1, (budget-min(budget, txGas))/max(perUpdate, 1))
	if c.maxBatch > 0 {
		g = min(g, uint64(c.maxBatch))
	}
	return int(min(g, maxTxData)) // a bound that any real batch is far below
}

// retryable reports an error that passes with time: chain-wide ones, a
// base fee above the cap, a transaction not mined in time.
func retryable(err error) bool {
	return chainWide(err) || errors.Is(err, ErrFeeTooHigh) || errors.Is(err, ErrTxDropped)
}
