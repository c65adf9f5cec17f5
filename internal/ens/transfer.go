package ens

import (
	"context"
	"fmt"

	"github.com/ethereum/go-ethereum/accounts/abi/bind"
	"github.com/ethereum/go-ethereum/common"
)

// Owner returns the registry owner of name (zero when it is not
// registered).
func (c *Client) Owner(ctx context.Context, name string) (common.Address, error) {
	norm, err := Normalize(name)
	if err != nil {
		return common.Address{}, err
	}
	if c.records != (common.Address{}) {
		return common.Address{}, ErrRecordsClient
	}
	if _, err := c.setup(ctx); err != nil {
		return common.Address{}, err
	}
	owner, err := c.registry.Owner(&bind.CallOpts{Context: ctx}, nameHash(norm))
	if err != nil {
		return common.Address{}, fmt.Errorf("ens: registry owner of %s: %w", norm, err)
	}
	return owner, nil
}

// Transfer makes to the owner of name in the ENS registry (setOwner), for
// moving an agent to another operator. Like a write it checks before it
// sends:
//   - to already owns the name: nothing sent, Unchanged result (so a retry
//     after an ambiguous failure is harmless);
//   - the name has no owner: ErrNameNotFound;
//   - the signer is neither the owner nor an operator the owner approved
//     in the registry (setApprovalForAll): *NotAuthorizedError with a zero
//     Resolver, nothing sent. A name wrapped by the NameWrapper is owned by
//     that contract in the registry and is transferred there, not here.
//
// The transaction is EIP-1559 with the configured fee cap, and Transfer
// waits up to TxTimeout for it (status 0 is a *RevertError; a timeout
// wraps context.DeadlineExceeded and still carries TxHash). The records
// stay on the name's resolver, but the 0.3.1 resolver's authorisations
// belong to the old owner: after the transfer only the new owner (and
// whoever it authorises) can write them.
func (c *Client) Transfer(ctx context.Context, name string, to common.Address) (TxResult, error) {
	if c.signer == nil {
		return TxResult{}, ErrReadOnly
	}
	norm, err := Normalize(name)
	if err != nil {
		return TxResult{}, err
	}
	if to == (common.Address{}) {
		return TxResult{}, fmt.Errorf("ens: refusing to transfer %s to the zero address (that gives the name up)", norm)
	}
	if c.records != (common.Address{}) {
		return TxResult{}, ErrRecordsClient
	}
	ci, err := c.setup(ctx)
	if err != nil {
		return TxResult{}, err
	}
	node := nameHash(norm)
	names := []string{norm}
	opts := &bind.CallOpts{Context: ctx}
	owner, err := c.registry.Owner(opts, node)
	if err != nil {
		return TxResult{}, fmt.Errorf("ens: registry owner of %s: %w", norm, err)
	}
	from := c.signer.Address()
	switch {
	case owner == to:
		c.log.DebugContext(ctx, "ens: name already owned by the recipient", "name", norm, "owner", to)
		return TxResult{Unchanged: true, Names: names}, nil
	case owner == (common.Address{}):
		return TxResult{}, fmt.Errorf("%w: %s", ErrNameNotFound, norm)
	case owner != from:
		ok, err := c.approvedForAll(ctx, owner, from)
		if err != nil {
			return TxResult{}, fmt.Errorf("ens: registry approval of %s for %s: %w", from, norm, err)
		}
		if !ok {
			return TxResult{}, &NotAuthorizedError{Name: norm, Owner: owner, Signer: from}
		}
	}
	data, err := registryABI.Pack("setOwner", node, to)
	if err != nil {
		return TxResult{}, fmt.Errorf("ens: pack setOwner: %w", err)
	}
	est, err := c.estimate(ctx, c.registryAddr, data, names)
	if err != nil {
		return TxResult{}, err
	}
	return c.transact(ctx, ci, c.registryAddr, data, est, names, "transfer")
}

// approvedForAll is the registry's isApprovedForAll(owner, operator).
func (c *Client) approvedForAll(ctx context.Context, owner, operator common.Address) (bool, error) {
	var out []any
	err := bind.NewBoundContract(c.registryAddr, registryABI, c.node, nil, nil).
		Call(&bind.CallOpts{Context: ctx}, &out, "isApprovedForAll", owner, operator)
	if err != nil {
		return false, err
	}
	if len(out) == 1 {
		if ok, isBool := out[0].(bool); isBool {
			return ok, nil
		}
	}
	return false, fmt.Errorf("ens: isApprovedForAll returned %d values, not one bool", len(out))
}
