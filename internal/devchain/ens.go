package devchain

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/adraffy/go-ens-normalize/ensip15"
	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// Fixed gas limits for registry calls: RegisterMany sends its calls back to
// back, and a call that depends on an earlier one cannot be estimated before
// the earlier one is mined. Real use is ~30-75k.
const (
	gasSetSubnodeOwner  = 150_000
	gasSetSubnodeRecord = 200_000
)

// NameHash is the ENS namehash of an already normalised name.
func NameHash(name string) common.Hash {
	var node common.Hash
	if name == "" {
		return node
	}
	labels := strings.Split(name, ".")
	for i := len(labels) - 1; i >= 0; i-- {
		node = crypto.Keccak256Hash(node[:], crypto.Keccak256([]byte(labels[i])))
	}
	return node
}

// Register makes owner the owner of name, with the genesis PublicResolver as
// its resolver, creating missing parents (owned by the dev key).
func (c *Chain) Register(ctx context.Context, name string, owner common.Address) error {
	return c.RegisterMany(ctx, []Name{{Name: name, Owner: owner}})
}

// RegisterWithResolver is Register with a given resolver.
func (c *Chain) RegisterWithResolver(ctx context.Context, name string, owner, resolver common.Address) error {
	return c.registerMany(ctx, []Name{{Name: name, Owner: owner}}, resolver)
}

// RegisterMany registers names in one burst of transactions. Parents that
// do not exist are created for the dev key; a parent owned by someone else
// is an error unless it is itself in names (the dev key can take back any
// name under one it owns, but will not do so behind a caller's back).
// Names are normalised with ENSIP-15 first.
func (c *Chain) RegisterMany(ctx context.Context, names []Name) error {
	return c.registerMany(ctx, names, ResolverAddress)
}

type plannedName struct {
	name   string // normalised
	labels []string
	owner  common.Address
}

func (c *Chain) registerMany(ctx context.Context, names []Name, resolver common.Address) error {
	if len(names) == 0 {
		return nil
	}
	reg := c.arts.Registry.ABI
	plan := make([]plannedName, 0, len(names))
	inBatch := make(map[string]bool)
	for _, n := range names {
		norm, err := ensip15.Shared().Normalize(n.Name)
		if err != nil {
			return fmt.Errorf("devchain: register %q: %w", n.Name, err)
		}
		if norm == "" {
			return fmt.Errorf("devchain: register: empty name")
		}
		plan = append(plan, plannedName{name: norm, labels: strings.Split(norm, "."), owner: n.Owner})
		inBatch[norm] = true
	}

	c.adminMu.Lock()
	defer c.adminMu.Unlock()

	// Ancestors, shallowest first, must end up owned by the dev key.
	ancestors := make(map[string]int) // name -> depth
	for _, p := range plan {
		for i := 1; i < len(p.labels); i++ {
			anc := strings.Join(p.labels[i:], ".")
			ancestors[anc] = len(p.labels) - i
		}
	}
	ordered := make([]string, 0, len(ancestors))
	for a := range ancestors {
		ordered = append(ordered, a)
	}
	sort.Slice(ordered, func(i, j int) bool {
		if ancestors[ordered[i]] != ancestors[ordered[j]] {
			return ancestors[ordered[i]] < ancestors[ordered[j]]
		}
		return ordered[i] < ordered[j]
	})
	var calls []Call
	to := RegistryAddress
	for _, anc := range ordered {
		owner, err := c.owner(ctx, reg, NameHash(anc))
		if err != nil {
			return err
		}
		switch {
		case owner == c.devAddr:
			continue
		case owner != (common.Address{}) && !inBatch[anc]:
			return fmt.Errorf("devchain: register under %s: it is owned by %s, not the dev key %s", anc, owner, c.devAddr)
		}
		label, parent := splitName(anc)
		data, err := reg.Pack("setSubnodeOwner", NameHash(parent), crypto.Keccak256Hash([]byte(label)), c.devAddr)
		if err != nil {
			return fmt.Errorf("devchain: pack setSubnodeOwner: %w", err)
		}
		calls = append(calls, Call{To: &to, Data: data, Gas: gasSetSubnodeOwner})
	}
	// Deepest names first, so a name that is also a parent in this batch
	// is handed to its owner only after its children exist.
	sort.SliceStable(plan, func(i, j int) bool { return len(plan[i].labels) > len(plan[j].labels) })
	for _, p := range plan {
		label, parent := splitName(p.name)
		data, err := reg.Pack("setSubnodeRecord", NameHash(parent), crypto.Keccak256Hash([]byte(label)), p.owner, resolver, uint64(0))
		if err != nil {
			return fmt.Errorf("devchain: pack setSubnodeRecord: %w", err)
		}
		calls = append(calls, Call{To: &to, Data: data, Gas: gasSetSubnodeRecord})
	}
	if err := c.transactLocked(ctx, calls); err != nil {
		return fmt.Errorf("devchain: register: %w", err)
	}
	return nil
}

// transactLocked is TransactMany for the dev key with adminMu already held.
func (c *Chain) transactLocked(ctx context.Context, calls []Call) error {
	_, err := c.transactMany(ctx, c.devKey, calls)
	return err
}

// splitName splits a normalised name into its first label and the parent.
func splitName(name string) (label, parent string) {
	label, parent, _ = strings.Cut(name, ".")
	return label, parent
}

func (c *Chain) owner(ctx context.Context, reg abi.ABI, node common.Hash) (common.Address, error) {
	data, err := reg.Pack("owner", node)
	if err != nil {
		return common.Address{}, fmt.Errorf("devchain: pack owner: %w", err)
	}
	to := RegistryAddress
	out, err := c.client.CallContract(ctx, ethereum.CallMsg{To: &to, Data: data}, nil)
	if err != nil {
		return common.Address{}, fmt.Errorf("devchain: registry owner: %w", err)
	}
	vals, err := reg.Unpack("owner", out)
	if err != nil || len(vals) != 1 {
		return common.Address{}, fmt.Errorf("devchain: decode registry owner: %v", err)
	}
	addr, ok := vals[0].(common.Address)
	if !ok {
		return common.Address{}, fmt.Errorf("devchain: decode registry owner: unexpected %T", vals[0])
	}
	return addr, nil
}

// DeployResolver deploys another PublicResolver (bound to the chain's
// registry) with a transaction from the dev key and returns its address.
func (c *Chain) DeployResolver(ctx context.Context) (common.Address, error) {
	args, err := c.arts.Resolver.ABI.Pack("", RegistryAddress)
	if err != nil {
		return common.Address{}, fmt.Errorf("devchain: pack resolver constructor: %w", err)
	}
	data := append(append([]byte{}, c.arts.Resolver.Bytecode...), args...)
	r, err := c.Transact(ctx, c.devKey, Call{Data: data})
	if err != nil {
		return common.Address{}, fmt.Errorf("devchain: deploy resolver: %w", err)
	}
	return r.ContractAddress, nil
}
