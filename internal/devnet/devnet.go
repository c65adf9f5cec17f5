// Package devnet runs hermesd's whole world on one machine: a go-ethereum
// chain with the real ENS contracts (names registered for the agents, the
// dev key funded and owning them) and the local Walrus-compatible server,
// both on 127.0.0.1, plus the key files and a ready configuration.
// Optionally an L2: a second chain holding some agents' records, reached
// from L1 through ENS's OffchainResolver and a gateway the devnet serves.
// Optionally a fleet (Options.Nodes): an etcd member beside the chains and
// one configuration per node (fleet.go).
// `hermesd-devnet` (and so `make run`), the benchmarks and the end-to-end
// tests all start it the same way; the daemon's binary never links it.
package devnet

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/hermesd/hermesd/internal/atomicfile"
	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/devchain"
	"github.com/hermesd/hermesd/internal/devetcd"
	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/walruscost"
)

// Agent is one agent the devnet prepares for.
type Agent struct {
	ID       string
	ENSName  string // registered on the chain, owned by the dev key; "" = none
	TokenID  *uint64
	BrainDir string // default <Dir>/brains/<id>
	SeedDir  string
	// OnL2: the agent's record lives on the L2 (Options.L2): its name is
	// registered there, under the L2 parent, and resolves from L1 through
	// the OffchainResolver and the gateway.
	OnL2 bool
}

// Options configure a devnet.
type Options struct {
	// Dir holds everything: keys, the Walrus blobs, hermesd's state
	// directory, the configuration and (by default) the brains.
	Dir string
	// ChainPort and WalrusPort on 127.0.0.1; 0 picks free ports.
	ChainPort  int
	WalrusPort int
	// ChainDataDir persists the chain (so pointers survive a restart); ""
	// keeps it in memory.
	ChainDataDir string
	Agents       []Agent
	// EpochDuration of the Walrus server (default 1 hour).
	EpochDuration time.Duration
	// Quiet, MaxLag and PointerInterval go into the configuration
	// (defaults 300 ms, 3 s, 0: publish every snapshot at once).
	Quiet, MaxLag, PointerInterval time.Duration
	// SnapshotInterval rate-limits uploads (default 0: none).
	SnapshotInterval time.Duration
	// Shards is the local Walrus server's shard count, over which it
	// computes blob ids and lays out quilts, and the configuration's
	// cost.walrus_shards, over which the daemon checks what it reads
	// (default 1000, mainnet's and testnet's: the devnet is the network).
	// Tests that store many blobs take fewer: an id at 1000 shards costs
	// a good part of a CPU-second, at 100 a hundredth of it.
	Shards int
	// BatchWindow is walrus.batch_window (default 100 ms: the agents'
	// packs of one moment share a quilt, and nothing waits for long);
	// NoQuilts turns quilts off (walrus.quilts: false).
	BatchWindow time.Duration
	NoQuilts    bool
	// WalrusOnRequest, when set, sees every request the Walrus server
	// finished (tests).
	WalrusOnRequest func(localwalrus.RequestInfo)
	// Epochs each snapshot is stored for (default 5).
	Epochs int
	// HTTPListen for the daemon's health/metrics server ("" = off).
	HTTPListen string
	// SealServers local Seal key servers are started (threshold 2 when
	// there are at least two, else 1) and written into the configuration's
	// seal section; 0 starts none. SealPort is the first one's port on
	// 127.0.0.1 (the others follow it); 0 picks free ports.
	SealServers int
	SealPort    int
	// Format is encryption.format ("" = the default, v3); "seal" needs
	// SealServers.
	Format string
	// ArtifactsDir holds the ENS artifacts ("" = the default lookup).
	ArtifactsDir string
	Logger       *slog.Logger
	// Nodes > 0 makes a fleet of that many nodes: an etcd beside the
	// chains (Cluster.Endpoints, or one embedded member) and one
	// configuration per node, Dir/node-K.yml (fleet.go).
	Nodes   int
	Cluster ClusterOptions
	// L2, when set, adds a second chain with the ENS registry and
	// PublicResolver, and on L1 ENS's OffchainResolver for its parent
	// name, whose gateway (on 127.0.0.1, signing with a devnet key)
	// answers text() from the L2's resolver. Agents with OnL2 keep their
	// records there (ens.records in the configuration).
	L2 *L2Options
}

// Devnet is a running devnet.
type Devnet struct {
	Chain      *devchain.Chain
	Walrus     *localwalrus.Server
	ConfigPath string
	Config     *config.Config
	Dir        string
	// SignerKey owns the agents' ENS names and signs receipts.
	SignerKey *ecdsa.PrivateKey
	KeyPath   string // snapshot encryption key file
	// Seal are the local Seal key servers; SuiKeyPath is the requester's
	// Sui key, which their account_based policy lets open its identity.
	Seal       []*KeyServer
	SuiKeyPath string
	// L2 is the second chain and its gateway (nil without Options.L2).
	L2 *L2
	// Etcd is the embedded etcd member of a fleet (nil without
	// Options.Nodes, or with the cluster's own endpoints).
	Etcd *devetcd.Cluster
	// Nodes are the fleet's node configurations, node-1 … node-N.
	Nodes []Node

	opts    Options
	cluster ClusterOptions
}

// toJSON renders v as JSON, which YAML reads as a flow value.
func toJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// Start brings the devnet up and writes <Dir>/hermesd.yml. Key files that
// already exist are kept, so a restarted devnet can still decrypt the
// snapshots it made before.
func Start(ctx context.Context, o Options) (*Devnet, error) {
	if o.Dir == "" {
		return nil, errors.New("devnet: Dir is required")
	}
	if o.EpochDuration == 0 {
		o.EpochDuration = time.Hour
	}
	if o.Quiet == 0 {
		o.Quiet = 300 * time.Millisecond
	}
	if o.MaxLag == 0 {
		o.MaxLag = 3 * time.Second
	}
	if o.Epochs == 0 {
		o.Epochs = 5
	}
	if o.BatchWindow == 0 {
		o.BatchWindow = 100 * time.Millisecond
	}
	if o.Shards == 0 {
		o.Shards = walruscost.DefaultShards
	}
	if o.Format == "seal" && o.SealServers == 0 {
		return nil, errors.New("devnet: format seal needs SealServers")
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	for _, sub := range []string{"keys", "walrus", "brains"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("devnet: %w", err)
		}
	}
	if o.Nodes < 0 || o.Nodes > 64 {
		return nil, fmt.Errorf("devnet: %d nodes: want 0 to 64", o.Nodes)
	}
	if o.Cluster.Fleet == "" {
		o.Cluster.Fleet = DefaultFleet
	}
	d := &Devnet{Dir: dir, KeyPath: filepath.Join(dir, "keys", "snapshot.key"), opts: o, cluster: o.Cluster}

	if info, err := os.Lstat(d.KeyPath); err == nil && info.Mode().IsRegular() && info.Size() == 0 {
		// A first run killed between creating the key file and writing
		// it: the file holds no key, so nothing was encrypted with it.
		if err := os.Remove(d.KeyPath); err != nil {
			return nil, fmt.Errorf("devnet: %w", err)
		}
	}
	if _, err := os.Stat(d.KeyPath); errors.Is(err, fs.ErrNotExist) {
		k, err := cipher.GenerateKey()
		if err != nil {
			return nil, err
		}
		if err := cipher.WriteKeyFile(d.KeyPath, k); err != nil {
			return nil, fmt.Errorf("devnet: %w", err)
		}
	}
	// The dev chain's funded key owns the names and signs everything; it is
	// a well-known throwaway key, written to a file like a real one.
	d.SignerKey = devchain.DevKey()
	signerPath := filepath.Join(dir, "keys", "chain.key")
	if err := atomicfile.WriteFile(signerPath, []byte(fmt.Sprintf("0x%x\n", crypto.FromECDSA(d.SignerKey))), 0o600); err != nil {
		return nil, fmt.Errorf("devnet: %w", err)
	}
	owner := crypto.PubkeyToAddress(d.SignerKey.PublicKey)

	var names, l2Names []devchain.Name
	for _, a := range o.Agents {
		switch {
		case a.ENSName == "":
		case a.OnL2 && o.L2 == nil:
			return nil, fmt.Errorf("devnet: agent %s is on the L2, but the devnet has none", a.ID)
		case a.OnL2:
			l2Names = append(l2Names, devchain.Name{Name: a.ENSName, Owner: owner})
		default:
			names = append(names, devchain.Name{Name: a.ENSName, Owner: owner})
		}
	}
	// The L1 agents' names are registered on the L2 too (to the same
	// owner), so that 'hermesd pointer move' can move their records there:
	// the L2's resolver lets only a name's owner in that chain's registry
	// write its record.
	movable := names
	ok := false
	defer func() {
		if !ok {
			d.Close()
		}
	}()
	d.Chain, err = devchain.Start(ctx, devchain.Config{
		Port:         o.ChainPort,
		DevKey:       d.SignerKey,
		Names:        names,
		ArtifactsDir: o.ArtifactsDir,
		DataDir:      o.ChainDataDir,
		Logger:       o.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("devnet chain: %w", err)
	}
	if o.L2 != nil {
		if d.L2, err = startL2(ctx, d.Chain, *o.L2, l2Names, movable, owner, o.ArtifactsDir, o.Logger); err != nil {
			return nil, err
		}
	}
	d.Walrus, err = localwalrus.New(localwalrus.Config{
		Dir:           filepath.Join(dir, "walrus"),
		EpochDuration: o.EpochDuration,
		StartEpoch:    1,
		MaxBodySize:   1 << 40, // the devnet is not a public publisher
		// Quilts up to the configuration's max_blob_size (1 GiB).
		MaxQuiltBodySize: 1 << 30,
		Shards:           o.Shards,
		OnRequest:        o.WalrusOnRequest,
		Logger:           o.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("devnet walrus: %w", err)
	}
	if err := d.Walrus.Start(fmt.Sprintf("127.0.0.1:%d", o.WalrusPort)); err != nil {
		return nil, fmt.Errorf("devnet walrus: %w", err)
	}

	if o.SealServers > 0 {
		if err := d.startSeal(o.SealServers, o.SealPort, o.Logger); err != nil {
			return nil, err
		}
	}

	d.ConfigPath = filepath.Join(dir, "hermesd.yml")
	if err := d.render(d.view(o), d.ConfigPath); err != nil {
		return nil, err
	}
	if d.Config, err = config.Load(d.ConfigPath); err != nil {
		return nil, fmt.Errorf("devnet: generated configuration: %w", err)
	}
	if err := d.startEtcd(o); err != nil {
		return nil, err
	}
	if err := d.writeNodes(o); err != nil {
		return nil, err
	}
	ok = true
	return d, nil
}

// Close stops the chain, the Walrus, Seal and etcd servers.
func (d *Devnet) Close() error {
	var errs []error
	if d.Etcd != nil {
		errs = append(errs, d.Etcd.Close())
	}
	for _, k := range d.Seal {
		errs = append(errs, k.Stop())
	}
	if d.Walrus != nil {
		errs = append(errs, d.Walrus.Close())
	}
	if d.L2 != nil {
		errs = append(errs, d.L2.close())
	}
	if d.Chain != nil {
		errs = append(errs, d.Chain.Close())
	}
	return errors.Join(errs...)
}

// Owner is the address that owns the agents' names.
func (d *Devnet) Owner() common.Address { return crypto.PubkeyToAddress(d.SignerKey.PublicKey) }

var configTemplate = template.Must(template.New("config").Funcs(template.FuncMap{"json": toJSON}).Parse(`# hermesd configuration for the local devnet, written by 'hermesd-devnet'.
# Everything here runs on 127.0.0.1; keys are throwaway devnet keys.
state_dir: {{.StateDir}}
shutdown_timeout: 10s
log:
  level: info
  format: text
http:
  listen: "{{.HTTP}}"
walrus:
  publishers: ["{{.Walrus}}"]
  aggregators: ["{{.Walrus}}"]
  epochs: {{.Epochs}}
  epoch_duration: {{.EpochDuration}}
  max_blob_size: {{.MaxBlobSize}}
  attempt_timeout: 1m
  retry_max: 8
  retry_wait_min: 100ms
  retry_wait_max: 2s
  quilts: {{.Quilts}}
  batch_window: {{.BatchWindow}}
chain:
  rpc: {{.RPC}}
  chain_id: {{.ChainID}}
  ens_registry: "{{.Registry}}"
  signer: {file: {{.Dir}}/keys/chain.key}
  tx_timeout: 30s
  poll_interval: 20ms
  head_interval: 1s
{{- if .L2}}
ens:
  # The devnet's L2: a second chain whose PublicResolver holds the records
  # of the agents under {{.L2.Parent}}; on L1 that name's resolver is ENS's
  # OffchainResolver, whose gateway ({{.L2.Gateway}}) answers from the L2
  # for any name it is asked about ('hermesd pointer move NAME --to {{.L2.ID}}'
  # makes it a name's own resolver).
  records:
    - id: {{.L2.ID}}
      rpc: {{.L2.RPC}}
      chain_id: {{.L2.ChainID}}
      resolver: "{{.L2.Resolver}}"
      registry: "{{.L2.Registry}}"
      l1_resolver: "{{.L2.L1Resolver}}"
      tx_timeout: 30s
      max_fee_gwei: 100
      poll_interval: 20ms
      visibility_timeout: {{.L2.Visibility}}
{{- end}}
encryption:
  key: {file: {{.Dir}}/keys/snapshot.key}
{{- if .Format}}
  format: {{.Format}}
{{- end}}
{{- if .Seal}}
seal:
  # Local key servers on 127.0.0.1 enforcing account_based natively.
  package_id: "{{.SealPackage}}"
  policy: account_based
  threshold: {{.SealThreshold}}
  sui_key: {file: {{.Dir}}/keys/sui.key}
  key_servers:
{{- range .Seal}}
    - object_id: "{{.ObjectID}}"
      url: {{.URL}}
      public_key: {{.PublicKey}}
{{- end}}
{{- end}}
cost:
  walrus_shards: {{.Shards}}
receipts:
  signer: {file: {{.Dir}}/keys/chain.key}
  trusted: ["{{.Owner}}"]
  import_policy: quarantine
defaults:
  quiet: {{.Quiet}}
  max_lag: {{.MaxLag}}
  pointer_interval: {{.PointerInterval}}
  snapshot_interval: {{.SnapshotInterval}}
{{- with .Cluster}}
cluster:
  # One node of the devnet's fleet: the agents below are run by whichever
  # node owns them in etcd, each in this node's own brain directory.
  endpoints: {{json .Endpoints}}
  fleet: {{.Fleet}}
  node: {{.Node}}
{{- if .LeaseTTL}}
  lease_ttl: {{.LeaseTTL}}
{{- end}}
{{- if .HandoffTimeout}}
  handoff_timeout: {{.HandoffTimeout}}
{{- end}}
{{- with .Hooks}}
  hooks:
{{- if .OnAcquire}}
    on_acquire: {{json .OnAcquire}}
{{- end}}
{{- if .OnRelease}}
    on_release: {{json .OnRelease}}
{{- end}}
{{- if .Timeout}}
    timeout: {{.Timeout}}
{{- end}}
{{- end}}
{{- end}}
agents:
{{- range .Agents}}
  - id: {{.ID}}
    brain_dir: {{.BrainDir}}
{{- if .ENSName}}
    ens_name: {{.ENSName}}
{{- end}}
{{- if .TokenID}}
    token_id: {{.TokenID}}
{{- end}}
{{- if .SeedDir}}
    seed_dir: {{.SeedDir}}
{{- end}}
{{- if .Records}}
    records: {{.Records}}
{{- end}}
{{- end}}
`))

// configView is what the configuration template renders.
type configView struct {
	L2                                               map[string]any
	Dir, StateDir, HTTP, Walrus, RPC                 string
	ChainID                                          any
	Registry, Owner                                  string
	Quiet, MaxLag, PointerInterval, SnapshotInterval time.Duration
	Quilts                                           bool
	BatchWindow                                      time.Duration
	Shards                                           int
	MaxBlobSize                                      string
	Epochs                                           int
	EpochDuration                                    time.Duration
	Agents                                           []agentView
	Format                                           string
	Seal                                             []*KeyServer
	SealPackage                                      any
	SealThreshold                                    int
	// Cluster is a node's cluster section (nil: a single daemon).
	Cluster map[string]any
}

type agentView struct {
	ID, ENSName, BrainDir, SeedDir string
	TokenID                        string
	Records                        string
}

// view is the single daemon's configuration (Dir/hermesd.yml).
func (d *Devnet) view(o Options) configView {
	var agents []agentView
	for _, a := range o.Agents {
		v := agentView{ID: a.ID, ENSName: a.ENSName, BrainDir: a.BrainDir, SeedDir: a.SeedDir}
		if a.OnL2 && a.ENSName != "" {
			v.Records = L2RecordsID
		}
		if v.BrainDir == "" {
			v.BrainDir = filepath.Join(d.Dir, "brains", a.ID)
		}
		if a.TokenID != nil {
			v.TokenID = fmt.Sprint(*a.TokenID)
		}
		agents = append(agents, v)
	}
	var l2 map[string]any
	if d.L2 != nil {
		l2 = map[string]any{
			"ID":         L2RecordsID,
			"RPC":        d.L2.RPC(),
			"ChainID":    d.L2.ChainID,
			"Resolver":   d.L2.Resolver().Hex(),
			"Registry":   d.L2.Chain.RegistryAddress().Hex(),
			"L1Resolver": d.L2.OffchainResolver.Hex(),
			"Visibility": d.L2.visibility,
			"Parent":     d.L2.Parent,
			"Gateway":    strings.TrimSuffix(d.L2.GatewayURL, "/{sender}/{data}.json"),
		}
	}
	return configView{
		L2:               l2,
		Dir:              d.Dir,
		StateDir:         filepath.Join(d.Dir, "state"),
		HTTP:             o.HTTPListen,
		Walrus:           d.Walrus.URL(),
		RPC:              d.Chain.URL(),
		ChainID:          d.Chain.ChainID(),
		Registry:         d.Chain.RegistryAddress().Hex(),
		Owner:            d.Owner().Hex(),
		Quiet:            o.Quiet,
		MaxLag:           o.MaxLag,
		PointerInterval:  o.PointerInterval,
		SnapshotInterval: o.SnapshotInterval,
		Quilts:           !o.NoQuilts,
		BatchWindow:      o.BatchWindow,
		Shards:           o.Shards,
		MaxBlobSize:      config.ByteSize(MaxBlobSize(o.Shards)).String(),
		Epochs:           o.Epochs,
		EpochDuration:    o.EpochDuration,
		Agents:           agents,
		Format:           o.Format,
		Seal:             d.Seal,
		SealPackage:      SealPackage,
		SealThreshold:    min(2, len(d.Seal)),
	}
}

// render writes v as a configuration file at path.
func (d *Devnet) render(v configView, path string) error {
	var b strings.Builder
	if err := configTemplate.Execute(&b, v); err != nil {
		return fmt.Errorf("devnet: render configuration: %w", err)
	}
	return atomicfile.WriteFile(path, []byte(b.String()), 0o600)
}

// MaxBlobSize is the devnet's walrus.max_blob_size: 1 GiB (the devnet is
// not a public publisher), or the largest blob its Walrus server stores
// at its shard count when that is less (about 149 MB at 100 shards: a
// quilt cut to a larger size would get 413 from the server on every
// attempt), but not below the configuration's minimum (2 MiB; at 10
// shards the server stores 1.8 MB at most, so brains there stay small).
func MaxBlobSize(shards int) int64 {
	m, err := walruscost.MaxBlobSize(shards)
	if err != nil {
		return 1 << 30
	}
	return max(2<<20, min(1<<30, int64(m)))
}
