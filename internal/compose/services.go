package compose

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"log/slog"
	"math/big"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/pointer"
	"github.com/hermesd/hermesd/internal/quilt"
	"github.com/hermesd/hermesd/internal/receipts"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
	"github.com/hermesd/hermesd/internal/walrus"
)

// Services are the clients and secrets a configuration asks for.
type Services struct {
	Config *config.Config
	Log    *slog.Logger
	Walrus *walrus.Client
	// Chain is nil when no agent has an ENS name.
	Chain *ens.Client
	// Records are the clients that write records where they live when
	// that is not on L1 (ens.records), by id: only those some agent
	// uses, and none for a read-only build.
	Records map[string]*ens.Client
	// Registries read the owners of names in the registry of an
	// ens.records target's chain (ens.records[].registry), by id: who may
	// write a record there, so what a transfer of such a name changes.
	// Only for targets some agent uses that name a registry.
	Registries map[string]*ens.Client
	// Self is the chain signer's address (zero when it is not loaded).
	Self common.Address
	Key  cipher.Key
	// AgentKeys are the keys of the agents configured with agents[].key,
	// by agent id.
	AgentKeys map[string]AgentKeys
	// MissingKeys says, in a fleet, why this node cannot open an agent's
	// key, by agent id: the node never takes those agents.
	MissingKeys map[string]string
	// Seal is the Seal side (key servers, requester key, policy); nil
	// when the configuration does not use Seal.
	Seal *snapshot.Sealing
	// ReceiptSigner signs transition receipts; nil disables them.
	ReceiptSigner *ecdsa.PrivateKey
	// Trusted are the operators whose receipt signatures are accepted:
	// receipts.trusted and the receipt signer's own address.
	Trusted []common.Address

	// Quilts gathers the small packs of every agent into quilts; nil when
	// walrus.quilts is off or the services only read.
	Quilts *quilt.Batcher

	// Fleet is the fleet node the services write for (nil: no fleet).
	Fleet Fleet

	store   *walrusStore // shared by every pipeline (one patch cache)
	ledgers *ledgers

	// identities are every agent's (Pipeline.Others), built once.
	identities []string
}

// Observer sees what the services do, for the metrics and the outage
// prober of the process that runs them (the daemon). Build hands it to
// the clients it makes; its methods must not block.
type Observer interface {
	// WalrusAttempt sees every HTTP attempt of the Walrus client.
	WalrusAttempt(walrus.Attempt)
	// Quilt sees every quilt the batcher stores, or fails to.
	Quilt(quilt.Batch)
	// WalrusRecovered returns a channel that is closed when Walrus, seen
	// failing, answers again (nil: no outage seen): a Walrus retry
	// waiting out its backoff goes then (walrus.Config.Recovered).
	WalrusRecovered() <-chan struct{}
}

// Options adjust Build.
type Options struct {
	// Version is what this process was built as (the daemon advertises
	// it in its fleet registration); "" says "dev".
	Version string
	// ReadOnly builds clients without write credentials: no chain signer
	// (restores and listings only read pointers; an init container need
	// not hold the chain key), no publisher token, no receipt signer.
	ReadOnly bool
	// NoKey skips every key (the snapshot key and agents[].key): the
	// agent key comes from the key escrow of the agent's head pack
	// (restore --escrow), with only the Seal requester's Sui key; the
	// pipelines hold no key until RecoverAgentKey sets one.
	NoKey bool
	// Batch makes small packs wait walrus.batch_window for other agents'
	// (the daemon); without it a command that snapshots once stores each
	// small pack at once, as a quilt of its own.
	Batch bool
	// Observer, when set, sees the Walrus client's attempts and the quilt
	// batcher's quilts, and says when Walrus is back after an outage.
	Observer Observer
	// Fleet, when set, makes every write of the services ask its fence
	// first (Walrus stores, chain transactions) and every agent's head
	// write its fleet head and ask whether this node owns the agent.
	Fleet Fleet
}

// Fleet is the fleet node a daemon runs as (docs/design.md §12).
type Fleet interface {
	// Check refuses every write (of kind, counted) while the node may
	// not write.
	Check(kind string) error
	// Gate refuses agent's writes (of kind) unless the node owns it and
	// may write.
	Gate(agent, kind string) error
	// PutHead writes agent's fleet head, conditioned on owning it.
	pointer.Fleet
}

// Kinds of writes a fleet fence refuses, as the metrics count them.
const (
	WriteWalrus    = "walrus_store"
	WriteChain     = "chain_tx"
	WriteFleetHead = "fleet_head"
	WriteState     = "state_save"
	WriteHook      = "hook"
)

// Build creates the services the configuration asks for. Every secret is
// read and checked here, so a bad one stops start-up with its field name.
func Build(ctx context.Context, c *config.Config, log *slog.Logger, opts Options) (*Services, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Services{Config: c, Log: log, ledgers: &ledgers{}, identities: identities(c)}
	// Format seal needs no snapshot key; one that is configured still
	// opens the agent's older v1/v2 snapshots.
	if !opts.NoKey && (!c.Encryption.Key.IsZero() || c.Encryption.Format != string(snapshot.FormatSeal)) {
		key, err := LoadKey(c.Encryption.Key)
		if err != nil {
			return nil, fmt.Errorf("encryption.key: %w", err)
		}
		s.Key = key
	}
	var err error
	if !opts.NoKey {
		if s.AgentKeys, s.MissingKeys, err = agentKeys(c); err != nil {
			return nil, err
		}
	}
	if s.Seal, err = Sealing(c, log); err != nil {
		return nil, err
	}

	wc, err := WalrusConfig(c, !opts.ReadOnly, log.With("component", "walrus"))
	if err != nil {
		return nil, err
	}
	obs := opts.Observer
	if obs != nil {
		wc.OnAttempt, wc.Recovered = obs.WalrusAttempt, obs.WalrusRecovered
	}
	s.Fleet = opts.Fleet
	if f := opts.Fleet; f != nil {
		wc.WriteGate = func() error { return f.Check(WriteWalrus) }
	}
	if s.Walrus, err = walrus.New(wc); err != nil {
		return nil, fmt.Errorf("walrus: %w", err)
	}
	s.store = newStore(s.Walrus)
	if c.Walrus.Quilts && !opts.ReadOnly {
		var window time.Duration
		if opts.Batch {
			window = c.Walrus.BatchWindow.D()
		}
		qc := quilt.Config{
			Window:  window,
			MaxBody: int64(c.Walrus.MaxBlobSize),
			Logger:  log.With("component", "quilt"),
		}
		if obs != nil {
			qc.Observe = obs.Quilt
		}
		s.Quilts = quilt.New(quiltStore{s.store}, qc)
	}

	if slices.ContainsFunc(c.Agents, func(a config.Agent) bool { return a.ENSName != "" }) {
		var signer *ens.Signer
		// chain.signer may be absent: a reading command needs none, and
		// an agent may write elsewhere with its records target's signer
		// (the writing commands check, config.CheckSigners).
		if !opts.ReadOnly && !c.Chain.Signer.IsZero() {
			if signer, err = ens.LoadSigner(SignerSource(c.Chain.Signer)); err != nil {
				return nil, fmt.Errorf("chain.signer: %w", err)
			}
		}
		cc := ChainConfig(c, signer, log.With("component", "ens"))
		cc.WriteGate = s.chainGate()
		if s.Chain, err = ens.New(ctx, cc); err != nil {
			return nil, fmt.Errorf("chain: %w", err)
		}
		if signer != nil {
			s.Self = signer.Address()
		} else if len(s.AgentKeys) > 0 {
			// A handed-over agent's first restore checks that the name is
			// this operator's: its address, not a write credential.
			if sg, err := ens.LoadSigner(SignerSource(c.Chain.Signer)); err == nil {
				s.Self = sg.Address()
			}
		}
	}
	if !opts.ReadOnly {
		if s.Records, err = recordsClients(ctx, c, log, s.chainGate()); err != nil {
			s.Close()
			return nil, err
		}
	}
	if s.Registries, err = registryClients(ctx, c, log); err != nil {
		s.Close()
		return nil, err
	}
	if !c.Receipts.Signer.IsZero() && !opts.ReadOnly {
		sg, err := ens.LoadSigner(SignerSource(c.Receipts.Signer))
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("receipts.signer: %w", err)
		}
		s.ReceiptSigner = sg.PrivateKey()
	}
	var self *common.Address
	if s.ReceiptSigner != nil {
		a := crypto.PubkeyToAddress(s.ReceiptSigner.PublicKey)
		self = &a
	}
	if s.Trusted, err = trusted(c, self); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// WithoutKeys is a copy of s that holds no key, as if built with
// Options.NoKey: the drill's cold path through the key escrow.
func (s *Services) WithoutKeys() *Services {
	c := *s
	c.Key, c.AgentKeys = cipher.Key{}, nil
	return &c
}

// Close stops the quilt batcher (failing packs still waiting) and
// releases the chain connections.
func (s *Services) Close() {
	if s.Quilts != nil {
		s.Quilts.Close()
	}
	if s.Chain != nil {
		s.Chain.Close()
	}
	for _, rc := range s.Records {
		rc.Close()
	}
	for _, rc := range s.Registries {
		rc.Close()
	}
}

// registryClients builds a reading client of the registry of every
// ens.records target an agent uses that names one.
func registryClients(ctx context.Context, c *config.Config, log *slog.Logger) (map[string]*ens.Client, error) {
	out := map[string]*ens.Client{}
	for i := range c.Agents {
		r := c.RecordsOf(&c.Agents[i])
		if r == nil || r.Registry == "" || out[r.ID] != nil {
			continue
		}
		rc, err := ens.New(ctx, RecordsRegistryConfig(r, nil, log.With("component", "ens", "registry", r.ID)))
		if err != nil {
			for _, rc := range out {
				rc.Close()
			}
			return nil, fmt.Errorf("ens.records %s registry: %w", r.ID, err)
		}
		out[r.ID] = rc
	}
	return out, nil
}

// owners is where the owner of agent ac's name is read: the L1 registry
// for a record on L1, the registry of its ens.records target when that
// names one, else nowhere (nil).
func (s *Services) owners(ac *config.Agent) *ens.Client {
	if r := s.Config.RecordsOf(ac); r != nil {
		return s.Registries[r.ID]
	}
	return s.Chain
}

// recordsClients builds a writing client for every ens.records target an
// agent uses (docs/design.md §7.2): its own chain, checked chain id,
// signer (chain.signer unless the target has one), fee cap and timeouts.
// chainGate is the fleet's fence for chain transactions (nil without a
// fleet).
func (s *Services) chainGate() func() error {
	if s.Fleet == nil {
		return nil
	}
	f := s.Fleet
	return func() error { return f.Check(WriteChain) }
}

func recordsClients(ctx context.Context, c *config.Config, log *slog.Logger, gate func() error) (map[string]*ens.Client, error) {
	out := map[string]*ens.Client{}
	for i := range c.Agents {
		r := c.RecordsOf(&c.Agents[i])
		if r == nil || out[r.ID] != nil {
			continue
		}
		signer, err := ens.LoadSigner(SignerSource(c.SignerOf(r)))
		if err != nil {
			for _, rc := range out {
				rc.Close()
			}
			return nil, fmt.Errorf("signer of ens.records %s: %w", r.ID, err)
		}
		rcfg := RecordsConfig(r, signer, log.With("component", "ens", "records", r.ID))
		rcfg.WriteGate = gate
		rc, err := ens.New(ctx, rcfg)
		if err != nil {
			for _, rc := range out {
				rc.Close()
			}
			return nil, fmt.Errorf("ens.records %s: %w", r.ID, err)
		}
		out[r.ID] = rc
	}
	return out, nil
}

// RecordsConfig maps an ens.records target onto a records client's
// configuration.
func RecordsConfig(r *config.RecordsTarget, signer *ens.Signer, log *slog.Logger) ens.Config {
	maxFee, _ := new(big.Float).Mul(big.NewFloat(r.MaxFeeGwei), weiPerGwei).Int(nil)
	return ens.Config{
		RPCURL:       r.RPC,
		ChainID:      r.ChainID,
		Records:      common.HexToAddress(r.Resolver),
		Signer:       signer,
		TxTimeout:    r.TxTimeout.D(),
		GasCap:       r.GasLimit,
		MaxFeePerGas: maxFee,
		PollInterval: r.PollInterval.D(),
		Logger:       log,
	}
}

// RecordsRegistryConfig maps an ens.records target with a registry onto
// the configuration of a client of that chain's registry (owners and
// transfers of the names whose records it holds).
func RecordsRegistryConfig(r *config.RecordsTarget, signer *ens.Signer, log *slog.Logger) ens.Config {
	ec := RecordsConfig(r, signer, log)
	ec.Records, ec.Registry = common.Address{}, common.HexToAddress(r.Registry)
	return ec
}

// LoadKey reads the snapshot encryption key a secret reference names. A
// key that cannot be read is a start-up error: hermesd never uploads
// plaintext and never invents an ephemeral key.
func LoadKey(ref config.SecretRef) (cipher.Key, error) {
	switch {
	case ref.File != "":
		return cipher.ReadKeyFile(ref.File)
	case ref.Env != "":
		v, err := config.ReadSecret(ref)
		if err != nil {
			return cipher.Key{}, err
		}
		return cipher.ParseKey(v)
	}
	return cipher.Key{}, fmt.Errorf("no snapshot key configured (encryption.key); create one with 'hermesd keygen -o FILE'")
}

// Trusted returns the trusted receipt signers of a configuration:
// receipts.trusted plus, when its key can be read here, the address of
// receipts.signer (hermesd trusts its own transition receipts). A signer
// that cannot be read is reported in warn and otherwise ignored: a CLI
// user may lack the service's secret.
func Trusted(c *config.Config) (addrs []common.Address, warn error, err error) {
	var self *common.Address
	if !c.Receipts.Signer.IsZero() {
		sg, serr := ens.LoadSigner(SignerSource(c.Receipts.Signer))
		if serr != nil {
			warn = fmt.Errorf("receipts.signer not loaded (%w); its receipts count as unknown unless trusted otherwise", serr)
		} else {
			a := sg.Address()
			self = &a
		}
	}
	addrs, err = trusted(c, self)
	return addrs, warn, err
}

func trusted(c *config.Config, self *common.Address) ([]common.Address, error) {
	addrs, err := receipts.ParseAddresses(c.Receipts.Trusted)
	if err != nil {
		return nil, fmt.Errorf("receipts.trusted: %w", err)
	}
	if self != nil && !slices.Contains(addrs, *self) {
		addrs = append(addrs, *self)
	}
	return addrs, nil
}

// WalrusConfig maps the configuration onto the Walrus client's; publisher
// credentials only when writing. Every Walrus client hermesd makes comes
// from here, so every download honours walrus.max_download_size.
func WalrusConfig(c *config.Config, write bool, log *slog.Logger) (walrus.Config, error) {
	wc := walrus.Config{
		Publishers:     c.Walrus.Publishers,
		Aggregators:    c.Walrus.Aggregators,
		Epochs:         c.Walrus.Epochs,
		Permanent:      c.Walrus.Permanent,
		SendObjectTo:   c.Walrus.SendObjectTo,
		Share:          c.Walrus.Share,
		MaxBlobSize:    int64(c.Walrus.MaxBlobSize),
		MaxReadSize:    int64(c.Walrus.MaxDownloadSize),
		AttemptTimeout: c.Walrus.AttemptTimeout.D(),
		Timeout:        c.Walrus.Timeout.D(),
		RetryMax:       c.Walrus.RetryMax,
		RetryWaitMin:   c.Walrus.RetryWaitMin.D(),
		RetryWaitMax:   c.Walrus.RetryWaitMax.D(),
		Logger:         log,
		// Blob ids are computed over Shards; what a store answer may say
		// it cost is held to these.
		Shards: c.Cost.WalrusShards,
		Price:  costPrice(c),
	}
	if c.StateDir != "" {
		// A big pack's id keeps half the pack in the spool, not in memory
		// (memory where the spool is not there yet).
		wc.ScratchDir = state.SpoolDir(c.StateDir)
	}
	if wc.RetryMax == 0 {
		wc.RetryMax = -1 // the client reads 0 as "default"; the config means none
	}
	if !write {
		return wc, nil
	}
	if !c.Walrus.JWTSecret.IsZero() {
		raw, err := config.ReadSecret(c.Walrus.JWTSecret)
		if err != nil {
			return walrus.Config{}, fmt.Errorf("walrus.jwt_secret: %w", err)
		}
		secret, err := walrus.ParseJWTSecret(raw)
		if err != nil {
			return walrus.Config{}, fmt.Errorf("walrus.jwt_secret: %w", err)
		}
		wc.TokenSource = walrus.HS256Tokens(secret, c.Walrus.JWTTTL.D(), c.Walrus.SendObjectTo, nil)
	}
	if !c.Walrus.Token.IsZero() {
		tok, err := config.ReadSecret(c.Walrus.Token)
		if err != nil {
			return walrus.Config{}, fmt.Errorf("walrus.token: %w", err)
		}
		wc.BearerToken = tok
	}
	return wc, nil
}

// NewWalrus builds a Walrus client from the configuration alone, for a path
// that must share nothing with the daemon's clients (the drill's cold
// path). write adds the publisher credentials.
func NewWalrus(c *config.Config, write bool, log *slog.Logger) (*walrus.Client, error) {
	wc, err := WalrusConfig(c, write, log)
	if err != nil {
		return nil, err
	}
	return walrus.New(wc)
}

// NewChain builds a read-only chain client from the configuration alone.
func NewChain(ctx context.Context, c *config.Config, log *slog.Logger) (*ens.Client, error) {
	return ens.New(ctx, ChainConfig(c, nil, log))
}

// SignerSource maps a configured secret onto the ENS package's.
func SignerSource(ref config.SecretRef) ens.SignerSource {
	return ens.SignerSource{KeyFile: ref.File, KeyEnv: ref.Env, Keystore: ref.Keystore, PasswordFile: ref.PasswordFile}
}

// LoadChainSigner loads the configured chain signer.
func LoadChainSigner(c *config.Config) (*ens.Signer, error) {
	s, err := ens.LoadSigner(SignerSource(c.Chain.Signer))
	if err != nil {
		return nil, fmt.Errorf("chain.signer: %w", err)
	}
	return s, nil
}

// NewChainWriter builds a chain client that signs with signer.
func NewChainWriter(ctx context.Context, c *config.Config, signer *ens.Signer, log *slog.Logger) (*ens.Client, error) {
	return ens.New(ctx, ChainConfig(c, signer, log))
}

var weiPerGwei = big.NewFloat(1e9)

// ChainConfig maps the configuration onto the ENS client's; signer may be
// nil for a read-only client.
func ChainConfig(c *config.Config, signer *ens.Signer, log *slog.Logger) ens.Config {
	maxFee, _ := new(big.Float).Mul(big.NewFloat(c.Chain.MaxFeeGwei), weiPerGwei).Int(nil)
	return ens.Config{
		RPCURL:       c.Chain.RPC,
		Registry:     common.HexToAddress(c.Chain.ENSRegistry),
		Signer:       signer,
		ChainID:      c.Chain.ChainID,
		TxTimeout:    c.Chain.TxTimeout.D(),
		GasCap:       c.Chain.GasLimit,
		MaxFeePerGas: maxFee,
		PollInterval: c.Chain.PollInterval.D(),
		Logger:       log,

		UniversalResolver: common.HexToAddress(c.Chain.UniversalResolver),
		GatewayTimeout:    c.Chain.GatewayTimeout.D(),
		GatewayMaxBody:    int64(c.Chain.GatewayMaxBody),
	}
}
