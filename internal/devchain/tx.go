package devchain

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/params"
)

// ErrReverted is returned (wrapped in *RevertedError) for a mined
// transaction whose receipt has status 0.
var ErrReverted = errors.New("devchain: transaction reverted")

// RevertedError reports a mined transaction with status 0.
type RevertedError struct {
	Receipt *types.Receipt
}

func (e *RevertedError) Error() string {
	return fmt.Sprintf("devchain: transaction %s reverted in block %s (gas used %d)", e.Receipt.TxHash, e.Receipt.BlockNumber, e.Receipt.GasUsed)
}

func (e *RevertedError) Is(target error) bool { return target == ErrReverted }

// ReceiptReader is the part of an Ethereum client WaitReceipt needs.
type ReceiptReader interface {
	TransactionReceipt(ctx context.Context, hash common.Hash) (*types.Receipt, error)
}

// WaitReceipt polls for the receipt of hash until it is there or ctx is
// done: first after 2 ms, then backing off to every poll (0 = 20 ms), since
// a dev chain seals within milliseconds. A receipt with status 0 is returned
// together with a *RevertedError.
func WaitReceipt(ctx context.Context, client ReceiptReader, hash common.Hash, poll time.Duration) (*types.Receipt, error) {
	if poll <= 0 {
		poll = DefaultPollInterval
	}
	delay := min(2*time.Millisecond, poll)
	t := time.NewTimer(delay)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("devchain: wait for %s: %w", hash, ctx.Err())
		case <-t.C:
		}
		r, err := client.TransactionReceipt(ctx, hash)
		switch {
		case err == nil && r != nil:
			if r.Status != types.ReceiptStatusSuccessful {
				return r, &RevertedError{Receipt: r}
			}
			return r, nil
		case err != nil && !errors.Is(err, ethereum.NotFound) && !isIndexing(err):
			if ctx.Err() != nil {
				return nil, fmt.Errorf("devchain: wait for %s: %w", hash, ctx.Err())
			}
			return nil, fmt.Errorf("devchain: receipt of %s: %w", hash, err)
		}
		delay = min(2*delay, poll)
		t.Reset(delay)
	}
}

// isIndexing reports geth's "transaction indexing is in progress", which a
// node returns for unknown hashes while its indexer catches up (always just
// after start): the receipt may simply not be indexed yet.
func isIndexing(err error) bool {
	return strings.Contains(err.Error(), "indexing is in progress")
}

// WaitReceipt waits for hash on this chain, at most TxTimeout; status 0 is
// a *RevertedError.
func (c *Chain) WaitReceipt(ctx context.Context, hash common.Hash) (*types.Receipt, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return WaitReceipt(ctx, c.client, hash, c.poll)
}

// Call is one transaction for Transact/TransactMany.
type Call struct {
	To    *common.Address // nil creates a contract
	Value *big.Int
	Data  []byte
	// Gas is the gas limit; 0 estimates it (only possible when the call
	// does not depend on an earlier call of the same batch).
	Gas uint64
}

// Transact signs call with key, sends it and waits for a successful receipt.
func (c *Chain) Transact(ctx context.Context, key *ecdsa.PrivateKey, call Call) (*types.Receipt, error) {
	rs, err := c.TransactMany(ctx, key, []Call{call})
	if err != nil {
		return nil, err
	}
	return rs[0], nil
}

// TransactMany sends calls from key with consecutive nonces without waiting
// in between (they usually land in one or two blocks), then waits for all
// receipts. Any status-0 receipt is an error. Calls from the dev key are
// serialised with the chain's own admin transactions.
func (c *Chain) TransactMany(ctx context.Context, key *ecdsa.PrivateKey, calls []Call) ([]*types.Receipt, error) {
	if crypto.PubkeyToAddress(key.PublicKey) == c.devAddr {
		c.adminMu.Lock()
		defer c.adminMu.Unlock()
	}
	return c.transactMany(ctx, key, calls)
}

func (c *Chain) transactMany(ctx context.Context, key *ecdsa.PrivateKey, calls []Call) ([]*types.Receipt, error) {
	from := crypto.PubkeyToAddress(key.PublicKey)
	nonce, err := c.client.PendingNonceAt(ctx, from)
	if err != nil {
		return nil, fmt.Errorf("devchain: nonce of %s: %w", from, err)
	}
	tip, feeCap, err := c.fees(ctx)
	if err != nil {
		return nil, err
	}
	signer := types.LatestSignerForChainID(c.chainID)
	hashes := make([]common.Hash, 0, len(calls))
	for i, call := range calls {
		gas := call.Gas
		if gas == 0 {
			gas, err = c.client.EstimateGas(ctx, ethereum.CallMsg{From: from, To: call.To, Value: call.Value, Data: call.Data})
			if err != nil {
				return nil, fmt.Errorf("devchain: estimate gas of call %d: %w", i, err)
			}
			gas += gas / 5
		}
		value := call.Value
		if value == nil {
			value = new(big.Int)
		}
		tx, err := types.SignNewTx(key, signer, &types.DynamicFeeTx{
			ChainID:   c.chainID,
			Nonce:     nonce + uint64(i),
			GasTipCap: tip,
			GasFeeCap: feeCap,
			Gas:       gas,
			To:        call.To,
			Value:     value,
			Data:      call.Data,
		})
		if err != nil {
			return nil, fmt.Errorf("devchain: sign: %w", err)
		}
		if err := c.client.SendTransaction(ctx, tx); err != nil {
			return nil, fmt.Errorf("devchain: send call %d: %w", i, err)
		}
		hashes = append(hashes, tx.Hash())
	}
	receipts := make([]*types.Receipt, len(hashes))
	// The last one first: when it is in, so are the others.
	for i := len(hashes) - 1; i >= 0; i-- {
		r, err := c.WaitReceipt(ctx, hashes[i])
		if err != nil {
			return nil, fmt.Errorf("call %d: %w", i, err)
		}
		receipts[i] = r
	}
	return receipts, nil
}

// fees returns a tip of 1 gwei and a fee cap of tip + 2×base fee.
func (c *Chain) fees(ctx context.Context) (tip, feeCap *big.Int, err error) {
	head, err := c.client.HeaderByNumber(ctx, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("devchain: latest header: %w", err)
	}
	tip = big.NewInt(params.GWei)
	feeCap = new(big.Int).Mul(head.BaseFee, big.NewInt(2))
	feeCap.Add(feeCap, tip)
	return tip, feeCap, nil
}

// Fund sends amount (nil = 100 ETH) from the dev key to each address.
func (c *Chain) Fund(ctx context.Context, amount *big.Int, addrs ...common.Address) error {
	if amount == nil {
		amount = new(big.Int).Mul(big.NewInt(100), big.NewInt(params.Ether))
	}
	calls := make([]Call, len(addrs))
	for i := range addrs {
		calls[i] = Call{To: &addrs[i], Value: amount, Gas: params.TxGas}
	}
	if _, err := c.TransactMany(ctx, c.devKey, calls); err != nil {
		return fmt.Errorf("devchain: fund: %w", err)
	}
	return nil
}
