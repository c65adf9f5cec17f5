package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/devnet"
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
	}
	fs.Var(&f.agents, "agent", "agent as ID or ID=ENS-NAME (repeatable; default auditor=auditor.hermes.eth)")
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
	if *f.agentsFrom != "" && len(f.agents) > 0 {
		return usageErrorf("-agents-from and -agent exclude each other")
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
		for _, a := range c.Agents {
			agents = append(agents, devnet.Agent{ID: a.ID, ENSName: a.ENSName, TokenID: a.TokenID, BrainDir: a.BrainDir, SeedDir: a.SeedDir})
		}
	}
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
	}, nil
}

func ptr[T any](v T) *T { return &v }
