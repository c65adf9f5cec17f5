package ens

import (
	"context"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
)

// ResolveAt resolves name's agent-snapshot record as it would resolve
// once resolver were its resolver in the registry (Resolver.TextAt): a
// move checks through it that the name keeps its value before it changes
// the resolver.
func (c *Client) ResolveAt(ctx context.Context, name string, resolver common.Address) (Resolution, error) {
	if c.records != (common.Address{}) {
		return Resolution{}, ErrRecordsClient
	}
	if _, err := c.setup(ctx); err != nil {
		return Resolution{}, err
	}
	return c.res.TextAt(ctx, resolver, name, TextKey)
}

// ResolverOf is the resolver L1 resolution reaches name through: the
// nearest one up its labels in the registry (ENSIP-10; zero when none),
// or with a Universal Resolver the one it reports, which takes a whole
// resolution. It tells where a name's record lives from L1's view.
func (c *Client) ResolverOf(ctx context.Context, name string) (common.Address, error) {
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
	if c.res.UniversalResolver() != (common.Address{}) {
		res, err := c.res.Text(ctx, norm, TextKey)
		if err != nil {
			return common.Address{}, err
		}
		return res.Resolver, nil
	}
	r, _, err := c.res.findResolver(ctx, norm)
	return r, err
}

// ResolverPlan is what SetResolver would do.
type ResolverPlan struct {
	Name  string // normalised
	Node  common.Hash
	Owner common.Address
	// From is the name's resolver in the registry now (zero: none of its
	// own; ENSIP-10 may find an ancestor's), To the new one.
	From, To common.Address
	// Unchanged: the registry names To already; nothing would be sent.
	Unchanged bool
	// Gas is the transaction's gas estimate, GasPrice what a gas unit
	// would cost at the current base fee and tip (wei); both zero when
	// Unchanged.
	Gas      uint64
	GasPrice *big.Int
}

// PlanResolver checks that the signer may change name's resolver in the
// registry to `to` and estimates the transaction, sending nothing:
//   - the registry names `to` already: Unchanged;
//   - the name has no owner: ErrNameNotFound;
//   - the signer is neither the owner nor an operator the owner approved
//     in the registry: *NotAuthorizedError;
//   - `to` is not a contract: an error (a resolver without code resolves
//     nothing).
func (c *Client) PlanResolver(ctx context.Context, name string, to common.Address) (ResolverPlan, error) {
	if c.signer == nil {
		return ResolverPlan{}, ErrReadOnly
	}
	norm, err := Normalize(name)
	if err != nil {
		return ResolverPlan{}, err
	}
	if c.records != (common.Address{}) {
		return ResolverPlan{}, ErrRecordsClient
	}
	if _, err := c.setup(ctx); err != nil {
		return ResolverPlan{}, err
	}
	rec, err := c.lookup(ctx, norm)
	if err != nil {
		return ResolverPlan{}, err
	}
	p := ResolverPlan{Name: norm, Node: rec.Node, Owner: rec.Owner, From: rec.Resolver, To: to}
	if rec.Owner == (common.Address{}) {
		return p, fmt.Errorf("%w: %s has no owner in the registry (a name resolved through an ancestor's wildcard resolver must be registered before it can have a resolver of its own)", ErrNameNotFound, norm)
	}
	if from := c.signer.Address(); rec.Owner != from {
		ok, err := c.approvedForAll(ctx, rec.Owner, from)
		if err != nil {
			return p, fmt.Errorf("ens: registry approval of %s for %s: %w", from, norm, err)
		}
		if !ok {
			return p, &NotAuthorizedError{Name: norm, Owner: rec.Owner, Signer: from, Action: "change its resolver"}
		}
	}
	if rec.Resolver == to {
		p.Unchanged = true
		return p, nil
	}
	code, err := c.node.CodeAt(ctx, to, nil)
	if err != nil {
		return p, fmt.Errorf("ens: code of resolver %s: %w", to, err)
	}
	if len(code) == 0 {
		return p, fmt.Errorf("ens: %s is not a contract on chain %s, so it cannot be %s's resolver (nothing sent)", to, c.ChainID(), norm)
	}
	data, err := registryABI.Pack("setResolver", rec.Node, to)
	if err != nil {
		return p, fmt.Errorf("ens: pack setResolver: %w", err)
	}
	if p.Gas, err = c.estimate(ctx, c.registryAddr, data, []string{norm}); err != nil {
		return p, err
	}
	tip, feeCap, err := c.fees(ctx)
	if err != nil {
		return p, err
	}
	// What the transaction pays per gas now: the base fee plus the tip
	// (fees put the cap at twice the base fee plus the tip).
	base := new(big.Int).Sub(feeCap, tip)
	base.Div(base, big.NewInt(2))
	p.GasPrice = base.Add(base, tip)
	return p, nil
}

// SetResolver makes `to` name's resolver in the registry (setResolver),
// after PlanResolver's checks; the registry naming `to` already sends
// nothing (an Unchanged result), so a re-run after an ambiguous failure
// is harmless. Like Transfer it waits up to TxTimeout for the receipt.
func (c *Client) SetResolver(ctx context.Context, name string, to common.Address) (TxResult, error) {
	p, err := c.PlanResolver(ctx, name, to)
	if err != nil {
		return TxResult{}, err
	}
	names := []string{p.Name}
	if p.Unchanged {
		c.log.DebugContext(ctx, "ens: the name has that resolver already", "name", p.Name, "resolver", to)
		return TxResult{Unchanged: true, Names: names}, nil
	}
	ci, err := c.setup(ctx)
	if err != nil {
		return TxResult{}, err
	}
	data, err := registryABI.Pack("setResolver", p.Node, to)
	if err != nil {
		return TxResult{}, fmt.Errorf("ens: pack setResolver: %w", err)
	}
	return c.transact(ctx, ci, c.registryAddr, data, p.Gas, names, "resolver change")
}
