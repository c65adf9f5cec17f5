package ens

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"sync"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
)

// nonceManager hands out the nonces of one address on one chain. The mutex
// is held across sign+send only, so concurrent writers get consecutive
// nonces and wait for their receipts in parallel.
type nonceManager struct {
	mu     sync.Mutex
	next   uint64
	synced bool
}

// nonceManagers is process-wide: every Client signing with the same key on
// the same chain shares one counter. The genesis hash is part of the key so
// that a restarted dev chain with the same chain id gets a fresh counter.
var nonceManagers sync.Map // "chainID/genesis/address" -> *nonceManager

func nonceManagerFor(chainID *big.Int, genesis common.Hash, addr common.Address) *nonceManager {
	v, _ := nonceManagers.LoadOrStore(chainID.String()+"/"+genesis.Hex()+"/"+addr.Hex(), new(nonceManager))
	return v.(*nonceManager)
}

type nonceSource interface {
	PendingNonceAt(ctx context.Context, account common.Address) (uint64, error)
	SendTransaction(ctx context.Context, tx *types.Transaction) error
}

// send signs (via build) with the next nonce and sends. The counter moves
// only when the node accepted the transaction. A nonce error (someone else
// used the key, or the counter ran ahead of a dropped transaction) resyncs
// from the node's pending nonce and retries once; any other send error also
// forces a resync next time, since the node may or may not have taken it.
// A failed send still returns the transaction, for its hash.
func (m *nonceManager) send(ctx context.Context, b nonceSource, from common.Address, build func(nonce uint64) (*types.Transaction, error)) (*types.Transaction, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if !m.synced {
			n, err := b.PendingNonceAt(ctx, from)
			if err != nil {
				return nil, fmt.Errorf("ens: pending nonce of %s: %w", from, err)
			}
			m.next, m.synced = n, true
		}
		tx, err := build(m.next)
		if err != nil {
			return nil, err
		}
		err = b.SendTransaction(ctx, tx)
		if err == nil || isAlreadyKnown(err) {
			// "already known": this very transaction (same hash) is in
			// the pool, e.g. an earlier send timed out after the node took it.
			m.next++
			return tx, nil
		}
		m.synced = false
		if isNonceError(err) && attempt == 0 {
			continue
		}
		return tx, fmt.Errorf("ens: send transaction (nonce %d): %w", tx.Nonce(), err)
	}
}

// invalidate forces a resync before the next send (e.g. after a receipt
// timeout: the transaction may have been dropped, leaving a gap).
func (m *nonceManager) invalidate() {
	m.mu.Lock()
	m.synced = false
	m.mu.Unlock()
}

func isAlreadyKnown(err error) bool {
	return strings.Contains(strings.ToLower(err.Error()), "already known")
}

// isNonceError matches the node errors that mean our counter is wrong.
// Over JSON-RPC they arrive as plain messages.
func isNonceError(err error) bool {
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"nonce too low", "nonce too high", "replacement transaction underpriced", "invalid nonce", "nonce has already been used"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
