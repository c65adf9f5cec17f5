package ens

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi/bind"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"golang.org/x/sync/errgroup"
)

// Update is one compare-and-set for WriteMany.
type Update struct {
	Name     string
	Value    string
	Expected string // the value the record must hold now ("" = no record)
}

// TxResult describes the transaction a write sent.
type TxResult struct {
	// Unchanged: every record already held its new value; nothing was
	// sent and the other fields are zero.
	Unchanged bool
	// Names are the normalised names the transaction wrote (or, when
	// Unchanged, would have written).
	Names             []string
	TxHash            common.Hash
	BlockNumber       uint64
	GasUsed           uint64
	EffectiveGasPrice *big.Int
}

// Write sets name's agent-snapshot record to value if it currently holds
// expected (compare-and-set):
//   - the record already holds value: no transaction, Unchanged result
//     (so a retry after an ambiguous failure is harmless);
//   - it holds anything else but expected: *ConflictError, nothing sent;
//   - the signer is neither the registry owner nor authorised on the
//     resolver: *NotAuthorizedError, nothing sent;
//   - otherwise setText(node, "agent-snapshot", value) goes to the name's
//     own resolver and Write waits up to TxTimeout for the receipt; status 0
//     is a *RevertError. On a timeout the result still carries TxHash and
//     the error wraps context.DeadlineExceeded.
//
// The record can still change between the read and the transaction (see
// the package doc); the next compare-and-set notices.
func (c *Client) Write(ctx context.Context, name, value, expected string) (TxResult, error) {
	return c.write(ctx, []Update{{Name: name, Value: value, Expected: expected}})
}

// WriteMany is Write for several names in one multicall transaction on
// their common resolver. All names must have the same resolver (otherwise
// ErrMixedResolvers: group them per resolver and call WriteMany per group,
// since one transaction can only go to one contract). The checks are all
// done before anything is sent: any conflict, missing name or missing
// authorisation fails the whole batch, with every offending name reported.
// Names that already hold their value are left out of the transaction.
func (c *Client) WriteMany(ctx context.Context, updates []Update) (TxResult, error) {
	return c.write(ctx, updates)
}

// pendingWrite is one update with what the chain says about its name.
type pendingWrite struct {
	Update
	rec       Record
	current   string
	authKnown bool // owner or explicitly authorised
	err       error
}

// lookupConcurrency bounds parallel eth_calls of a batch.
const lookupConcurrency = 8

func (c *Client) write(ctx context.Context, updates []Update) (TxResult, error) {
	if c.signer == nil {
		return TxResult{}, ErrReadOnly
	}
	if len(updates) == 0 {
		return TxResult{}, errors.New("ens: no updates")
	}
	items := make([]*pendingWrite, len(updates))
	seen := make(map[string]bool, len(updates))
	for i, u := range updates {
		norm, err := Normalize(u.Name)
		if err != nil {
			return TxResult{}, err
		}
		if seen[norm] {
			return TxResult{}, fmt.Errorf("ens: %s appears twice in one batch", norm)
		}
		seen[norm] = true
		items[i] = &pendingWrite{Update: u}
		items[i].Name = norm
	}

	// Read everything first; nothing is sent unless every check passes.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(lookupConcurrency)
	for _, it := range items {
		g.Go(func() error {
			it.err = c.inspect(gctx, it)
			if it.err != nil && ctx.Err() != nil {
				return it.err
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return TxResult{}, err
	}
	var errs []error
	for _, it := range items {
		if it.err != nil {
			errs = append(errs, it.err)
		}
	}
	if len(errs) > 0 {
		return TxResult{}, joinErrs(errs)
	}
	resolverAddr := items[0].rec.Resolver
	for _, it := range items[1:] {
		if it.rec.Resolver != resolverAddr {
			var b strings.Builder
			for _, it := range items {
				fmt.Fprintf(&b, " %s→%s", it.Name, it.rec.Resolver)
			}
			return TxResult{}, fmt.Errorf("%w (one transaction per resolver):%s", ErrMixedResolvers, b.String())
		}
	}

	var todo []*pendingWrite
	names := make([]string, 0, len(items))
	for _, it := range items {
		names = append(names, it.Name)
		switch {
		case it.current == it.Value:
			// Already there: idempotent.
		case it.current != it.Expected:
			errs = append(errs, &ConflictError{Name: it.Name, Expected: it.Expected, Actual: it.current})
		default:
			todo = append(todo, it)
		}
	}
	if len(errs) > 0 {
		return TxResult{}, joinErrs(errs)
	}
	if len(todo) == 0 {
		c.log.DebugContext(ctx, "ens: records already up to date", "names", names)
		return TxResult{Unchanged: true, Names: names}, nil
	}

	// Authorisation: owner or 0.3.1-style authorisation are known;
	// anything else is decided by simulating the name's own setText.
	calls := make([][]byte, len(todo))
	for i, it := range todo {
		data, err := resolverABI.Pack("setText", it.rec.Node, TextKey, it.Value)
		if err != nil {
			return TxResult{}, fmt.Errorf("ens: pack setText: %w", err)
		}
		calls[i] = data
		if it.authKnown {
			continue
		}
		_, err = c.backend.EstimateGas(ctx, ethereum.CallMsg{From: c.signer.Address(), To: &resolverAddr, Data: data})
		switch {
		case err == nil:
			c.log.DebugContext(ctx, "ens: signer authorised by the resolver's own rules", "name", it.Name, "owner", it.rec.Owner)
		case isRevert(err):
			errs = append(errs, &NotAuthorizedError{Name: it.Name, Owner: it.rec.Owner, Signer: c.signer.Address(), Resolver: resolverAddr})
		default:
			return TxResult{}, fmt.Errorf("ens: check authorisation on %s: %w", it.Name, err)
		}
	}
	if len(errs) > 0 {
		return TxResult{}, joinErrs(errs)
	}

	todoNames := make([]string, len(todo))
	for i, it := range todo {
		todoNames[i] = it.Name
	}
	data := calls[0]
	if len(calls) > 1 {
		var err error
		if data, err = multicallABI.Pack("multicall", calls); err != nil {
			return TxResult{}, fmt.Errorf("ens: pack multicall: %w", err)
		}
	}
	return c.transact(ctx, resolverAddr, data, todoNames)
}

// inspect fills in it.rec, it.current and it.authKnown.
func (c *Client) inspect(ctx context.Context, it *pendingWrite) error {
	rec, err := c.Lookup(ctx, it.Name)
	if err != nil {
		return err
	}
	it.rec = rec
	if rec.Owner == (common.Address{}) {
		return fmt.Errorf("%w: %s", ErrNameNotFound, rec.Name)
	}
	if rec.Resolver == (common.Address{}) {
		return fmt.Errorf("%w for %s (owned by %s): set a resolver first", ErrNoResolver, rec.Name, rec.Owner)
	}
	if it.current, err = c.text(ctx, rec); err != nil {
		return err
	}
	if rec.Owner == c.signer.Address() {
		it.authKnown = true
		return nil
	}
	r, err := c.resolver(rec.Resolver)
	if err != nil {
		return err
	}
	// A resolver without authorisations() (e.g. the NameWrapper-era one)
	// fails this call; the gas estimate decides then.
	ok, err := r.Authorisations(&bind.CallOpts{Context: ctx}, rec.Node, rec.Owner, c.signer.Address())
	it.authKnown = err == nil && ok
	return nil
}

// transact estimates, prices, signs, sends and waits for one transaction.
func (c *Client) transact(ctx context.Context, to common.Address, data []byte, names []string) (TxResult, error) {
	from := c.signer.Address()
	est, err := c.backend.EstimateGas(ctx, ethereum.CallMsg{From: from, To: &to, Data: data})
	if err != nil {
		if isRevert(err) {
			return TxResult{}, &RevertError{Names: names, Simulated: true, Cause: err}
		}
		return TxResult{}, fmt.Errorf("ens: estimate gas: %w", err)
	}
	gas := est + est/10 // estimates are ~1% above use; 10% covers state drift
	if gas > c.gasCap {
		if est > c.gasCap {
			return TxResult{}, fmt.Errorf("%w: %v need an estimated %d gas, cap is %d", ErrGasCap, names, est, c.gasCap)
		}
		gas = c.gasCap
	}
	if c.fixedGas != 0 {
		gas = c.fixedGas
	}
	tip, feeCap, err := c.fees(ctx)
	if err != nil {
		return TxResult{}, err
	}
	if c.beforeSend != nil {
		c.beforeSend()
	}
	signer := types.LatestSignerForChainID(c.chainID)
	tx, err := c.nonces.send(ctx, c.backend, from, func(nonce uint64) (*types.Transaction, error) {
		tx, err := types.SignNewTx(c.signer.key, signer, &types.DynamicFeeTx{
			ChainID:   c.chainID,
			Nonce:     nonce,
			GasTipCap: tip,
			GasFeeCap: feeCap,
			Gas:       gas,
			To:        &to,
			Data:      data,
		})
		if err != nil {
			return nil, fmt.Errorf("ens: sign transaction: %w", err)
		}
		return tx, nil
	})
	if err != nil {
		return TxResult{}, err
	}
	c.log.InfoContext(ctx, "ens: pointer transaction sent", "names", names, "tx", tx.Hash(), "nonce", tx.Nonce(), "gas", gas, "max_fee", feeCap, "tip", tip)
	res, err := c.wait(ctx, tx.Hash(), names, gas)
	if err == nil {
		c.log.InfoContext(ctx, "ens: pointer transaction mined", "names", names, "tx", res.TxHash, "block", res.BlockNumber, "gas_used", res.GasUsed)
	}
	return res, err
}

// WaitTx waits (up to TxTimeout) for a transaction this client sent earlier,
// e.g. after Write timed out, and reports it like Write.
func (c *Client) WaitTx(ctx context.Context, hash common.Hash) (TxResult, error) {
	return c.wait(ctx, hash, nil, 0)
}

func (c *Client) wait(ctx context.Context, hash common.Hash, names []string, gasLimit uint64) (TxResult, error) {
	res := TxResult{Names: names, TxHash: hash}
	r, err := c.waitReceipt(ctx, hash)
	if err != nil {
		if c.nonces != nil {
			c.nonces.invalidate()
		}
		return res, err
	}
	res.BlockNumber = r.BlockNumber.Uint64()
	res.GasUsed = r.GasUsed
	res.EffectiveGasPrice = r.EffectiveGasPrice
	if r.Status != types.ReceiptStatusSuccessful {
		return res, &RevertError{Names: names, TxHash: hash, BlockNumber: res.BlockNumber, GasUsed: r.GasUsed, GasLimit: gasLimit}
	}
	return res, nil
}

// waitReceipt polls for the receipt: first after PollInterval/8, backing off
// to PollInterval. Node errors are retried until the timeout (public
// endpoints fail transiently); the last one is reported.
func (c *Client) waitReceipt(ctx context.Context, hash common.Hash) (*types.Receipt, error) {
	wctx, cancel := context.WithTimeout(ctx, c.txTimeout)
	defer cancel()
	delay := max(c.poll/8, time.Millisecond)
	t := time.NewTimer(delay)
	defer t.Stop()
	var lastErr error
	for {
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return nil, fmt.Errorf("ens: wait for transaction %s: %w", hash, ctx.Err())
			}
			if lastErr != nil {
				return nil, fmt.Errorf("ens: transaction %s not mined within %s (last error: %v): %w", hash, c.txTimeout, lastErr, context.DeadlineExceeded)
			}
			return nil, fmt.Errorf("ens: transaction %s not mined within %s: %w", hash, c.txTimeout, context.DeadlineExceeded)
		case <-t.C:
		}
		r, err := c.backend.TransactionReceipt(wctx, hash)
		switch {
		case err == nil && r != nil:
			return r, nil
		case err != nil && !errors.Is(err, ethereum.NotFound) && !strings.Contains(err.Error(), "indexing is in progress") && wctx.Err() == nil:
			lastErr = err
			c.log.DebugContext(ctx, "ens: receipt poll failed", "tx", hash, "err", err)
		}
		delay = min(2*delay, c.poll)
		t.Reset(delay)
	}
}

// fees: tip from eth_maxPriorityFeePerGas, fee cap = tip + 2×base fee,
// both clipped to MaxFeePerGas.
func (c *Client) fees(ctx context.Context) (tip, feeCap *big.Int, err error) {
	head, err := c.backend.HeaderByNumber(ctx, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("ens: latest header: %w", err)
	}
	if head.BaseFee == nil {
		return nil, nil, errors.New("ens: the chain has no EIP-1559 base fee")
	}
	tip, err = c.backend.SuggestGasTipCap(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("ens: eth_maxPriorityFeePerGas: %w", err)
	}
	feeCap = new(big.Int).Mul(head.BaseFee, big.NewInt(2))
	feeCap.Add(feeCap, tip)
	if c.maxFee != nil {
		if head.BaseFee.Cmp(c.maxFee) > 0 {
			return nil, nil, &feeError{baseFee: head.BaseFee, maxFee: c.maxFee}
		}
		if feeCap.Cmp(c.maxFee) > 0 {
			feeCap = new(big.Int).Set(c.maxFee)
		}
		if tip.Cmp(feeCap) > 0 {
			tip = new(big.Int).Set(feeCap)
		}
	}
	return tip, feeCap, nil
}

// isRevert matches a node's "execution reverted" (with or without reason).
func isRevert(err error) bool {
	return strings.Contains(err.Error(), "execution reverted")
}
