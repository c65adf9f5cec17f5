package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/redstuff"
	"github.com/hermesd/hermesd/internal/walruscost"
)

// devnetFlags are hermesd-devnet's flags.
type devnetFlags struct {
	dir        *string
	chainPort  *int
	walrusPort *int
	listen     *string
	agents     agentSpecs
	agentsFrom *string
	seed       *string
	seal       *int
	sealPort   *int
	format     *string
	shards     *int
	nodes      *int
	etcdPort   *int
	fleet      *string
	leaseTTL   *time.Duration
}

func addDevnetFlags(fs *flag.FlagSet) *devnetFlags {
	f := &devnetFlags{
		dir:        fs.String("dir", ".devnet", "directory for the devnet's chain, blobs, keys, state, brains and configuration"),
		chainPort:  fs.Int("chain-port", 18545, "JSON-RPC port of the local chain on 127.0.0.1 (0 = any free port)"),
		walrusPort: fs.Int("walrus-port", 31415, "port of the local Walrus publisher/aggregator on 127.0.0.1 (0 = any)"),
		listen:     fs.String("http", "127.0.0.1:9797", "hermesd's health/metrics address in the generated configuration (\"\" = off)"),
		agentsFrom: fs.String("agents-from", "", "take the agents (IDs, ENS names, token IDs, brain and seed directories) from this hermesd configuration instead of -agent"),
		seed:       fs.String("seed", "", "seed directory for the first agent (make run builds one from examples/brain)"),
		seal:       fs.Int("seal-servers", 3, "local Seal key servers to run on 127.0.0.1, written into the seal section (threshold 2; 0 = none)"),
		sealPort:   fs.Int("seal-port", 0, "port of the first Seal key server on 127.0.0.1, the others following it (0 = any free ports)"),
		format:     fs.String("format", "v3", "encryption.format of the generated configuration: v3, v2, v1 or seal"),
		shards:     fs.Int("shards", walruscost.DefaultShards, "shard count of the local Walrus (blob ids, quilt layout, cost.walrus_shards); mainnet's by default, fewer costs less CPU per blob id (tests take 100)"),
		nodes: fs.Int("nodes", 0, "run a fleet of N nodes: an embedded etcd member beside the chains and one configuration per node, DIR/node-1.yml … DIR/node-N.yml "+
			"(each with its own state and brain directories and HTTP port: -http's, +1, +2 …); a COMMAND after -- runs once per node"),
		etcdPort: fs.Int("etcd-port", 12379, "client port of the embedded etcd member on 127.0.0.1 with -nodes (its peer port is the next one; 0 = any free ports)"),
		fleet:    fs.String("fleet", "devnet", "cluster.fleet of the node configurations (the etcd key prefix)"),
		leaseTTL: fs.Duration("lease-ttl", 0, "cluster.lease_ttl of the node configurations (0 = hermesd's default)"),
	}
	fs.Var(&f.agents, "agent", "agent as ID, ID=ENS-NAME, or ID=ENS-NAME@l2 for a record on the devnet's L2 (repeatable; default auditor=auditor.hermes.eth and scout=scout.l2.hermes.eth@l2). "+
		"With an L2 agent the devnet also runs the L2 chain on chain-port+1 and its gateway on chain-port+2")
	return f
}

type agentSpecs []devnet.Agent

func (a *agentSpecs) String() string {
	var parts []string
	for _, x := range *a {
		p := x.ID + "=" + x.ENSName
		if x.OnL2 {
			p += "@l2"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ",")
}

func (a *agentSpecs) Set(s string) error {
	id, name, _ := strings.Cut(s, "=")
	if id == "" {
		return fmt.Errorf("want ID, ID=ENS-NAME or ID=ENS-NAME@l2")
	}
	name, onL2 := strings.CutSuffix(name, "@l2")
	if onL2 && name == "" {
		return fmt.Errorf("an agent on the L2 needs its ENS name (ID=NAME@l2)")
	}
	*a = append(*a, devnet.Agent{ID: id, ENSName: name, OnL2: onL2})
	return nil
}

// check refuses flag values the devnet cannot honour.
func (f *devnetFlags) check() error {
	switch *f.format {
	case "v1", "v2", "v3":
	case "seal":
		if *f.seal < 1 {
			return usageErrorf("-format seal needs -seal-servers of at least 1")
		}
	default:
		return usageErrorf("-format %q is not one of v3, v2, v1, seal", *f.format)
	}
	if *f.seal < 0 || *f.seal > 16 {
		return usageErrorf("-seal-servers must be between 0 and 16")
	}
	if err := redstuff.CheckShards(*f.shards); err != nil {
		return usageErrorf("-shards: %v", err)
	}
	if *f.agentsFrom != "" && len(f.agents) > 0 {
		return usageErrorf("-agents-from and -agent exclude each other")
	}
	if *f.nodes < 0 || *f.nodes > 64 {
		return usageErrorf("-nodes must be between 0 and 64")
	}
	if *f.leaseTTL < 0 {
		return usageErrorf("-lease-ttl must not be negative")
	}
	if *f.etcdPort < 0 || *f.etcdPort > 65534 {
		return usageErrorf("-etcd-port must be between 0 and 65534")
	}
	return nil
}

func (f *devnetFlags) options() (devnet.Options, error) {
	dir, err := filepath.Abs(*f.dir)
	if err != nil {
		return devnet.Options{}, err
	}
	agents := []devnet.Agent(f.agents)
	if *f.agentsFrom != "" {
		c, err := config.Load(*f.agentsFrom)
		if err != nil {
			return devnet.Options{}, usageErrorf("-agents-from: %v", err)
		}
		for i, a := range c.Agents {
			agents = append(agents, devnet.Agent{ID: a.ID, ENSName: a.ENSName, TokenID: a.TokenID, BrainDir: a.BrainDir, SeedDir: a.SeedDir,
				OnL2: c.RecordsOf(&c.Agents[i]) != nil})
		}
	}
	defaults := len(agents) == 0
	if defaults {
		// One agent each way: its record on L1, and on the L2.
		agents = []devnet.Agent{
			{ID: "auditor", ENSName: "auditor.hermes.eth", TokenID: ptr(uint64(3))},
			{ID: "scout", ENSName: "scout." + devnet.DefaultL2Parent, OnL2: true},
		}
	}
	if *f.seed != "" {
		seed, err := filepath.Abs(*f.seed)
		if err != nil {
			return devnet.Options{}, err
		}
		agents[0].SeedDir = seed
		if defaults {
			agents[1].SeedDir = seed
		}
	}
	return devnet.Options{
		L2:           f.l2(dir, agents),
		Dir:          dir,
		ChainPort:    *f.chainPort,
		WalrusPort:   *f.walrusPort,
		ChainDataDir: filepath.Join(dir, "chain"),
		Agents:       agents,
		HTTPListen:   *f.listen,
		SealServers:  *f.seal,
		SealPort:     *f.sealPort,
		Format:       *f.format,
		Shards:       *f.shards,
		Quiet:        500 * time.Millisecond,
		MaxLag:       5 * time.Second,
		Nodes:        *f.nodes,
		Cluster: devnet.ClusterOptions{
			EtcdPort: *f.etcdPort,
			Fleet:    *f.fleet,
			LeaseTTL: *f.leaseTTL,
		},
	}, nil
}

func ptr[T any](v T) *T { return &v }

// l2 is the devnet's L2 when an agent's record lives there: its chain and
// gateway on the two ports after chain-port (free ports when it is 0),
// persisted beside the L1.
func (f *devnetFlags) l2(dir string, agents []devnet.Agent) *devnet.L2Options {
	for _, a := range agents {
		if a.OnL2 {
			o := &devnet.L2Options{DataDir: filepath.Join(dir, "chain-l2")}
			if *f.chainPort != 0 {
				o.ChainPort, o.GatewayPort = *f.chainPort+1, *f.chainPort+2
			}
			return o
		}
	}
	return nil
}
