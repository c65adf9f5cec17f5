package ens

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/accounts/abi/bind"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/wealdtech/go-ens/v3/contracts/registry"
	"github.com/wealdtech/go-ens/v3/contracts/resolver"
)

// CanonicalRegistry is the ENS registry on mainnet, Sepolia and Holesky.
var CanonicalRegistry = common.HexToAddress("0x00000000000C2E074eC69A0dFb2997BA6C7d2e1e")

// Defaults for zero Config fields.
const (
	DefaultTxTimeout    = 5 * time.Minute
	DefaultPollInterval = time.Second
	DefaultGasCap       = 1_000_000
)

// Backend is what the client needs from an Ethereum node; *ethclient.Client
// has it all.
type Backend interface {
	bind.ContractBackend
	ChainID(ctx context.Context) (*big.Int, error)
	TransactionReceipt(ctx context.Context, hash common.Hash) (*types.Receipt, error)
}

// Config configures a Client.
type Config struct {
	// RPCURL is the node's JSON-RPC endpoint; ignored when Backend is set.
	RPCURL string
	// Backend reuses an existing connection (e.g. an *ethclient.Client);
	// Close does not close it.
	Backend Backend
	// Registry is the ENS registry; zero means CanonicalRegistry.
	Registry common.Address
	// Signer signs writes; nil makes a read-only client.
	Signer *Signer
	// ChainID, when non-zero, must equal the node's eth_chainId.
	ChainID uint64
	// TxTimeout bounds the wait for a transaction's inclusion.
	TxTimeout time.Duration
	// GasCap is the most gas one transaction may use (default 1,000,000).
	GasCap uint64
	// MaxFeePerGas caps the EIP-1559 fee cap in wei; nil = no cap. When the
	// base fee alone is above it, writes fail with ErrFeeTooHigh.
	MaxFeePerGas *big.Int
	// PollInterval between receipt polls (default 1 s; a dev chain wants
	// ~20 ms).
	PollInterval time.Duration
	// Logger gets debug/info records about lookups and transactions; nil
	// discards them.
	Logger *slog.Logger
}

// Client reads and writes agent-snapshot records. Safe for concurrent use.
type Client struct {
	backend      Backend
	own          *ethclient.Client // dialled by New, closed by Close
	registry     *registry.ContractCaller
	registryAddr common.Address
	chainID      *big.Int
	signer       *Signer
	nonces       *nonceManager
	txTimeout    time.Duration
	poll         time.Duration
	gasCap       uint64
	maxFee       *big.Int
	log          *slog.Logger

	resolvers sync.Map // common.Address -> *resolver.ContractCaller

	// Test hooks: a fixed gas limit instead of the estimate, and a call
	// between the checks and the send.
	fixedGas   uint64
	beforeSend func()
}

// New connects to the node, checks the chain id and that the registry is a
// contract.
func New(ctx context.Context, cfg Config) (*Client, error) {
	c := &Client{
		backend:      cfg.Backend,
		registryAddr: cfg.Registry,
		signer:       cfg.Signer,
		txTimeout:    cfg.TxTimeout,
		poll:         cfg.PollInterval,
		gasCap:       cfg.GasCap,
		log:          cfg.Logger,
	}
	if c.registryAddr == (common.Address{}) {
		c.registryAddr = CanonicalRegistry
	}
	if c.txTimeout <= 0 {
		c.txTimeout = DefaultTxTimeout
	}
	if c.poll <= 0 {
		c.poll = DefaultPollInterval
	}
	if c.gasCap == 0 {
		c.gasCap = DefaultGasCap
	}
	if cfg.MaxFeePerGas != nil {
		c.maxFee = new(big.Int).Set(cfg.MaxFeePerGas)
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.backend == nil {
		if cfg.RPCURL == "" {
			return nil, errors.New("ens: no RPC URL configured")
		}
		ec, err := ethclient.DialContext(ctx, cfg.RPCURL)
		if err != nil {
			return nil, fmt.Errorf("ens: dial %s: %w", redactURL(cfg.RPCURL), err)
		}
		c.own, c.backend = ec, ec
	}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	id, err := c.backend.ChainID(ctx)
	if err != nil {
		return nil, fmt.Errorf("ens: eth_chainId: %w", err)
	}
	if cfg.ChainID != 0 && (!id.IsUint64() || id.Uint64() != cfg.ChainID) {
		return nil, fmt.Errorf("%w: the node is on chain %s, the configured chain id is %d", ErrWrongChain, id, cfg.ChainID)
	}
	c.chainID = id
	code, err := c.backend.CodeAt(ctx, c.registryAddr, nil)
	if err != nil {
		return nil, fmt.Errorf("ens: registry code: %w", err)
	}
	if len(code) == 0 {
		return nil, fmt.Errorf("%w: no contract at %s on chain %s (wrong network or registry address?)", ErrNoRegistry, c.registryAddr, id)
	}
	c.registry, err = registry.NewContractCaller(c.registryAddr, c.backend)
	if err != nil {
		return nil, fmt.Errorf("ens: bind registry: %w", err)
	}
	if c.signer != nil {
		g, err := c.backend.HeaderByNumber(ctx, new(big.Int))
		if err != nil {
			return nil, fmt.Errorf("ens: genesis header: %w", err)
		}
		c.nonces = nonceManagerFor(id, g.Hash(), c.signer.Address())
	}
	ok = true
	return c, nil
}

// Close closes the connection New dialled (not a Backend passed in).
func (c *Client) Close() {
	if c.own != nil {
		c.own.Close()
	}
}

// ChainID is the node's chain id.
func (c *Client) ChainID() *big.Int { return new(big.Int).Set(c.chainID) }

// From is the signer's address (zero for a read-only client).
func (c *Client) From() common.Address {
	if c.signer == nil {
		return common.Address{}
	}
	return c.signer.Address()
}

// Record is what the registry says about a name.
type Record struct {
	Name     string // normalised
	Node     common.Hash
	Owner    common.Address
	Resolver common.Address
}

// Lookup normalises name and reads its owner and resolver from the registry.
// It does not fail for unregistered names (both addresses are zero).
func (c *Client) Lookup(ctx context.Context, name string) (Record, error) {
	norm, err := Normalize(name)
	if err != nil {
		return Record{}, err
	}
	rec := Record{Name: norm, Node: nameHash(norm)}
	opts := &bind.CallOpts{Context: ctx}
	if rec.Owner, err = c.registry.Owner(opts, rec.Node); err != nil {
		return Record{}, fmt.Errorf("ens: registry owner of %s: %w", norm, err)
	}
	if rec.Resolver, err = c.registry.Resolver(opts, rec.Node); err != nil {
		return Record{}, fmt.Errorf("ens: registry resolver of %s: %w", norm, err)
	}
	return rec, nil
}

// Read returns the agent-snapshot record of name. Errors: ErrInvalidName;
// ErrNameNotFound (no owner and no resolver); ErrNoResolver (which also
// matches ErrNoPointer) when the name has no resolver; ErrNoPointer when the
// record is empty or absent.
func (c *Client) Read(ctx context.Context, name string) (string, error) {
	rec, err := c.Lookup(ctx, name)
	if err != nil {
		return "", err
	}
	v, err := c.text(ctx, rec)
	if err != nil {
		return "", err
	}
	if v == "" {
		return "", fmt.Errorf("%w on %s", ErrNoPointer, rec.Name)
	}
	return v, nil
}

// text reads the record through the name's resolver ("" when unset).
func (c *Client) text(ctx context.Context, rec Record) (string, error) {
	if rec.Resolver == (common.Address{}) {
		if rec.Owner == (common.Address{}) {
			return "", fmt.Errorf("%w: %s", ErrNameNotFound, rec.Name)
		}
		return "", fmt.Errorf("%w for %s (owned by %s)", ErrNoResolver, rec.Name, rec.Owner)
	}
	r, err := c.resolver(rec.Resolver)
	if err != nil {
		return "", err
	}
	v, err := r.Text(&bind.CallOpts{Context: ctx}, rec.Node, TextKey)
	if err != nil {
		return "", fmt.Errorf("ens: read %s of %s from resolver %s: %w", TextKey, rec.Name, rec.Resolver, err)
	}
	return v, nil
}

// resolver returns a (cached) go-ens resolver binding; binding parses the
// ABI, which is worth doing once per address.
func (c *Client) resolver(addr common.Address) (*resolver.ContractCaller, error) {
	if v, ok := c.resolvers.Load(addr); ok {
		return v.(*resolver.ContractCaller), nil
	}
	r, err := resolver.NewContractCaller(addr, c.backend)
	if err != nil {
		return nil, fmt.Errorf("ens: bind resolver %s: %w", addr, err)
	}
	v, _ := c.resolvers.LoadOrStore(addr, r)
	return v.(*resolver.ContractCaller), nil
}

// resolverABI is go-ens's PublicResolver ABI (setText, text,
// authorisations, ...); multicallABI adds what go-ens lacks.
var (
	resolverABI  = mustABI(resolver.ContractMetaData.ABI)
	multicallABI = mustABI(`[{"type":"function","name":"multicall","stateMutability":"nonpayable",
		"inputs":[{"name":"data","type":"bytes[]"}],"outputs":[{"name":"results","type":"bytes[]"}]}]`)
)

func mustABI(s string) abi.ABI {
	a, err := abi.JSON(strings.NewReader(s))
	if err != nil {
		panic("ens: bad built-in ABI: " + err.Error())
	}
	return a
}

// redactURL keeps only the scheme and host of an RPC URL for error
// messages: providers put API keys in the path, query or userinfo.
func redactURL(u string) string {
	i := strings.Index(u, "://")
	if i < 0 {
		return "(rpc url)"
	}
	rest := u[i+3:]
	if j := strings.IndexAny(rest, "/?#"); j >= 0 {
		rest = rest[:j]
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = rest[at+1:]
	}
	return u[:i+3] + rest
}
