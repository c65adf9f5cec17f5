package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"os"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/ens"
)

const pointerHelp = `Subcommands:
  get NAME        print NAME's agent-snapshot record
  set NAME VALUE  compare-and-set the record (needs --expect PREV or --force)

The chain comes from the configuration's chain section (-config), or from
--rpc (plus --registry and a key flag for set), which need no config file;
flags override the file. Run 'hermesd pointer get -h' or 'hermesd pointer
set -h' for their flags.`

func runPointer(ctx context.Context, env *cmdEnv, args []string) error {
	if len(args) == 0 {
		fmt.Fprintf(env.stderr, "Usage: hermesd pointer <get|set> [flags]\n\n%s\n", pointerHelp)
		return errUsageShown
	}
	switch args[0] {
	case "get":
		return runPointerGet(ctx, env, args[1:])
	case "set":
		return runPointerSet(ctx, env, args[1:])
	case "-h", "-help", "--help", "help":
		fmt.Fprintf(env.stdout, "Usage: hermesd pointer <get|set> [flags]\n\n%s\n", pointerHelp)
		return nil
	}
	return usageErrorf("pointer: unknown subcommand %q (want get or set)", args[0])
}

// newPointerClient connects; a wrong chain id or registry address is a
// configuration mistake (exit 2).
func newPointerClient(ctx context.Context, ec ens.Config) (*ens.Client, error) {
	c, err := ens.New(ctx, ec)
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	// New does not touch the network; a one-shot command checks the chain
	// at once, so a wrong chain id or registry is reported as what it is.
	if err := c.Ping(ctx); err != nil {
		c.Close()
		if errors.Is(err, ens.ErrWrongChain) || errors.Is(err, ens.ErrNoRegistry) {
			return nil, withCode(exitUsage, err)
		}
		return nil, err
	}
	return c, nil
}

// chainFlags say which chain, registry and key to use.
type chainFlags struct {
	config       string
	rpc          string
	registry     string
	chainID      uint64
	keyFile      string
	keyEnv       string
	keystore     string
	passwordFile string
	timeout      time.Duration
	poll         time.Duration
}

func (f *chainFlags) register(fs *flag.FlagSet, signer bool) {
	fs.StringVar(&f.config, "config", "", "configuration `FILE` (default $"+config.EnvPath+", else "+config.DefaultPath+"; not read when --rpc is given without -config)")
	fs.StringVar(&f.rpc, "rpc", "", "Ethereum JSON-RPC `URL` (overrides chain.rpc)")
	fs.StringVar(&f.registry, "registry", "", "ENS registry `ADDRESS` (overrides chain.ens_registry; default the canonical "+ens.CanonicalRegistry.Hex()+")")
	fs.Uint64Var(&f.chainID, "chain-id", 0, "refuse to run unless the node's chain id is `N` (overrides chain.chain_id)")
	fs.DurationVar(&f.poll, "poll", 0, "receipt poll `INTERVAL` (overrides chain.poll_interval; default 1s)")
	if signer {
		fs.StringVar(&f.keyFile, "key-file", "", "signing key: `FILE` with a hex private key, mode 0600 (overrides chain.signer)")
		fs.StringVar(&f.keyEnv, "key-env", "", "signing key: environment variable `NAME` holding a hex private key, e.g. DEPLOYER_PRIVATE_KEY")
		fs.StringVar(&f.keystore, "keystore", "", "signing key: go-ethereum keystore JSON `FILE` (with --password-file)")
		fs.StringVar(&f.passwordFile, "password-file", "", "`FILE` whose first line is the keystore password")
		fs.DurationVar(&f.timeout, "timeout", 0, "wait at most `DURATION` for the transaction to be mined (overrides chain.tx_timeout; default 5m)")
	}
}

// clientConfig builds the ENS client configuration: the config file's
// chain section unless --rpc is given without -config, then the flags on
// top. The signing key is loaded only when signer is true.
func (f *chainFlags) clientConfig(signer bool) (ens.Config, error) {
	var (
		ec  ens.Config
		src ens.SignerSource
	)
	if f.config != "" || f.rpc == "" {
		path := config.ResolvePath(f.config)
		if f.config == "" && os.Getenv(config.EnvPath) == "" {
			if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
				return ec, usageErrorf("no chain configured: pass --rpc URL (and a key flag for set) or -config FILE")
			}
		}
		c, err := config.Load(path)
		if err != nil {
			return ec, withCode(exitUsage, err)
		}
		ec = compose.ChainConfig(c, nil, nil)
		src = compose.SignerSource(c.Chain.Signer)
	}
	if f.rpc != "" {
		ec.RPCURL = f.rpc
	}
	if ec.RPCURL == "" {
		return ec, usageErrorf("no RPC endpoint: set chain.rpc or pass --rpc URL")
	}
	if f.registry != "" {
		if !common.IsHexAddress(f.registry) {
			return ec, usageErrorf("--registry %q is not an address (0x + 40 hex digits)", f.registry)
		}
		ec.Registry = common.HexToAddress(f.registry)
	}
	if f.chainID != 0 {
		ec.ChainID = f.chainID
	}
	if f.poll > 0 {
		ec.PollInterval = f.poll
	}
	if f.timeout > 0 {
		ec.TxTimeout = f.timeout
	}
	if !signer {
		return ec, nil
	}
	if f.keyFile != "" || f.keyEnv != "" || f.keystore != "" {
		src = ens.SignerSource{KeyFile: f.keyFile, KeyEnv: f.keyEnv, Keystore: f.keystore, PasswordFile: f.passwordFile}
	}
	if src == (ens.SignerSource{}) {
		return ec, usageErrorf("no signing key: set chain.signer or pass --key-file FILE, --key-env NAME or --keystore FILE --password-file FILE")
	}
	s, err := ens.LoadSigner(src)
	if err != nil {
		return ec, withCode(exitUsage, err)
	}
	ec.Signer = s
	return ec, nil
}

const pointerGetHelp = `Print NAME's agent-snapshot text record: the id of the agent's newest
snapshot blob. NAME is normalised (ENSIP-15) first. Exits 4 when the name
does not exist or has no record.`

func runPointerGet(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "pointer get", "pointer get NAME [--json] [-config FILE | --rpc URL [--registry ADDRESS]]", pointerGetHelp)
	var cf chainFlags
	cf.register(fs, false)
	asJSON := fs.Bool("json", false, "print {\"name\", \"value\"} as one JSON object")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("pointer get: want exactly one NAME, got %d arguments", len(pos))
	}
	name, err := ens.Normalize(pos[0])
	if err != nil {
		return withCode(exitUsage, err)
	}
	ec, err := cf.clientConfig(false)
	if err != nil {
		return err
	}
	client, err := newPointerClient(ctx, ec)
	if err != nil {
		return err
	}
	defer client.Close()
	value, err := client.Read(ctx, name)
	if err != nil {
		if errors.Is(err, ens.ErrNoPointer) || errors.Is(err, ens.ErrNameNotFound) {
			return withCode(exitNotFound, err)
		}
		return err
	}
	if *asJSON {
		return json.NewEncoder(env.stdout).Encode(struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		}{name, value})
	}
	_, err = fmt.Fprintln(env.stdout, value)
	return err
}

const pointerSetHelp = `Compare-and-set NAME's agent-snapshot record to VALUE, signed by the
configured key (the name's owner, or a key the owner authorised on the
resolver). Nothing is sent unless the record holds the expected value:

  --expect PREV   the value you believe is there now
  --expect=       the name has no record yet (first write)
  --force         take whatever is there now as expected (overwrites
                  another writer's pointer: use with care)

Setting the value the record already holds sends nothing. The command waits
for the transaction to be mined and prints its hash and gas used. A VALUE
starting with "-" goes after "--".`

func runPointerSet(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "pointer set", "pointer set NAME VALUE (--expect PREV | --force) [--json] [-config FILE | --rpc URL --key-file FILE ...]", pointerSetHelp)
	var cf chainFlags
	cf.register(fs, true)
	var expect expectFlag
	fs.Var(&expect, "expect", "compare-and-set: the record's current value `PREV` (--expect= for no record)")
	force := fs.Bool("force", false, "use the record's current value as the expected one")
	asJSON := fs.Bool("json", false, "print the result as one JSON object")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageErrorf("pointer set: want NAME and VALUE, got %d arguments", len(pos))
	}
	name, value := pos[0], pos[1]
	switch {
	case value == "":
		return usageErrorf("pointer set: VALUE is empty")
	case expect.set && *force:
		return usageErrorf("pointer set: --expect and --force exclude each other")
	case !expect.set && !*force:
		return usageErrorf("pointer set: say what the record holds now with --expect PREV (--expect= when it has none), or pass --force")
	}
	norm, err := ens.Normalize(name)
	if err != nil {
		return withCode(exitUsage, err)
	}
	ec, err := cf.clientConfig(true)
	if err != nil {
		return err
	}
	client, err := newPointerClient(ctx, ec)
	if err != nil {
		return err
	}
	defer client.Close()
	expected := expect.v
	if *force {
		cur, err := client.Read(ctx, norm)
		switch {
		case err == nil:
			expected = cur
		case errors.Is(err, ens.ErrNoPointer) && !errors.Is(err, ens.ErrNoResolver):
			expected = ""
		default:
			return err
		}
	}
	res, err := client.Write(ctx, norm, value, expected)
	if err != nil {
		if res.TxHash != (common.Hash{}) {
			return fmt.Errorf("%w (transaction %s)", err, res.TxHash)
		}
		return err
	}
	if *asJSON {
		out := pointerSetResult{
			Name: norm, Value: value, Previous: value, Unchanged: res.Unchanged,
			From: client.From().Hex(), ChainID: client.ChainID().String(),
		}
		if !res.Unchanged {
			out.Previous = expected
			out.TxHash = res.TxHash.Hex()
			out.BlockNumber = res.BlockNumber
			out.GasUsed = res.GasUsed
			out.EffectiveGasPrice = bigString(res.EffectiveGasPrice)
		}
		return json.NewEncoder(env.stdout).Encode(out)
	}
	if res.Unchanged {
		_, err = fmt.Fprintf(env.stdout, "unchanged: %s already points at %s (nothing sent)\n", norm, value)
		return err
	}
	_, err = fmt.Fprintf(env.stdout, "%s → %s\ntx %s in block %d, gas used %d\n", norm, value, res.TxHash.Hex(), res.BlockNumber, res.GasUsed)
	return err
}

type pointerSetResult struct {
	Name              string `json:"name"`
	Value             string `json:"value"`
	Previous          string `json:"previous"` // the record's value before the write
	Unchanged         bool   `json:"unchanged"`
	From              string `json:"from"`
	ChainID           string `json:"chainId"`
	TxHash            string `json:"txHash,omitempty"`
	BlockNumber       uint64 `json:"blockNumber,omitempty"`
	GasUsed           uint64 `json:"gasUsed,omitempty"`
	EffectiveGasPrice string `json:"effectiveGasPrice,omitempty"` // wei, decimal
}

func bigString(b *big.Int) string {
	if b == nil {
		return ""
	}
	return b.String()
}

// expectFlag is a string flag that remembers whether it was given, so
// --expect= (no record yet) differs from no --expect at all.
type expectFlag struct {
	v   string
	set bool
}

func (e *expectFlag) String() string { return e.v }

func (e *expectFlag) Set(s string) error {
	e.v, e.set = s, true
	return nil
}
