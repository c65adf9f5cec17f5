package devchain

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/rawdb"
	"github.com/ethereum/go-ethereum/core/txpool"
	"github.com/ethereum/go-ethereum/core/types"
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
	// chain resumes where it stopped: ENS records survive. Every block is
	// on disk before any RPC response can show it, so even after a kill -9
	// nothing a client saw mined is lost; a directory that cannot resume
	// at its last block is refused (ErrDamaged). "" keeps everything in
	// memory.
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
	front   *front
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
//
// With a DataDir, Start resumes the chain stored there at its last durable
// head, or creates it; a directory it cannot resume is refused with an
// error matching ErrDamaged that says what to do. Start returns only once
// the genesis and the registrations are on disk.
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
	makeGenesis := func(extra []byte) (*core.Genesis, error) {
		return genesis(cfg.ChainID, arts, devAddr, funded, cfg.Balance, extra)
	}
	var dir string // "" = in memory
	if cfg.DataDir != "" {
		if dir, err = filepath.Abs(cfg.DataDir); err != nil {
			return nil, fmt.Errorf("devchain: data dir: %w", err)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("devchain: %w", err)
		}
		if err := checkDamagedMarker(dir); err != nil {
			return nil, err
		}
	}

	// No HTTP here: the chain serves JSON-RPC itself (see front).
	nodeConf := node.Config{
		Name:    instanceName,
		DataDir: dir,
		P2P:     p2p.Config{NoDiscovery: true, MaxPeers: 0, ListenAddr: ""},
		Logger:  log.NewLogger(logger.Handler()),
	}
	stack, err := node.New(&nodeConf) // locks dir against a second chain
	if err != nil {
		return nil, fmt.Errorf("devchain: new node: %w", err)
	}
	var fr *front
	ok := false
	defer func() {
		if !ok {
			if fr != nil {
				fr.close()
			}
			stack.Close()
		}
	}()

	ethConf := ethconfig.Defaults
	ethConf.NetworkId = cfg.ChainID
	ethConf.SyncMode = ethconfig.FullSync
	// The log index (filter maps) costs ~100 ms of CPU per chain, mostly
	// at shutdown; a dev chain's few logs are searched unindexed.
	ethConf.LogNoHistory = true
	ethConf.TxPool.NoLocals = true
	ethConf.TxPool.Journal = ""
	ethConf.BlobPool.Datadir = "" // pending transactions never outlive the process
	// A transaction the miner would never include (tip below the miner's
	// minimum) would make the simulated beacon seal empty blocks forever;
	// the pool refuses it instead.
	ethConf.TxPool.PriceLimit = ethConf.Miner.GasPrice.Uint64()
	ethConf.TxPool.AccountSlots = 1024
	ethConf.DatabaseCache = 16
	ethConf.TrieCleanCache = 16
	ethConf.TrieDirtyCache = 16
	ethConf.SnapshotCache = 0
	head := diskHead{fresh: true}
	if dir != "" {
		// The default path state scheme keeps the state of recent blocks
		// in memory and writes it out only on a clean close: a kill lost
		// the last blocks, and in a first run the genesis state. The hash
		// scheme without pruning (an archive node) commits every block's
		// state trie to the database before the block becomes head.
		ethConf.StateScheme = rawdb.HashScheme
		ethConf.NoPruning = true
		head, err = inspect(stack, dir, node.DatabaseOptions{
			Cache:             ethConf.DatabaseCache,
			Handles:           ethConf.DatabaseHandles,
			AncientsDirectory: ethConf.DatabaseFreezer,
			EraDirectory:      ethConf.DatabaseEra,
		}, makeGenesis)
		if err != nil {
			return nil, err
		}
	}
	extra := head.extra
	if head.fresh {
		if extra, err = randomExtra(); err != nil {
			return nil, err
		}
	}
	if ethConf.Genesis, err = makeGenesis(extra); err != nil {
		return nil, err
	}
	backend, err := eth.New(stack, &ethConf)
	if err != nil {
		if dir != "" {
			return nil, fmt.Errorf("devchain: open chain at %s: %w (if it is damaged, delete %s to start over)", dir, err, dir)
		}
		return nil, fmt.Errorf("devchain: new eth service: %w", err)
	}
	if cur := backend.BlockChain().CurrentBlock(); !head.fresh && cur.Hash() != head.hash {
		// go-ethereum "repaired" something inspect did not foresee by
		// rewinding; it rewrote the head markers, so remember the refusal.
		return nil, markDamaged(dir, fmt.Sprintf("go-ethereum moved its head from block %d to block %d on opening", head.number, cur.Number))
	}
	fsys := filters.NewFilterSystem(backend.APIBackend, filters.Config{})
	// Period 0: blocks are sealed on demand by the chain's own miner
	// goroutine (see startMining), not by geth's dev API loop, whose transaction
	// subscription can come back nil and then never seal anything.
	beacon, err := catalyst.NewSimulatedBeacon(0, common.Address{}, backend)
	if err != nil {
		return nil, fmt.Errorf("devchain: simulated beacon: %w", err)
	}
	stack.RegisterLifecycle(beacon)
	if err := stack.Start(); err != nil {
		return nil, fmt.Errorf("devchain: start node: %w", err)
	}
	// Every chain gates its RPC on sealing: a request never sees a block
	// before the transaction pool has caught up with it (else a sender
	// funded in that block is refused for "insufficient funds"), nor, for
	// a chain on disk, before the block is durable.
	dur := &durability{sync: func() error { return nil }}
	if dir != "" {
		db := backend.ChainDb()
		// The genesis of a first run is on disk before anyone sees it.
		if err := db.SyncKeyValue(); err != nil {
			return nil, fmt.Errorf("devchain: sync chain database: %w", err)
		}
		dur.sync = db.SyncKeyValue
	}
	fr, err = startFront(cfg.Port, publicAPIs(backend, fsys, stack.Server().Name), dur)
	if err != nil {
		return nil, err
	}
	client, err := ethclient.DialContext(ctx, fr.url)
	if err != nil {
		return nil, fmt.Errorf("devchain: dial %s: %w", fr.url, err)
	}
	c := &Chain{
		stack:   stack,
		front:   fr,
		client:  client,
		url:     fr.url,
		chainID: new(big.Int).SetUint64(cfg.ChainID),
		devKey:  cfg.DevKey,
		devAddr: devAddr,
		arts:    arts,
		poll:    cfg.PollInterval,
		timeout: cfg.TxTimeout,
		log:     logger,
	}
	c.startMining(backend, beacon, dur)
	if len(cfg.Names) > 0 {
		if err := c.RegisterMany(ctx, cfg.Names); err != nil {
			c.stopMining()
			client.Close()
			return nil, err
		}
	}
	ok = true
	logger.Debug("devchain started", "url", c.url, "chain_id", cfg.ChainID, "data_dir", dir, "head", backend.BlockChain().CurrentBlock().Number)
	return c, nil
}

// publicAPIs are the namespaces geth serves with --http.api eth,net,web3.
func publicAPIs(backend *eth.Ethereum, fsys *filters.FilterSystem, version string) []rpc.API {
	var apis []rpc.API
	for _, api := range backend.APIs() {
		if api.Namespace == "eth" || api.Namespace == "net" {
			apis = append(apis, api)
		}
	}
	return append(apis,
		rpc.API{Namespace: "eth", Service: filters.NewFilterAPI(fsys)},
		rpc.API{Namespace: "web3", Service: &web3API{version: version}},
	)
}

// Close stops the node and releases its port. It is safe to call twice.
func (c *Chain) Close() error {
	c.closeOnce.Do(func() {
		c.stopMining()
		c.client.Close()
		ferr := c.front.close()
		serr := c.stack.Close()
		if errors.Is(serr, node.ErrNodeStopped) {
			serr = nil
		}
		c.closeErr = errors.Join(ferr, serr)
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
// backstop. With dur, each block is on disk before any request sees it.
func (c *Chain) startMining(backend *eth.Ethereum, beacon *catalyst.SimulatedBeacon, dur *durability) {
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
				if err := c.seal(backend.BlockChain(), pool, beacon, dur); err != nil {
					// Nothing more can be made durable: the RPC
					// server answers every request with this error.
					c.log.Error("devchain: sealing stopped", "err", err)
					return
				}
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

// seal seals one block and holds every RPC request back until the pool
// has taken the new head into account and the block is synced to disk.
func (c *Chain) seal(bc *core.BlockChain, pool *txpool.TxPool, beacon *catalyst.SimulatedBeacon, dur *durability) error {
	var head *types.Header
	err := dur.seal(func() bool {
		before := bc.CurrentBlock().Hash()
		beacon.Commit()
		if cur := bc.CurrentBlock(); cur.Hash() != before {
			head = cur
		}
		if head != nil {
			pool.Sync()
		}
		return head != nil
	})
	if err == nil && head != nil {
		c.log.Debug("devchain: block sealed", "number", head.Number)
	}
	return err
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
