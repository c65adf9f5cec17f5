package devchain

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"math/big"
	"strings"

	"github.com/adraffy/go-ens-normalize/ensip15"
	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
)

// CCIPArtifacts loads (once per process) the resolvers of the offchain,
// wildcard and Universal Resolver layouts from the chain's artifacts
// directory. Chains that do not deploy them never need them.
func (c *Chain) CCIPArtifacts() (*CCIPArtifacts, error) {
	return LoadCCIPArtifacts(c.arts.Dir)
}

// deploy sends art's creation code with the packed constructor args from
// the dev key and returns the new contract's address.
func (c *Chain) deploy(ctx context.Context, art Artifact, args ...any) (common.Address, error) {
	packed, err := art.ABI.Pack("", args...)
	if err != nil {
		return common.Address{}, fmt.Errorf("devchain: pack %s constructor: %w", art.Name, err)
	}
	data := append(append([]byte{}, art.Bytecode...), packed...)
	r, err := c.Transact(ctx, c.devKey, Call{Data: data})
	if err != nil {
		return common.Address{}, fmt.Errorf("devchain: deploy %s: %w", art.Name, err)
	}
	return r.ContractAddress, nil
}

// DeployOffchainResolver deploys ENS's OffchainResolver: every lookup goes
// to url (EIP-3668 template: "{sender}" and "{data}", GET when it holds
// "{data}", else POST), and only answers signed by one of signers verify.
func (c *Chain) DeployOffchainResolver(ctx context.Context, url string, signers ...common.Address) (common.Address, error) {
	a, err := LoadOffchainResolver(c.arts.Dir)
	if err != nil {
		return common.Address{}, err
	}
	return c.deploy(ctx, *a, url, signers)
}

// EnsureOffchainResolver makes name (owned by owner) resolve through an
// OffchainResolver with gateway url that trusts signer: the one name
// already has when it matches (a restarted persistent chain), else a new
// one. It returns the resolver's address.
func (c *Chain) EnsureOffchainResolver(ctx context.Context, name string, owner common.Address, url string, signer common.Address) (common.Address, error) {
	a, err := LoadOffchainResolver(c.arts.Dir)
	if err != nil {
		return common.Address{}, err
	}
	norm, err := ensip15.Shared().Normalize(name)
	if err != nil {
		return common.Address{}, fmt.Errorf("devchain: %q: %w", name, err)
	}
	if cur, err := c.resolverOf(ctx, norm); err == nil && cur != (common.Address{}) {
		gotURL, err1 := c.callOne(ctx, a.ABI, cur, "url")
		trusted, err2 := c.callOne(ctx, a.ABI, cur, "signers", signer)
		owned, err3 := c.owner(ctx, c.arts.Registry.ABI, NameHash(norm))
		if err1 == nil && err2 == nil && err3 == nil && gotURL == url && trusted == true && owned == owner {
			return cur, nil
		}
	}
	off, err := c.deploy(ctx, *a, url, []common.Address{signer})
	if err != nil {
		return common.Address{}, err
	}
	if err := c.RegisterWithResolver(ctx, norm, owner, off); err != nil {
		return common.Address{}, err
	}
	return off, nil
}

// resolverOf is the registry's resolver of a normalised name.
func (c *Chain) resolverOf(ctx context.Context, norm string) (common.Address, error) {
	v, err := c.callOne(ctx, c.arts.Registry.ABI, RegistryAddress, "resolver", NameHash(norm))
	if err != nil {
		return common.Address{}, err
	}
	addr, ok := v.(common.Address)
	if !ok {
		return common.Address{}, fmt.Errorf("devchain: registry resolver: unexpected %T", v)
	}
	return addr, nil
}

// callOne calls a view function with one result.
func (c *Chain) callOne(ctx context.Context, a abi.ABI, to common.Address, method string, args ...any) (any, error) {
	data, err := a.Pack(method, args...)
	if err != nil {
		return nil, fmt.Errorf("devchain: pack %s: %w", method, err)
	}
	out, err := c.client.CallContract(ctx, ethereum.CallMsg{To: &to, Data: data}, nil)
	if err != nil {
		return nil, fmt.Errorf("devchain: %s: %w", method, err)
	}
	vals, err := unpack(a.Methods[method].Outputs, out)
	if err != nil || len(vals) != 1 {
		return nil, fmt.Errorf("devchain: decode %s: %v", method, err)
	}
	return vals[0], nil
}

// DeployUniversalResolver deploys the project's Universal-Resolver-
// compatible contract over the chain's registry; resolve() sends offchain
// lookups to batchGateways ("x-batch-gateway:true" asks the client to
// batch them itself).
func (c *Chain) DeployUniversalResolver(ctx context.Context, batchGateways ...string) (common.Address, error) {
	a, err := c.CCIPArtifacts()
	if err != nil {
		return common.Address{}, err
	}
	if batchGateways == nil {
		batchGateways = []string{}
	}
	return c.deploy(ctx, a.UniversalResolver, RegistryAddress, batchGateways)
}

// DeployWildcardResolver deploys an on-chain extended (ENSIP-10)
// resolver whose records the dev key sets with SetText.
func (c *Chain) DeployWildcardResolver(ctx context.Context) (common.Address, error) {
	a, err := c.CCIPArtifacts()
	if err != nil {
		return common.Address{}, err
	}
	return c.deploy(ctx, a.WildcardResolver)
}

// DeployURCheckResolver deploys a resolver that answers the text record
// "description" differently through the Universal Resolver ur.
func (c *Chain) DeployURCheckResolver(ctx context.Context, ur common.Address) (common.Address, error) {
	a, err := c.CCIPArtifacts()
	if err != nil {
		return common.Address{}, err
	}
	return c.deploy(ctx, a.URCheckResolver, ur)
}

// DeployLoopResolver deploys a hostile extended resolver whose lookups go
// to urls, name sender (zero: itself) and repeat until rounds lookups were
// made; the last gateway answer is its text record.
func (c *Chain) DeployLoopResolver(ctx context.Context, sender common.Address, urls []string, rounds uint64) (common.Address, error) {
	a, err := c.CCIPArtifacts()
	if err != nil {
		return common.Address{}, err
	}
	return c.deploy(ctx, a.LoopResolver, sender, urls, new(big.Int).SetUint64(rounds))
}

// setTextABI is setText(bytes32,string,string), which the PublicResolver
// and WildcardResolver share.
var setTextABI = mustParseABI(`[{"type":"function","name":"setText","stateMutability":"nonpayable",
	"inputs":[{"name":"node","type":"bytes32"},{"name":"key","type":"string"},{"name":"value","type":"string"}],"outputs":[]}]`)

// SetText sets the text record key of name (normalised first) to value on
// resolver, signed by signer (nil: the dev key).
func (c *Chain) SetText(ctx context.Context, signer *ecdsa.PrivateKey, resolver common.Address, name, key, value string) error {
	norm, err := ensip15.Shared().Normalize(name)
	if err != nil {
		return fmt.Errorf("devchain: set text of %q: %w", name, err)
	}
	data, err := setTextABI.Pack("setText", NameHash(norm), key, value)
	if err != nil {
		return fmt.Errorf("devchain: pack setText: %w", err)
	}
	if signer == nil {
		signer = c.devKey
	}
	if _, err := c.Transact(ctx, signer, Call{To: &resolver, Data: data}); err != nil {
		return fmt.Errorf("devchain: set text %s of %s: %w", key, norm, err)
	}
	return nil
}

func mustParseABI(s string) abi.ABI {
	a, err := abi.JSON(strings.NewReader(s))
	if err != nil {
		panic("devchain: bad built-in ABI: " + err.Error())
	}
	return a
}
