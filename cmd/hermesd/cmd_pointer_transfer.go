package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/ens"
)

const pointerTransferHelp = `Move NAME to a new owner in the ENS registry (setOwner), for handing an
agent to its buyer. The signer must own NAME or be an operator its owner
approved in the registry; nothing is sent otherwise. After the transfer only
the new owner (and whoever it authorises) can write NAME's records: a
daemon still publishing the agent with the old key is refused.

Without --yes nothing is sent: the command prints who owns NAME now and what
it would do, and exits 2. --to must be an address (0x + 40 hex digits);
mixed case must be a valid EIP-55 checksum, so a mistyped address is caught
before the name is gone. Transferring to the current owner sends nothing.

A name whose record lives where ens.records puts it (an L2: the configured
agent's with this ens_name, or --records ID) is moved in that entry's
registry (ens.records[].registry), on that chain, signed by that entry's
signer: there, not in the L1 registry, is who may write the record decided.`

// pointerTransferResult is what pointer transfer prints with --json.
type pointerTransferResult struct {
	Name          string `json:"name"`
	Records       string `json:"records,omitempty"` // the ens.records entry whose registry was used (absent: L1's)
	To            string `json:"to"`
	PreviousOwner string `json:"previousOwner"`
	Unchanged     bool   `json:"unchanged"`
	Sent          bool   `json:"sent"` // false without --yes
	From          string `json:"from"`
	ChainID       string `json:"chainId"`
	TxHash        string `json:"txHash,omitempty"`
	BlockNumber   uint64 `json:"blockNumber,omitempty"`
	GasUsed       uint64 `json:"gasUsed,omitempty"`
}

func runPointerTransfer(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "pointer transfer", "pointer transfer NAME --to ADDRESS [--yes] [--json] [-config FILE | --rpc URL --key-file FILE ...]", pointerTransferHelp)
	var cf chainFlags
	cf.register(fs, true)
	toFlag := fs.String("to", "", "the new owner's `ADDRESS` (required)")
	yes := fs.Bool("yes", false, "send the transaction (without it: show what would happen)")
	records := fs.String("records", "", "transfer in the registry of the ens.records entry `ID` (default: the configured agent's with this ens_name; \"l1\": the L1 registry)")
	asJSON := fs.Bool("json", false, "print the result as one JSON object")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("pointer transfer: want exactly one NAME, got %d arguments", len(pos))
	}
	to, err := parseOwnerAddress(*toFlag)
	if err != nil {
		return usageErrorf("pointer transfer: %v", err)
	}
	rt, err := cf.recordsTarget(pos[0], *records)
	if err != nil {
		return err
	}
	var (
		name   string
		client *ens.Client
		where  string
	)
	if rt == nil {
		if name, client, err = cf.connect(ctx, pos[0], true); err != nil {
			return err
		}
	} else {
		if name, err = ens.Normalize(pos[0]); err != nil {
			return withCode(exitUsage, err)
		}
		if client, err = cf.recordsRegistry(ctx, rt); err != nil {
			return fmt.Errorf("pointer transfer: %w", err)
		}
		where = rt.ID
	}
	defer client.Close()
	owner, err := client.Owner(ctx, name)
	if err != nil {
		return err
	}
	if owner == (common.Address{}) {
		return withCode(exitNotFound, fmt.Errorf("pointer transfer: %w: %s has no owner in the registry", ens.ErrNameNotFound, name))
	}
	out := pointerTransferResult{
		Name: name, Records: where, To: to.Hex(), PreviousOwner: owner.Hex(), Unchanged: owner == to,
		From: client.From().Hex(), ChainID: client.ChainID().String(),
	}
	if !*yes && !out.Unchanged {
		if *asJSON {
			if err := newJSONEncoder(env.stdout).Encode(out); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(env.stdout, "would transfer %s from %s to %s, signed by %s on chain %s\n", name, out.PreviousOwner, out.To, out.From, out.ChainID)
		}
		return usageErrorf("pointer transfer: nothing sent; re-run with --yes to transfer %s", name)
	}
	res, err := client.Transfer(ctx, name, to)
	if err != nil {
		if res.TxHash != (common.Hash{}) {
			return fmt.Errorf("pointer transfer: %w (transaction %s)", err, res.TxHash)
		}
		return fmt.Errorf("pointer transfer: %w", err)
	}
	// Read it back: the registry, not the receipt, says who owns the name.
	if now, err := client.Owner(ctx, name); err != nil {
		return fmt.Errorf("pointer transfer: sent, but reading the owner back failed: %w", err)
	} else if now != to {
		return fmt.Errorf("pointer transfer: %s is owned by %s after the transfer, not %s", name, now.Hex(), to.Hex())
	}
	out.Unchanged, out.Sent = res.Unchanged, !res.Unchanged
	if !res.Unchanged {
		out.TxHash, out.BlockNumber, out.GasUsed = res.TxHash.Hex(), res.BlockNumber, res.GasUsed
	}
	if *asJSON {
		return newJSONEncoder(env.stdout).Encode(out)
	}
	if res.Unchanged {
		_, err = fmt.Fprintf(env.stdout, "unchanged: %s already belongs to %s (nothing sent)\n", name, out.To)
		return err
	}
	_, err = fmt.Fprintf(env.stdout, "%s: owner %s → %s\ntx %s in block %d, gas used %d\n", name, out.PreviousOwner, out.To, out.TxHash, out.BlockNumber, out.GasUsed)
	return err
}

// parseOwnerAddress accepts 0x + 40 hex digits, all lower case, all upper
// case or a valid EIP-55 checksum, and never the zero address (that would
// give the name up).
func parseOwnerAddress(s string) (common.Address, error) {
	switch {
	case s == "":
		return common.Address{}, errors.New("--to ADDRESS is required")
	case !strings.HasPrefix(s, "0x") || !common.IsHexAddress(s):
		return common.Address{}, fmt.Errorf("--to %q is not an address (0x + 40 hex digits)", sanitize(s))
	}
	m, err := common.NewMixedcaseAddressFromString(s)
	if err != nil {
		return common.Address{}, fmt.Errorf("--to %q is not an address (0x + 40 hex digits)", sanitize(s))
	}
	digits := s[2:]
	if digits != strings.ToLower(digits) && digits != strings.ToUpper(digits) && !m.ValidChecksum() {
		return common.Address{}, fmt.Errorf("--to %s has an invalid EIP-55 checksum (a typo?); the checksummed form of those digits is %s", s, m.Address().Hex())
	}
	if m.Address() == (common.Address{}) {
		return common.Address{}, errors.New("--to is the zero address: that would give the name up")
	}
	return m.Address(), nil
}
