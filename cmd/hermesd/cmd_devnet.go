package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/devnet"
)

// devnetFlags are shared by `hermesd devnet` and `hermesd run --devnet`.
type devnetFlags struct {
	dir        *string
	chainPort  *int
	walrusPort *int
	listen     *string
	agents     agentSpecs
	seed       *string
	seal       *int
	sealPort   *int
	format     *string
}

func addDevnetFlags(fs *flag.FlagSet, prefix string) *devnetFlags {
	f := &devnetFlags{
		dir:        fs.String(prefix+"dir", ".devnet", "directory for the devnet's chain, blobs, keys, state, brains and configuration"),
		chainPort:  fs.Int(prefix+"chain-port", 18545, "JSON-RPC port of the local chain on 127.0.0.1 (0 = any free port)"),
		walrusPort: fs.Int(prefix+"walrus-port", 31415, "port of the local Walrus publisher/aggregator on 127.0.0.1 (0 = any)"),
		listen:     fs.String(prefix+"http", "127.0.0.1:9797", "hermesd's health/metrics address in the generated configuration (\"\" = off)"),
		seed:       fs.String(prefix+"seed", "", "seed directory for the default agent (make run builds one from examples/brain)"),
		seal:       fs.Int(prefix+"seal-servers", 3, "local Seal key servers to run on 127.0.0.1, written into the seal section (threshold 2; 0 = none)"),
		sealPort:   fs.Int(prefix+"seal-port", 0, "port of the first Seal key server on 127.0.0.1, the others following it (0 = any free ports)"),
		format:     fs.String(prefix+"format", "v3", "encryption.format of the generated configuration: v3, v2, v1 or seal"),
	}
	fs.Var(&f.agents, prefix+"agent", "agent as ID, ID=ENS-NAME, or ID=ENS-NAME@l2 for a record on the devnet's L2 (repeatable; default auditor=auditor.hermes.eth and scout=scout.l2.hermes.eth@l2). "+
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

func (f *devnetFlags) options(log *slog.Logger) (devnet.Options, error) {
	dir, err := filepath.Abs(*f.dir)
	if err != nil {
		return devnet.Options{}, err
	}
	agents := []devnet.Agent(f.agents)
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
		Quiet:        500 * time.Millisecond,
		MaxLag:       5 * time.Second,
		Logger:       log,
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

// l2Banner describes the devnet's L2 for the start-up banner.
func l2Banner(dn *devnet.Devnet) string {
	if dn.L2 == nil {
		return ""
	}
	return fmt.Sprintf("  L2 (JSON-RPC)     %s   chain id %d, records on %s\n  L2 gateway        %s   (%s on L1 → OffchainResolver %s)\n",
		dn.L2.RPC(), dn.L2.ChainID, dn.L2.Resolver().Hex(), strings.TrimSuffix(dn.L2.GatewayURL, "/{sender}/{data}.json"),
		dn.L2.Parent, dn.L2.OffchainResolver.Hex())
}

// check refuses flag values the devnet cannot honour.
func (f *devnetFlags) check(prefix string) error {
	switch *f.format {
	case "v1", "v2", "v3":
	case "seal":
		if *f.seal < 1 {
			return usageErrorf("--%sformat seal needs --%sseal-servers of at least 1", prefix, prefix)
		}
	default:
		return usageErrorf("--%sformat %q is not one of v3, v2, v1, seal", prefix, *f.format)
	}
	if *f.seal < 0 || *f.seal > 16 {
		return usageErrorf("--%sseal-servers must be between 0 and 16", prefix)
	}
	return nil
}

// sealBanner lists the devnet's Seal key servers for the start-up banner.
func sealBanner(dn *devnet.Devnet) string {
	var b strings.Builder
	for i, k := range dn.Seal {
		fmt.Fprintf(&b, "  seal key server %d %s   object %s\n", i+1, k.URL(), k.ObjectID)
	}
	if len(dn.Seal) > 0 {
		fmt.Fprintf(&b, "  seal requester    %s (policy account_based, threshold %d of %d)\n",
			dn.SuiKeyPath, dn.Config.Seal.Threshold, len(dn.Seal))
	}
	return b.String()
}

func runDevnet(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "devnet", "devnet [flags]",
		`Run the local devnet until interrupted: a go-ethereum chain with the real ENS
registry and PublicResolver (the agents' names registered and owned by the
funded dev key) and the local Walrus-compatible server, both on 127.0.0.1.
It writes a ready configuration to DIR/hermesd.yml; in another terminal run
'hermesd run -config DIR/hermesd.yml'. The chain is persisted in DIR/chain,
so pointers survive a restart. 'hermesd run --devnet' does both in one process.`)
	f := addDevnetFlags(fs, "")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("devnet takes no arguments")
	}
	if err := f.check(""); err != nil {
		return err
	}
	log, _ := newLogger(env.stderr, "info", "text")
	opts, err := f.options(log.With("component", "devnet"))
	if err != nil {
		return err
	}
	opts.Logger = nil // the chain's own logs are noise here
	dn, err := devnet.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer dn.Close()
	fmt.Fprintf(env.stdout, `devnet running
  chain (JSON-RPC)  %s   chain id %s, ENS registry %s
%s  walrus            %s
%s  names owned by    %s
  configuration     %s

run the daemon against it:
  hermesd run -config %s
`, dn.Chain.URL(), dn.Chain.ChainID(), dn.Chain.RegistryAddress().Hex(), l2Banner(dn), dn.Walrus.URL(), sealBanner(dn), dn.Owner().Hex(), dn.ConfigPath, dn.ConfigPath)
	<-ctx.Done()
	fmt.Fprintln(env.stderr, "devnet stopping")
	return nil
}

// startDevnet starts the devnet for `hermesd run --devnet` and returns its
// configuration. When cfgPath is set, that configuration's agents are used
// instead of the default example agent.
func startDevnet(ctx context.Context, env *cmdEnv, f *devnetFlags, cfgPath string) (*config.Config, func(), error) {
	if err := f.check("devnet-"); err != nil {
		return nil, nil, err
	}
	log, _ := newLogger(env.stderr, "info", "text")
	opts, err := f.options(nil)
	if err != nil {
		return nil, nil, err
	}
	if cfgPath != "" {
		c, err := loadConfig(cfgPath)
		if err != nil {
			return nil, nil, err
		}
		opts.Agents = nil
		for i, a := range c.Agents {
			opts.Agents = append(opts.Agents, devnet.Agent{ID: a.ID, ENSName: a.ENSName, TokenID: a.TokenID, BrainDir: a.BrainDir, SeedDir: a.SeedDir,
				OnL2: c.RecordsOf(&c.Agents[i]) != nil})
		}
		opts.L2 = f.l2(opts.Dir, opts.Agents)
	}
	dn, err := devnet.Start(ctx, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("devnet: %w", err)
	}
	if dn.L2 != nil {
		log.Info("devnet up", "chain", dn.Chain.URL(), "l2", dn.L2.RPC(), "l2_gateway", strings.TrimSuffix(dn.L2.GatewayURL, "/{sender}/{data}.json"),
			"walrus", dn.Walrus.URL(), "config", dn.ConfigPath)
	} else {
		log.Info("devnet up", "chain", dn.Chain.URL(), "walrus", dn.Walrus.URL(), "config", dn.ConfigPath)
	}
	return dn.Config, func() { dn.Close() }, nil
}
