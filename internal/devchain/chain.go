package devchain

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/eth"
	"github.com/ethereum/go-ethereum/eth/catalyst"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/eth/filters"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/log"
	"github.com/ethereum/go-ethereum/node"
	"github.com/ethereum/go-ethereum/p2p"
	"github.com/ethereum/go-ethereum/rpc"
)

// DefaultPollInterval is how often the chain's helpers poll for receipts.
// Blocks are sealed as soon as a transaction arrives, so receipts are there
// within milliseconds.
const DefaultPollInterval = 20 * time.Millisecond

// DefaultTxTimeout bounds a wait for a receipt: blocks are sealed within
// milliseconds, so a transaction still missing after this never will be.
const DefaultTxTimeout = 30 * time.Second

// Name is an ENS name to register, owned by Owner, with the chain's
// PublicResolver as its resolver.
type Name struct {
	Name  string
	Owner common.Address
}

// Config configures a chain. The zero value is a working chain.
type Config struct {
	// Port is the HTTP JSON-RPC port on 127.0.0.1; 0 picks a free one.
	Port int
	// ChainID defaults to DefaultChainID.
	ChainID uint64
	// DevKey is funded and owns the ENS root; nil means DevKey().
	DevKey *ecdsa.PrivateKey
	// Fund lists extra accounts funded at genesis with Balance.
	Fund []common.Address
	// Balance per funded account (dev key included); nil = DefaultBalance.
	Balance *big.Int
	// Names are registered at start (parents created as needed).
	Names []Name
	// ArtifactsDir holds the ENS artifacts; "" = DefaultArtifactsDir().
	ArtifactsDir string
	// PollInterval for receipts; 0 = DefaultPollInterval.
	PollInterval time.Duration
	// DataDir persists the chain (blocks and state) so that a restarted
	// chain resumes where it stopped: ENS records survive. "" keeps
	// everything in memory.
	DataDir string
	// TxTimeout bounds the chain's own waits for a receipt (when the
	// caller's context has no earlier deadline); 0 = DefaultTxTimeout.
	TxTimeout time.Duration
	// Logger receives go-ethereum's node logs and the chain's own; nil
	// discards them.
	Logger *slog.Logger
}

// Chain is a running local chain. Its methods are safe for concurrent use;
// admin operations signed by the dev key are serialised.
type Chain struct {
	stack   *node.Node
	client  *ethclient.Client
	url     string
	chainID *big.Int
	devKey  *ecdsa.PrivateKey
	devAddr common.Address
	arts    *Artifacts
	poll    time.Duration
	timeout time.Duration
	log     *slog.Logger

	adminMu sync.Mutex // serialises dev-key transactions (nonces)

	stopMine chan struct{}
	mineDone chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// Start builds the genesis, starts the node and registers cfg.Names. The
// context bounds start-up only; Close stops the chain.
func Start(ctx context.Context, cfg Config) (*Chain, error) {
	arts, err := LoadArtifacts(cfg.ArtifactsDir)
	if err != nil {
		return nil, err
	}
	if cfg.ChainID == 0 {
		cfg.ChainID = DefaultChainID
	}
	if cfg.DevKey == nil {
		cfg.DevKey = DevKey()
	}
	if cfg.Balance == nil {
		cfg.Balance = DefaultBalance
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.TxTimeout <= 0 {
		cfg.TxTimeout = DefaultTxTimeout
	}
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("devchain: port %d out of range", cfg.Port)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	devAddr := crypto.PubkeyToAddress(cfg.DevKey.PublicKey)
	funded := append([]common.Address{devAddr}, cfg.Fund...)
	extra, err := genesisExtra(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	gen, err := genesis(cfg.ChainID, arts, devAddr, funded, cfg.Balance, extra)
	if err != nil {
		return nil, err
	}

	nodeConf := node.Config{
		Name:             "hermesd-devchain",
		DataDir:          cfg.DataDir, // "" = in memory
		HTTPHost:         "127.0.0.1",
		HTTPPort:         cfg.Port,
		HTTPModules:      []string{"eth", "net", "web3"},
		HTTPVirtualHosts: []string{"localhost"},
		HTTPTimeouts:     rpc.DefaultHTTPTimeouts,
		HTTPBodyLimit:    5 << 20,
		P2P:              p2p.Config{NoDiscovery: true, MaxPeers: 0, ListenAddr: ""},
		Logger:           log.NewLogger(logger.Handler()),
	}
	stack, err := node.New(&nodeConf)
	if err != nil {
		return nil, fmt.Errorf("devchain: new node: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			stack.Close()
		}
	}()

	ethConf := ethconfig.Defaults
	ethConf.Genesis = gen
	ethConf.NetworkId = cfg.ChainID
	ethConf.SyncMode = ethconfig.FullSync
	// The log index (filter maps) costs ~100 ms of CPU per chain, mostly
	// at shutdown; a dev chain's few logs are searched unindexed.
	ethConf.LogNoHistory = true
	ethConf.TxPool.NoLocals = true
	ethConf.TxPool.Journal = ""
	// A transaction the miner would never include (tip below the miner's
	// minimum) would make the simulated beacon seal empty blocks forever;
	// the pool refuses it instead.
	ethConf.TxPool.PriceLimit = ethConf.Miner.GasPrice.Uint64()
	ethConf.TxPool.AccountSlots = 1024
	ethConf.DatabaseCache = 16
	ethConf.TrieCleanCache = 16
	ethConf.TrieDirtyCache = 16
	ethConf.SnapshotCache = 0
	backend, err := eth.New(stack, &ethConf)
	if err != nil {
		return nil, fmt.Errorf("devchain: new eth service: %w", err)
	}
	fsys := filters.NewFilterSystem(backend.APIBackend, filters.Config{})
	stack.RegisterAPIs([]rpc.API{{Namespace: "eth", Service: filters.NewFilterAPI(fsys)}})
	// Period 0: blocks are sealed on demand by the chain's own miner
	// goroutine (see mine), not by geth's dev API loop, whose transaction
	// subscription can come back nil and then never seal anything.
	// Was: the beacon API seals a block whenever the pool receives a
	// transaction. Its APIs must be registered before the node starts.
	beacon, err := catalyst.NewSimulatedBeacon(0, common.Address{}, backend)
	if err != nil {
		return nil, fmt.Errorf("devchain: simulated beacon: %w", err)
	}
	stack.RegisterLifecycle(beacon)
	if err := stack.Start(); err != nil {
		return nil, fmt.Errorf("devchain: start node: %w", err)
	}
	url := stack.HTTPEndpoint()
	client, err := ethclient.DialContext(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("devchain: dial %s: %w", url, err)
	}
	c := &Chain{
		stack:   stack,
		client:  client,
		url:     url,
		chainID: new(big.Int).SetUint64(cfg.ChainID),
		devKey:  cfg.DevKey,
		devAddr: devAddr,
		arts:    arts,
		poll:    cfg.PollInterval,
		timeout: cfg.TxTimeout,
		log:     logger,
	}
	c.startMining(backend, beacon)
	if len(cfg.Names) > 0 {
		if err := c.RegisterMany(ctx, cfg.Names); err != nil {
			c.stopMining()
			client.Close()
			return nil, err
		}
	}
	ok = true
	logger.Debug("devchain started", "url", url, "chain_id", cfg.ChainID)
	return c, nil
}

// Close stops the node and releases its port. It is safe to call twice.
func (c *Chain) Close() error {
	c.closeOnce.Do(func() {
		c.stopMining()
		c.client.Close()
		c.closeErr = c.stack.Close()
		if errors.Is(c.closeErr, node.ErrNodeStopped) {
			c.closeErr = nil
		}
	})
	return c.closeErr
}

// URL is the HTTP JSON-RPC endpoint, e.g. http://127.0.0.1:39211.
func (c *Chain) URL() string { return c.url }

// ChainID is the chain id.
func (c *Chain) ChainID() *big.Int { return new(big.Int).Set(c.chainID) }

// Client is an HTTP client of the chain owned by the Chain (closed by Close).
func (c *Chain) Client() *ethclient.Client { return c.client }

// RegistryAddress is the ENS registry's address (the canonical one).
func (c *Chain) RegistryAddress() common.Address { return RegistryAddress }

// ResolverAddress is the genesis PublicResolver's address.
func (c *Chain) ResolverAddress() common.Address { return ResolverAddress }

// DevKey is the funded key that owns the ENS root.
func (c *Chain) DevKey() *ecdsa.PrivateKey { return c.devKey }

// DevAddress is DevKey's address.
func (c *Chain) DevAddress() common.Address { return c.devAddr }

// Artifacts are the parsed ENS contracts the chain runs.
func (c *Chain) Artifacts() *Artifacts { return c.arts }

// minePoll bounds how long a transaction can wait for its block if the
// pool's new-transaction event is missed.
const minePoll = 25 * time.Millisecond

// startMining seals a block whenever the pool holds executable
// transactions: at once on the pool's event, and on a short poll as a
// backstop.
func (c *Chain) startMining(backend *eth.Ethereum, beacon *catalyst.SimulatedBeacon) {
	c.stopMine, c.mineDone = make(chan struct{}), make(chan struct{})
	pool := backend.TxPool()
	// The pool delivers events synchronously: a separate goroutine must
	// always be ready to take them, or the pool (and our Sync on it) would
	// deadlock while we seal.
	newTxs := make(chan core.NewTxsEvent)
	kick := make(chan struct{}, 1)
	sub := pool.SubscribeTransactions(newTxs, true)
	var wg sync.WaitGroup
	if sub != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-c.stopMine:
					return
				case <-sub.Err():
					return
				case <-newTxs:
					select {
					case kick <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(minePoll)
		defer tick.Stop()
		for {
			select {
			case <-c.stopMine:
				return
			case <-kick:
			case <-tick.C:
			}
			// Seal until nothing executable is left (a bounded number of
			// times: a transaction the miner refuses must not spin us).
			for i := 0; i < 64; i++ {
				pool.Sync() // let the pool promote what just arrived
				if executable, _ := pool.Stats(); executable == 0 {
					break
				}
				beacon.Commit()
			}
		}
	}()
	go func() {
		wg.Wait()
		if sub != nil {
			sub.Unsubscribe()
		}
		close(c.mineDone)
	}()
}

func (c *Chain) stopMining() {
	if c.stopMine == nil {
		return
	}
	select {
	case <-c.stopMine:
	default:
		close(c.stopMine)
	}
	<-c.mineDone
}
