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
	fs.Var(&f.agents, prefix+"agent", "agent as ID or ID=ENS-NAME (repeatable; default auditor=auditor.hermes.eth)")
	return f
}

type agentSpecs []devnet.Agent

func (a *agentSpecs) String() string {
	var parts []string
	for _, x := range *a {
		parts = append(parts, x.ID+"="+x.ENSName)
	}
	return strings.Join(parts, ",")
}

func (a *agentSpecs) Set(s string) error {
	id, name, _ := strings.Cut(s, "=")
	if id == "" {
		return fmt.Errorf("want ID or ID=ENS-NAME")
	}
	*a = append(*a, devnet.Agent{ID: id, ENSName: name})
	return nil
}

func (f *devnetFlags) options(log *slog.Logger) (devnet.Options, error) {
	dir, err := filepath.Abs(*f.dir)
	if err != nil {
		return devnet.Options{}, err
	}
	agents := []devnet.Agent(f.agents)
	if len(agents) == 0 {
		agents = []devnet.Agent{{ID: "auditor", ENSName: "auditor.hermes.eth", TokenID: ptr(uint64(3))}}
	}
	if *f.seed != "" {
		seed, err := filepath.Abs(*f.seed)
		if err != nil {
			return devnet.Options{}, err
		}
		agents[0].SeedDir = seed
	}
	return devnet.Options{
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
  walrus            %s
%s  names owned by    %s
  configuration     %s

run the daemon against it:
  hermesd run -config %s
`, dn.Chain.URL(), dn.Chain.ChainID(), dn.Chain.RegistryAddress().Hex(), dn.Walrus.URL(), sealBanner(dn), dn.Owner().Hex(), dn.ConfigPath, dn.ConfigPath)
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
		for _, a := range c.Agents {
			opts.Agents = append(opts.Agents, devnet.Agent{ID: a.ID, ENSName: a.ENSName, TokenID: a.TokenID, BrainDir: a.BrainDir, SeedDir: a.SeedDir})
		}
	}
	dn, err := devnet.Start(ctx, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("devnet: %w", err)
	}
	log.Info("devnet up", "chain", dn.Chain.URL(), "walrus", dn.Walrus.URL(), "config", dn.ConfigPath)
	return dn.Config, func() { dn.Close() }, nil
}
