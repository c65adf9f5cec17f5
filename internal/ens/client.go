package ens

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/accounts/abi/bind"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/wealdtech/go-ens/v3/contracts/registry"
	"github.com/wealdtech/go-ens/v3/contracts/resolver"

	"github.com/hermesd/hermesd/internal/redact"
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
	// RPCURL is the node's JSON-RPC endpoint (http, https, ws or wss);
	// ignored when Backend is set. It may carry an API key: only its
	// scheme://host[:port] ever appears in an error or a log line.
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
	// RPCTimeout bounds each request to the node (default 30 s); a node
	// that does not answer in time is unavailable (ErrUnavailable).
	RPCTimeout time.Duration
	// TxTimeout bounds the wait for a transaction's inclusion.
	TxTimeout time.Duration
	// GasCap is the most gas one transaction may use (default 1,000,000).
	GasCap uint64
	// MaxBatch is the most updates WriteBatches puts in one transaction;
	// 0 means as many as fit under GasCap.
	MaxBatch int
	// MaxFeePerGas caps the EIP-1559 fee cap in wei; nil = no cap. When the
	// base fee alone is above it, writes fail with ErrFeeTooHigh.
	MaxFeePerGas *big.Int
	// PollInterval between receipt polls (default 1 s; a dev chain wants
	// ~20 ms).
	PollInterval time.Duration
	// Logger gets debug/info records about lookups and transactions; nil
	// discards them.
	Logger *slog.Logger

	// UniversalResolver, when set, is where every read resolves names
	// (ENS's on mainnet and Sepolia); zero walks the registry (ENSIP-10).
	UniversalResolver common.Address
	// GatewayTimeout bounds one CCIP-read gateway request, headers and
	// body (default DefaultGatewayTimeout).
	GatewayTimeout time.Duration
	// GatewayMaxBody bounds one gateway answer in bytes (default
	// DefaultGatewayMaxBody, at most MaxGatewayMaxBody).
	GatewayMaxBody int64
	// GatewayHTTPClient makes the gateway requests; nil makes one.
	GatewayHTTPClient *http.Client

	// Records, when set, makes a records client: the contract at this
	// address, on the chain RPCURL reaches, holds the names' text records
	// (docs/design.md §7.2) — an L2 resolver or registry with the
	// PublicResolver's setText/text ABI, which L1 resolution reaches
	// through CCIP-read. Writes go to it directly and their compare-and-
	// set reads text() from it directly, not through name resolution;
	// whether L1 resolution shows the value is the caller's to confirm.
	// Registry and UniversalResolver are not used, and the registry
	// methods (Lookup, Owner, Transfer) fail with ErrRecordsClient.
	Records common.Address

	// WriteGate, when set, is asked right before each transaction is
	// signed: its error (a fleet node that may not write now) fails the
	// write with nothing sent.
	WriteGate func() error
}

// DefaultRPCTimeout is the default bound of one request to the node.
const DefaultRPCTimeout = 30 * time.Second

// Client reads and writes agent-snapshot records. Safe for concurrent use.
type Client struct {
	node         *node
	registry     *registry.ContractCaller
	registryAddr common.Address
	wantChain    uint64
	signer       *Signer
	txTimeout    time.Duration
	poll         time.Duration
	gasCap       uint64
	maxBatch     int
	maxFee       *big.Int
	log          *slog.Logger

	// The node's chain, learnt on first contact (see setup).
	info     atomic.Pointer[chainInfo]
	setupSem chan struct{}

	resolvers sync.Map // common.Address -> *resolver.ContractCaller
	res       *Resolver
	// records is Config.Records (zero: the names' own resolvers).
	records common.Address
	// multicall remembers whether a resolver has multicall(bytes[]).
	multicall sync.Map // common.Address -> bool

	// Test hooks: a fixed gas limit instead of the estimate, and a call
	// between the checks and the send.
	fixedGas   uint64
	beforeSend func()
	writeGate  func() error
}

// chainInfo is what the client learns from the node once.
type chainInfo struct {
	id     *big.Int
	nonces *nonceManager // nil for a read-only client
}

// New checks cfg and returns a client. It does no network I/O, so it does
// not fail because the node is down: the connection, the chain-id check
// and the registry check happen on first use (see Ping), and are retried
// by every call until they succeed.
func New(ctx context.Context, cfg Config) (*Client, error) {
	c := &Client{
		registryAddr: cfg.Registry,
		wantChain:    cfg.ChainID,
		signer:       cfg.Signer,
		txTimeout:    cfg.TxTimeout,
		poll:         cfg.PollInterval,
		gasCap:       cfg.GasCap,
		maxBatch:     cfg.MaxBatch,
		log:          cfg.Logger,
		setupSem:     make(chan struct{}, 1),
		records:      cfg.Records,
		writeGate:    cfg.WriteGate,
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
	if c.maxBatch < 0 {
		return nil, fmt.Errorf("ens: max batch %d is negative", c.maxBatch)
	}
	if cfg.MaxFeePerGas != nil {
		c.maxFee = new(big.Int).Set(cfg.MaxFeePerGas)
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.node = &node{
		fixed:   cfg.Backend,
		timeout: cfg.RPCTimeout,
		log:     c.log,
		dialing: make(chan struct{}, 1),
		slots:   make(chan struct{}, maxInFlight),
		origin:  "the configured backend",
	}
	if c.node.timeout <= 0 {
		c.node.timeout = DefaultRPCTimeout
	}
	if cfg.Backend == nil {
		u, err := url.Parse(cfg.RPCURL)
		switch {
		case cfg.RPCURL == "":
			return nil, errors.New("ens: no RPC URL configured")
		case err != nil:
			// url's error quotes the URL, key and all.
			return nil, errors.New("ens: the RPC URL does not parse")
		case u.Host == "":
			return nil, fmt.Errorf("ens: the RPC URL %s has no host", redact.URL(cfg.RPCURL))
		}
		switch u.Scheme {
		case "http", "https":
		case "ws", "wss":
			c.node.ws = true
		default:
			return nil, fmt.Errorf("ens: the RPC URL %s must be http, https, ws or wss", redact.URL(cfg.RPCURL))
		}
		c.node.url = cfg.RPCURL
		c.node.origin = redact.Origin(u)
		c.node.scrub = redact.NewScrubber(cfg.RPCURL)
	}
	var err error
	if c.registry, err = registry.NewContractCaller(c.registryAddr, c.node); err != nil {
		return nil, fmt.Errorf("ens: bind registry: %w", err)
	}
	c.res, err = NewResolver(c.node, ResolverConfig{
		Registry:          c.registryAddr,
		UniversalResolver: cfg.UniversalResolver,
		GatewayTimeout:    cfg.GatewayTimeout,
		GatewayMaxBody:    cfg.GatewayMaxBody,
		HTTPClient:        cfg.GatewayHTTPClient,
		Logger:            c.log,
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Close closes the connection the client made (not a Backend passed in).
func (c *Client) Close() { c.node.close() }

// setup learns and checks the node's chain once: chain id (against
// Config.ChainID), the registry's code and, for a signer, the genesis hash
// that keys its nonce counter. A failure is not remembered: the next call
// tries again.
func (c *Client) setup(ctx context.Context) (*chainInfo, error) {
	if ci := c.info.Load(); ci != nil {
		return ci, nil
	}
	select {
	case c.setupSem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("ens: connect: %w", ctx.Err())
	}
	defer func() { <-c.setupSem }()
	if ci := c.info.Load(); ci != nil {
		return ci, nil
	}
	id, err := c.node.ChainID(ctx)
	if err != nil {
		return nil, fmt.Errorf("ens: %w", err)
	}
	if c.wantChain != 0 && (!id.IsUint64() || id.Uint64() != c.wantChain) {
		return nil, fmt.Errorf("%w: the node at %s is on chain %s, the configured chain id is %d", ErrWrongChain, c.node.origin, id, c.wantChain)
	}
	if err := c.checkContracts(ctx, id); err != nil {
		return nil, err
	}
	ci := &chainInfo{id: id}
	if c.signer != nil {
		g, err := c.node.HeaderByNumber(ctx, new(big.Int))
		if err != nil {
			return nil, fmt.Errorf("ens: genesis header: %w", err)
		}
		ci.nonces = nonceManagerFor(id, g.Hash(), c.signer.Address())
	}
	c.info.Store(ci)
	c.log.DebugContext(ctx, "ens: chain checked", "rpc", c.node.origin, "chain_id", id, "registry", c.registryAddr, "records", c.records)
	return ci, nil
}

// checkContracts checks that the contracts the client uses are there: the
// records contract of a records client, else the registry and the
// Universal Resolver when one is configured.
func (c *Client) checkContracts(ctx context.Context, id *big.Int) error {
	if c.records != (common.Address{}) {
		code, err := c.node.CodeAt(ctx, c.records, nil)
		if err != nil {
			return fmt.Errorf("ens: records contract code: %w", err)
		}
		if len(code) == 0 {
			return fmt.Errorf("%w: no contract at %s on chain %s (wrong network or records address?)", ErrNoRecords, c.records, id)
		}
		return nil
	}
	code, err := c.node.CodeAt(ctx, c.registryAddr, nil)
	if err != nil {
		return fmt.Errorf("ens: registry code: %w", err)
	}
	if len(code) == 0 {
		return fmt.Errorf("%w: no contract at %s on chain %s (wrong network or registry address?)", ErrNoRegistry, c.registryAddr, id)
	}
	if ur := c.res.UniversalResolver(); ur != (common.Address{}) {
		code, err := c.node.CodeAt(ctx, ur, nil)
		if err != nil {
			return fmt.Errorf("ens: Universal Resolver code: %w", err)
		}
		if len(code) == 0 {
			return fmt.Errorf("%w: no contract at %s on chain %s (wrong network or universal_resolver address?)", ErrNoUniversalResolver, ur, id)
		}
	}
	return nil
}

// Ping checks that the node answers and is still on the chain the client
// set up with (doing that setup first if it has not succeeded yet). It is
// cheap (eth_chainId), for probing whether an unavailable chain is back:
// errors.Is(err, ErrUnavailable) says it is not.
func (c *Client) Ping(ctx context.Context) error {
	ci, err := c.setup(ctx)
	if err != nil {
		return err
	}
	id, err := c.node.ChainID(ctx)
	if err != nil {
		return fmt.Errorf("ens: ping: %w", err)
	}
	if id.Cmp(ci.id) != 0 {
		// Set up again on next use: with a configured chain id that
		// fails; without one the new chain is adopted.
		c.info.CompareAndSwap(ci, nil)
		return fmt.Errorf("%w: the node at %s moved from chain %s to chain %s", ErrWrongChain, c.node.origin, ci.id, id)
	}
	return nil
}

// Head is a block: its number and hash.
type Head struct {
	Number uint64
	Hash   common.Hash
}

// Head is the node's latest block (one eth_getBlockByNumber).
func (c *Client) Head(ctx context.Context) (Head, error) {
	return c.block(ctx, nil)
}

// Block is the node's canonical block at number; ethereum.NotFound
// (wrapped) when the chain is not that long.
func (c *Client) Block(ctx context.Context, number uint64) (Head, error) {
	return c.block(ctx, new(big.Int).SetUint64(number))
}

func (c *Client) block(ctx context.Context, number *big.Int) (Head, error) {
	if _, err := c.setup(ctx); err != nil {
		return Head{}, err
	}
	h, err := c.node.HeaderByNumber(ctx, number)
	if err != nil {
		return Head{}, fmt.Errorf("ens: block header: %w", err)
	}
	if h == nil || h.Number == nil || !h.Number.IsUint64() {
		return Head{}, fmt.Errorf("%w: block header without a number", ErrUnavailable)
	}
	return Head{Number: h.Number.Uint64(), Hash: h.Hash()}, nil
}

// ChainID is the node's chain id, or nil before the first successful
// contact with the node.
func (c *Client) ChainID() *big.Int {
	if ci := c.info.Load(); ci != nil {
		return new(big.Int).Set(ci.id)
	}
	return nil
}

// From is the signer's address (zero for a read-only client).
func (c *Client) From() common.Address {
	if c.signer == nil {
		return common.Address{}
	}
	return c.signer.Address()
}

// Records is the contract a records client writes (zero for a client of
// the names' own resolvers).
func (c *Client) Records() common.Address { return c.records }

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
	if c.records != (common.Address{}) {
		return Record{}, ErrRecordsClient
	}
	if _, err := c.setup(ctx); err != nil {
		return Record{}, err
	}
	return c.lookup(ctx, norm)
}

func (c *Client) lookup(ctx context.Context, norm string) (Record, error) {
	rec := Record{Name: norm, Node: nameHash(norm)}
	opts := &bind.CallOpts{Context: ctx}
	var err error
	if rec.Owner, err = c.registry.Owner(opts, rec.Node); err != nil {
		return Record{}, fmt.Errorf("ens: registry owner of %s: %w", norm, err)
	}
	if rec.Resolver, err = c.registry.Resolver(opts, rec.Node); err != nil {
		return Record{}, fmt.Errorf("ens: registry resolver of %s: %w", norm, err)
	}
	return rec, nil
}

// Read returns the agent-snapshot record of name, resolved as Resolve
// does. Errors: ErrInvalidName; ErrNameNotFound (no owner and no resolver
// ENSIP-10 accepts); ErrNoResolver (which also matches ErrNoPointer) when
// the name has an owner but no such resolver; ErrNoPointer when the record
// is empty or absent; ErrOffchain and ErrGatewayUnavailable from CCIP-read.
func (c *Client) Read(ctx context.Context, name string) (string, error) {
	res, err := c.Resolve(ctx, name)
	if err != nil {
		return "", err
	}
	if res.Value == "" {
		return "", fmt.Errorf("%w on %s", ErrNoPointer, res.Name)
	}
	return res.Value, nil
}

// Resolve resolves name's agent-snapshot record the way ENS specifies
// (docs/design.md §7): through the Universal Resolver when one is
// configured, else ENSIP-10 over the registry, following CCIP-read
// lookups. Every read of a pointer goes through it — restores, drills,
// `pointer get`, status, the compare-and-set of a write, the periodic
// check — so they all see what a fresh machine would. The Resolution says
// which resolver answered and how; an empty Value is an empty record.
//
// A records client instead reads text() from its records contract
// (PathRecords): where the record lives, not what L1 resolution shows.
func (c *Client) Resolve(ctx context.Context, name string) (Resolution, error) {
	norm, err := Normalize(name)
	if err != nil {
		return Resolution{}, err
	}
	if _, err := c.setup(ctx); err != nil {
		return Resolution{}, err
	}
	if c.records != (common.Address{}) {
		return c.readRecordsContract(ctx, norm)
	}
	return c.res.Text(ctx, name, TextKey)
}

// valueForWrite is the record's value as Resolve reads it ("" when the
// name has no record), for a compare-and-set.
func (c *Client) valueForWrite(ctx context.Context, name string) (string, error) {
	var (
		res Resolution
		err error
	)
	if c.records != (common.Address{}) {
		res, err = c.readRecordsContract(ctx, name)
	} else {
		res, err = c.res.Text(ctx, name, TextKey)
	}
	if err != nil {
		return "", err
	}
	return res.Value, nil
}

// readRecordsContract reads text(node, agent-snapshot) of the normalised
// name from the records contract (not through L1 resolution).
func (c *Client) readRecordsContract(ctx context.Context, norm string) (Resolution, error) {
	res := Resolution{Name: norm, Node: nameHash(norm), Key: TextKey, Resolver: c.records, Via: PathRecords}
	data, err := resolverABI.Pack("text", res.Node, TextKey)
	if err != nil {
		return Resolution{}, fmt.Errorf("ens: pack text: %w", err)
	}
	out, err := c.node.CallContract(ctx, ethereum.CallMsg{To: &c.records, Data: data}, nil)
	if err != nil {
		if _, reverted := revertData(err); reverted {
			return Resolution{}, fmt.Errorf("ens: the records contract %s refused text() for %s (is it a resolver?): %w", c.records, norm, err)
		}
		return Resolution{}, fmt.Errorf("ens: read %s of %s from the records contract %s: %w", TextKey, norm, c.records, err)
	}
	if err := decodeTextResult(&res, out); err != nil {
		return Resolution{}, err
	}
	return res, nil
}

// hasMulticall reports whether the resolver at addr has the
// PublicResolver's multicall(bytes[]): an empty multicall answers an
// empty bytes[]. A resolver that lacks it (reverts, or answers anything
// else) gets one transaction per update. The answer is kept per address.
func (c *Client) hasMulticall(ctx context.Context, addr common.Address) (bool, error) {
	if v, ok := c.multicall.Load(addr); ok {
		return v.(bool), nil
	}
	data, err := multicallABI.Pack("multicall", [][]byte{})
	if err != nil {
		return false, fmt.Errorf("ens: pack multicall: %w", err)
	}
	out, err := c.node.CallContract(ctx, ethereum.CallMsg{From: c.From(), To: &addr, Data: data}, nil)
	has := false
	switch {
	case err != nil && chainWide(err):
		return false, fmt.Errorf("ens: probe multicall of %s: %w", addr, err)
	case err == nil:
		results, uerr := unpackOne[[][]byte](multicallABI.Methods["multicall"].Outputs, out)
		has = uerr == nil && len(results) == 0
	}
	c.multicall.Store(addr, has)
	c.log.DebugContext(ctx, "ens: resolver multicall probed", "resolver", addr, "multicall", has)
	return has, nil
}

// resolver returns a (cached) go-ens resolver binding; binding parses the
// ABI, which is worth doing once per address.
func (c *Client) resolver(addr common.Address) (*resolver.ContractCaller, error) {
	if v, ok := c.resolvers.Load(addr); ok {
		return v.(*resolver.ContractCaller), nil
	}
	r, err := resolver.NewContractCaller(addr, c.node)
	if err != nil {
		return nil, fmt.Errorf("ens: bind resolver %s: %w", addr, err)
	}
	v, _ := c.resolvers.LoadOrStore(addr, r)
	return v.(*resolver.ContractCaller), nil
}

// resolverABI is go-ens's PublicResolver ABI (setText, text,
// authorisations, ...); multicallABI and registryABI (setOwner,
// setResolver, isApprovedForAll) add what go-ens's older bindings lack.
var (
	resolverABI  = mustABI(resolver.ContractMetaData.ABI)
	multicallABI = mustABI(`[{"type":"function","name":"multicall","stateMutability":"nonpayable",
		"inputs":[{"name":"data","type":"bytes[]"}],"outputs":[{"name":"results","type":"bytes[]"}]}]`)
	registryABI = mustABI(`[{"type":"function","name":"setOwner","stateMutability":"nonpayable",
		"inputs":[{"name":"node","type":"bytes32"},{"name":"owner","type":"address"}],"outputs":[]},
		{"type":"function","name":"setResolver","stateMutability":"nonpayable",
		"inputs":[{"name":"node","type":"bytes32"},{"name":"resolver","type":"address"}],"outputs":[]},
		{"type":"function","name":"isApprovedForAll","stateMutability":"view",
		"inputs":[{"name":"owner","type":"address"},{"name":"operator","type":"address"}],"outputs":[{"name":"","type":"bool"}]}]`)
)

func mustABI(s string) abi.ABI {
	a, err := abi.JSON(strings.NewReader(s))
	if err != nil {
		panic("ens: bad built-in ABI: " + err.Error())
	}
	return a
}
