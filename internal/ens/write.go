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

// Update is one compare-and-set for WriteMany and WriteBatches.
type Update struct {
	Name     string
	Value    string
	Expected string // the value the record must hold now ("" = no record)
}

// TxResult describes the transaction a write sent.
type TxResult struct {
	// Unchanged: every record already held its new value (or, for
	// Transfer, the name already had the new owner); nothing was sent and
	// the other fields but Names are zero.
	Unchanged bool
	// Names are the normalised names the transaction wrote (or, when
	// Unchanged, would have written).
	Names       []string
	TxHash      common.Hash
	BlockNumber uint64
	// ChainID is the chain the transaction was sent on; GasUsed and
	// EffectiveGasPrice are its receipt's (what it cost: their product,
	// in wei of that chain).
	ChainID           uint64
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
// A node that cannot be reached makes an error matching ErrUnavailable.
// The record can still change between the read and the transaction (see
// the package doc); the next compare-and-set notices.
func (c *Client) Write(ctx context.Context, name, value, expected string) (TxResult, error) {
	return c.WriteMany(ctx, []Update{{Name: name, Value: value, Expected: expected}})
}

// WriteMany is Write for several names in one multicall transaction on
// their common resolver. All names must have the same resolver (otherwise
// ErrMixedResolvers). The checks are all done before anything is sent: any
// conflict, missing name or missing authorisation fails the whole batch,
// with every offending name reported. Names that already hold their value
// are left out of the transaction. Updates that do not fit in one
// transaction under GasCap fail with ErrGasCap; WriteBatches splits them.
func (c *Client) WriteMany(ctx context.Context, updates []Update) (TxResult, error) {
	if c.signer == nil {
		return TxResult{}, ErrReadOnly
	}
	if len(updates) == 0 {
		return TxResult{}, errors.New("ens: no updates")
	}
	items := prepare(updates)
	for _, it := range items {
		if it.outcome != 0 {
			return TxResult{}, it.err
		}
	}
	ci, err := c.setup(ctx)
	if err != nil {
		return TxResult{}, err
	}
	if err := c.check(ctx, items); err != nil {
		return TxResult{}, err
	}
	var errs []error
	for _, it := range items {
		if it.outcome != 0 && it.outcome != Unchanged {
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
	todo := unsettled(items)
	if len(todo) == 0 {
		names := namesOf(items)
		c.log.DebugContext(ctx, "ens: records already up to date", "names", names)
		return TxResult{Unchanged: true, Names: names}, nil
	}
	if len(todo) > 1 {
		mc, err := c.hasMulticall(ctx, resolverAddr)
		if err != nil {
			return TxResult{}, err
		}
		if !mc {
			return TxResult{}, fmt.Errorf("%w: %s cannot take %d updates in one transaction; WriteBatches sends them one by one", ErrNoMulticall, resolverAddr, len(todo))
		}
	}
	n, est, data, err := c.fit(ctx, resolverAddr, todo, len(todo), c.gasCap)
	if err != nil {
		return TxResult{}, err
	}
	if n < len(todo) {
		return TxResult{}, fmt.Errorf("%w: %d updates do not fit in one transaction of at most %d gas (about %d do); WriteBatches splits them",
			ErrGasCap, len(todo), c.gasCap, n)
	}
	return c.transact(ctx, ci, resolverAddr, data, est, namesOf(todo), "pointer")
}

// pendingWrite is one update with what the chain says about its name.
type pendingWrite struct {
	Update    // Name normalised
	index     int
	rec       Record
	onChain   string // the record's value at the last check
	authKnown bool   // owner or explicitly authorised
	outcome   Outcome
	err       error
}

func (it *pendingWrite) settle(o Outcome, err error) { it.outcome, it.err = o, err }

// failed settles the item as Failed for an error about it, and returns an
// error about the chain (unreachable, context done) for the caller to stop
// on, leaving the item unsettled.
func (it *pendingWrite) failed(err error) error {
	if chainWide(err) {
		return err
	}
	it.settle(Failed, err)
	return nil
}

// compare settles the item by the record's current value: Unchanged when it
// holds the new value, Conflict when it holds anything but the expected
// one.
func (it *pendingWrite) compare(onChain string) {
	it.onChain = onChain
	switch {
	case onChain == it.Value:
		it.settle(Unchanged, nil)
	case onChain != it.Expected:
		it.settle(Conflict, &ConflictError{Name: it.Name, Expected: it.Expected, Actual: onChain})
	}
}

// prepare normalises the names; an invalid or repeated name is settled as
// Invalid.
func prepare(updates []Update) []*pendingWrite {
	items := make([]*pendingWrite, len(updates))
	seen := make(map[string]bool, len(updates))
	for i, u := range updates {
		it := &pendingWrite{Update: u, index: i}
		items[i] = it
		norm, err := Normalize(u.Name)
		switch {
		case err != nil:
			it.settle(Invalid, err)
		case seen[norm]:
			it.Name = norm
			it.settle(Invalid, fmt.Errorf("ens: %s appears twice in one batch", norm))
		default:
			it.Name = norm
			seen[norm] = true
		}
	}
	return items
}

func unsettled(items []*pendingWrite) []*pendingWrite {
	var out []*pendingWrite
	for _, it := range items {
		if it.outcome == 0 {
			out = append(out, it)
		}
	}
	return out
}

func namesOf(items []*pendingWrite) []string {
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = it.Name
	}
	return names
}

// lookupConcurrency bounds parallel eth_calls of a batch.
const lookupConcurrency = 8

// check inspects every unsettled item, lookupConcurrency at a time, and
// settles those that cannot or need not be written. An error about the
// chain stops the rest and is returned; the items it stopped stay
// unsettled.
func (c *Client) check(ctx context.Context, items []*pendingWrite) error {
	return forEach(ctx, unsettled(items), c.inspect)
}

// recheck reads the records of items again right before they are sent,
// which keeps the compare-and-set window of a long run to one batch.
func (c *Client) recheck(ctx context.Context, items []*pendingWrite) error {
	return forEach(ctx, items, func(ctx context.Context, it *pendingWrite) error {
		v, err := c.valueForWrite(ctx, it.Name)
		if err != nil {
			return it.failed(err)
		}
		it.compare(v)
		return nil
	})
}

func forEach(ctx context.Context, items []*pendingWrite, f func(context.Context, *pendingWrite) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(lookupConcurrency)
	for _, it := range items {
		g.Go(func() error { return f(gctx, it) })
	}
	return g.Wait()
}

// inspect reads what the chain says about it.Name and settles it unless it
// is to be written: not found, unchanged, conflict, not authorised.
func (c *Client) inspect(ctx context.Context, it *pendingWrite) error {
	if c.records != (common.Address{}) {
		return c.inspectRecords(ctx, it)
	}
	rec, err := c.lookup(ctx, it.Name)
	if err != nil {
		return it.failed(err)
	}
	it.rec = rec
	switch {
	case rec.Owner == (common.Address{}):
		it.settle(NotFound, fmt.Errorf("%w: %s", ErrNameNotFound, rec.Name))
		return nil
	case rec.Resolver == (common.Address{}):
		it.settle(NotFound, fmt.Errorf("%w for %s (owned by %s): set a resolver first", ErrNoResolver, rec.Name, rec.Owner))
		return nil
	}
	v, err := c.valueForWrite(ctx, it.Name)
	if err != nil {
		return it.failed(err)
	}
	if it.compare(v); it.outcome != 0 {
		return nil
	}
	if rec.Owner == c.signer.Address() {
		it.authKnown = true
		return nil
	}
	r, err := c.resolver(rec.Resolver)
	if err != nil {
		return it.failed(err)
	}
	// A resolver without authorisations() (e.g. the NameWrapper-era one)
	// fails this call; the gas estimate decides then.
	ok, err := r.Authorisations(&bind.CallOpts{Context: ctx}, rec.Node, rec.Owner, c.signer.Address())
	if err != nil && chainWide(err) {
		return err
	}
	if it.authKnown = err == nil && ok; it.authKnown {
		return nil
	}
	return c.simulate(ctx, it)
}

// inspectRecords is inspect for a records client: the record is read from
// the records contract, and since who may write there is that contract's
// own rule (an L2 registry's owner, an operator, ...), a simulated setText
// decides.
func (c *Client) inspectRecords(ctx context.Context, it *pendingWrite) error {
	it.rec = Record{Name: it.Name, Node: nameHash(it.Name), Resolver: c.records}
	v, err := c.valueForWrite(ctx, it.Name)
	if err != nil {
		return it.failed(err)
	}
	if it.compare(v); it.outcome != 0 {
		return nil
	}
	return c.simulate(ctx, it)
}

// simulate decides whether the signer may write it.Name's record by
// estimating the gas of its own setText: the resolvers' bare require()s
// revert without a reason.
func (c *Client) simulate(ctx context.Context, it *pendingWrite) error {
	rec := it.rec
	data, err := packSetText(it)
	if err != nil {
		return it.failed(err)
	}
	_, err = c.node.EstimateGas(ctx, ethereum.CallMsg{From: c.signer.Address(), To: &rec.Resolver, Data: data})
	switch {
	case err == nil:
		c.log.DebugContext(ctx, "ens: signer authorised by the resolver's own rules", "name", it.Name, "owner", rec.Owner)
		return nil
	case isRevert(err):
		it.settle(NotAuthorized, &NotAuthorizedError{Name: it.Name, Owner: rec.Owner, Signer: c.signer.Address(), Resolver: rec.Resolver})
		return nil
	default:
		return it.failed(fmt.Errorf("ens: check authorisation on %s: %w", it.Name, err))
	}
}

func packSetText(it *pendingWrite) ([]byte, error) {
	data, err := resolverABI.Pack("setText", it.rec.Node, TextKey, it.Value)
	if err != nil {
		return nil, fmt.Errorf("ens: pack setText: %w", err)
	}
	return data, nil
}

// packBatch is one setText, or a multicall of several.
func packBatch(items []*pendingWrite) ([]byte, error) {
	if len(items) == 1 {
		return packSetText(items[0])
	}
	calls := make([][]byte, len(items))
	for i, it := range items {
		var err error
		if calls[i], err = packSetText(it); err != nil {
			return nil, err
		}
	}
	data, err := multicallABI.Pack("multicall", calls)
	if err != nil {
		return nil, fmt.Errorf("ens: pack multicall: %w", err)
	}
	return data, nil
}

// maxTxData bounds a transaction's calldata (go-ethereum's pool refuses
// transactions over 128 KiB; at the default gas cap a batch is far below).
const maxTxData = 64 << 10

// fit finds how many of items, from the first, go into one transaction to
// `to`: at most guess, with an estimate within target, or for a single
// update within GasCap. Gas grows with the number of updates, so a batch
// over target is cut to its proportional share and estimated again. A
// multicall that reverts may do so because it is too large (an inner
// setText runs out of gas and the multicall's require turns that into a
// revert) or because one update would: it is halved, and only a single
// update's revert is reported, as a simulated *RevertError.
func (c *Client) fit(ctx context.Context, to common.Address, items []*pendingWrite, guess int, target uint64) (n int, est uint64, data []byte, err error) {
	n = min(len(items), max(guess, 1))
	for {
		if data, err = packBatch(items[:n]); err != nil {
			return 0, 0, nil, err
		}
		if len(data) > maxTxData {
			if n == 1 {
				return 0, 0, nil, fmt.Errorf("ens: the update of %s is %d bytes of calldata, more than a transaction may carry (%d)", items[0].Name, len(data), maxTxData)
			}
			n = max(1, n*maxTxData/len(data))
			continue
		}
		est, err = c.node.EstimateGas(ctx, ethereum.CallMsg{From: c.signer.Address(), To: &to, Data: data})
		switch {
		case err == nil && (est <= target || n == 1 && est <= c.gasCap):
			return n, est, data, nil
		case err == nil && n == 1:
			return 0, 0, nil, fmt.Errorf("%w: %s needs an estimated %d gas, cap is %d", ErrGasCap, items[0].Name, est, c.gasCap)
		case err == nil:
			n = max(1, min(n-1, int(uint64(n)*target/est)))
		case chainWide(err):
			return 0, 0, nil, fmt.Errorf("ens: estimate gas: %w", err)
		case n > 1 && (isRevert(err) || isGasLimit(err)):
			n /= 2
		case isRevert(err):
			return 0, 0, nil, &RevertError{Names: []string{items[0].Name}, Simulated: true, Cause: err}
		case isGasLimit(err):
			return 0, 0, nil, fmt.Errorf("%w: %s: %w", ErrGasCap, items[0].Name, err)
		default:
			return 0, 0, nil, fmt.Errorf("ens: estimate gas: %w", err)
		}
	}
}

// estimate is the gas estimate of a single call, with a revert and a
// need above GasCap reported as such.
func (c *Client) estimate(ctx context.Context, to common.Address, data []byte, names []string) (uint64, error) {
	est, err := c.node.EstimateGas(ctx, ethereum.CallMsg{From: c.signer.Address(), To: &to, Data: data})
	switch {
	case err == nil && est > c.gasCap:
		return 0, fmt.Errorf("%w: %v need an estimated %d gas, cap is %d", ErrGasCap, names, est, c.gasCap)
	case err == nil:
		return est, nil
	case isRevert(err):
		return 0, &RevertError{Names: names, Simulated: true, Cause: err}
	default:
		return 0, fmt.Errorf("ens: estimate gas: %w", err)
	}
}

// transact prices, signs, sends and waits for one transaction whose gas
// estimate (at most GasCap) is est.
func (c *Client) transact(ctx context.Context, ci *chainInfo, to common.Address, data []byte, est uint64, names []string, what string) (TxResult, error) {
	from := c.signer.Address()
	gas := min(est+est/10, c.gasCap) // estimates are ~1% above use; 10% covers state drift
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
	signer := types.LatestSignerForChainID(ci.id)
	tx, err := ci.nonces.send(ctx, c.node, from, func(nonce uint64) (*types.Transaction, error) {
		if c.writeGate != nil {
			if err := c.writeGate(); err != nil {
				return nil, fmt.Errorf("ens: transaction refused: %w", err)
			}
		}
		tx, err := types.SignNewTx(c.signer.key, signer, &types.DynamicFeeTx{
			ChainID:   ci.id,
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
		res := TxResult{Names: names}
		if tx != nil && chainWide(err) {
			// The node may have taken it before the connection failed.
			res.TxHash = tx.Hash()
		}
		return res, err
	}
	c.log.InfoContext(ctx, "ens: "+what+" transaction sent", "names", names, "tx", tx.Hash(), "nonce", tx.Nonce(), "gas", gas, "max_fee", feeCap, "tip", tip)
	res, err := c.wait(ctx, ci, tx, tx.Hash(), names, gas)
	if err == nil {
		c.log.InfoContext(ctx, "ens: "+what+" transaction mined", "names", names, "tx", res.TxHash, "block", res.BlockNumber, "gas_used", res.GasUsed)
	}
	return res, err
}

// WaitTx waits (up to TxTimeout) for a transaction this client sent earlier,
// e.g. after Write timed out, and reports it like Write.
func (c *Client) WaitTx(ctx context.Context, hash common.Hash) (TxResult, error) {
	ci, err := c.setup(ctx)
	if err != nil {
		return TxResult{TxHash: hash}, err
	}
	return c.wait(ctx, ci, nil, hash, nil, 0)
}

// ResyncNonce makes the next transaction take its nonce from the node's
// pending nonce instead of the client's counter: after the chain went
// back (a reorg, an older chain restored) the counter is ahead of it, and
// a transaction sent with it would wait for nonces that never come.
func (c *Client) ResyncNonce() {
	if ci := c.info.Load(); ci != nil && ci.nonces != nil {
		ci.nonces.invalidate()
	}
}

// wait waits for hash's receipt; sent, when the client sent it, lets it
// notice a transaction that can never be mined (ErrTxDropped).
func (c *Client) wait(ctx context.Context, ci *chainInfo, sent *types.Transaction, hash common.Hash, names []string, gasLimit uint64) (TxResult, error) {
	res := TxResult{Names: names, TxHash: hash}
	r, err := c.waitReceipt(ctx, sent, hash)
	if err != nil {
		if ci.nonces != nil {
			ci.nonces.invalidate()
		}
		return res, err
	}
	res.BlockNumber = r.BlockNumber.Uint64()
	res.ChainID = ci.id.Uint64()
	res.GasUsed = r.GasUsed
	res.EffectiveGasPrice = r.EffectiveGasPrice
	if r.Status != types.ReceiptStatusSuccessful {
		return res, &RevertError{Names: names, TxHash: hash, BlockNumber: res.BlockNumber, GasUsed: r.GasUsed, GasLimit: gasLimit}
	}
	return res, nil
}

// waitReceipt polls for the receipt: first after PollInterval/8, backing off
// to PollInterval. Node errors are retried until the timeout (public
// endpoints fail transiently); the last one is reported, so a wait through
// an outage also matches ErrUnavailable.
func (c *Client) waitReceipt(ctx context.Context, sent *types.Transaction, hash common.Hash) (*types.Receipt, error) {
	wctx, cancel := context.WithTimeout(ctx, c.txTimeout)
	defer cancel()
	delay := max(c.poll/8, time.Millisecond)
	t := time.NewTimer(delay)
	defer t.Stop()
	var lastErr error
	// Every dropCheck the transaction's chances are looked at; twice in a
	// row hopeless (a node behind a load balancer may not know a
	// transaction another one took a moment ago) ends the wait.
	dropCheck := max(4*c.poll, 2*time.Second)
	nextCheck, strikes := time.Now().Add(dropCheck), 0
	for {
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return nil, fmt.Errorf("ens: wait for transaction %s: %w", hash, ctx.Err())
			}
			if lastErr != nil {
				return nil, fmt.Errorf("ens: transaction %s not mined within %s (last error: %w): %w", hash, c.txTimeout, lastErr, context.DeadlineExceeded)
			}
			return nil, fmt.Errorf("ens: transaction %s not mined within %s: %w", hash, c.txTimeout, context.DeadlineExceeded)
		case <-t.C:
		}
		r, err := c.node.TransactionReceipt(wctx, hash)
		switch {
		case err == nil && r != nil:
			return r, nil
		case err != nil && !errors.Is(err, ethereum.NotFound) && !strings.Contains(err.Error(), "indexing is in progress") && wctx.Err() == nil:
			lastErr = err
			c.log.DebugContext(ctx, "ens: receipt poll failed", "tx", hash, "err", err)
		case errors.Is(err, ethereum.NotFound) && sent != nil && !time.Now().Before(nextCheck):
			nextCheck = time.Now().Add(dropCheck)
			if why := c.unmineable(wctx, sent); why == "" {
				strikes = 0
			} else if strikes++; strikes >= 2 {
				return nil, fmt.Errorf("%w: transaction %s (nonce %d) %s", ErrTxDropped, hash, sent.Nonce(), why)
			}
		}
		delay = min(2*delay, c.poll)
		t.Reset(delay)
	}
}

// unmineable says why a sent transaction without a receipt can never be
// mined as it is ("" when it still can, or the node cannot tell): it
// waits for a nonce below its own that the chain will not reach, or the
// node does not know it.
func (c *Client) unmineable(ctx context.Context, tx *types.Transaction) string {
	next, err := c.node.PendingNonceAt(ctx, c.signer.Address())
	if err != nil {
		return ""
	}
	if next < tx.Nonce() {
		return fmt.Sprintf("waits for nonce %d, the account's next on chain (the chain went back?)", next)
	}
	known, err := c.node.TransactionKnown(ctx, tx.Hash())
	if err != nil || known {
		return ""
	}
	return "is unknown to the node (dropped from its pool?)"
}

// fees: tip from eth_maxPriorityFeePerGas, fee cap = tip + 2×base fee,
// both clipped to MaxFeePerGas.
func (c *Client) fees(ctx context.Context) (tip, feeCap *big.Int, err error) {
	head, err := c.node.HeaderByNumber(ctx, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("ens: latest header: %w", err)
	}
	if head.BaseFee == nil {
		return nil, nil, errors.New("ens: the chain has no EIP-1559 base fee")
	}
	tip, err = c.node.SuggestGasTipCap(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("ens: %w", err)
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

// isGasLimit matches a node refusing an estimate for lack of gas: above
// its own cap or the block's gas limit.
func isGasLimit(err error) bool {
	msg := err.Error()
	for _, s := range []string{"gas required exceeds", "exceeds block gas limit", "out of gas"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// chainWide reports an error about the chain rather than one update: the
// node is unreachable, the client closed, or the caller's context is done.
func chainWide(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, errClosed) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
