package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/daemon"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/pointer"
)

const pointerHelp = `Subcommands:
  get NAME         print NAME's agent-snapshot record
  set NAME VALUE   compare-and-set the record (needs --expect PREV or --force)
  adopt AGENT      resolve a held pointer: take the other writer's snapshot
                   (the local brain is set aside)
  override AGENT   resolve a held pointer: publish ours over the other
                   writer's
  transfer NAME    move NAME to a new owner in the registry (--to, --yes)

For get and set, the chain comes from the configuration's chain section
(-config), or from --rpc (plus --registry and a key flag for set), which
need no config file; flags override the file. adopt and override act on a
configured agent. Run 'hermesd pointer SUBCOMMAND -h' for its flags.`

func runPointer(ctx context.Context, env *cmdEnv, args []string) error {
	resolve := func(how string) func(context.Context, *cmdEnv, []string) error {
		return func(ctx context.Context, env *cmdEnv, args []string) error {
			return runPointerResolve(ctx, env, how, args)
		}
	}
	return group{name: "pointer", tail: "[flags]", help: pointerHelp, verbs: []command{
		{name: "get", run: runPointerGet},
		{name: "set", run: runPointerSet},
		{name: "adopt", run: resolve("adopt")},
		{name: "override", run: resolve("override")},
		{name: "transfer", run: runPointerTransfer},
	}}.run(ctx, env, args)
}

// connect normalises name (ENSIP-15) and connects to the chain the flags
// name, with their key when signer is set. A bad name, a wrong chain id or
// registry address is a usage mistake (exit 2).
func (f *chainFlags) connect(ctx context.Context, name string, signer bool) (string, *ens.Client, error) {
	norm, err := ens.Normalize(name)
	if err != nil {
		return "", nil, withCode(exitUsage, err)
	}
	ec, err := f.clientConfig(signer)
	if err != nil {
		return "", nil, err
	}
	c, err := ens.New(ctx, ec)
	if err != nil {
		return "", nil, withCode(exitUsage, err)
	}
	// New does not touch the network; a one-shot command checks the chain
	// at once, so a wrong chain id or registry is reported as what it is.
	if err := c.Ping(ctx); err != nil {
		c.Close()
		if errors.Is(err, ens.ErrWrongChain) || errors.Is(err, ens.ErrNoRegistry) {
			return "", nil, withCode(exitUsage, err)
		}
		return "", nil, err
	}
	return norm, c, nil
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
	universal    string
}

func (f *chainFlags) register(fs *flag.FlagSet, signer bool) {
	fs.StringVar(&f.config, "config", "", "configuration `FILE` (default $"+config.EnvPath+", else "+config.DefaultPath+"; not read when --rpc is given without -config)")
	fs.StringVar(&f.rpc, "rpc", "", "Ethereum JSON-RPC `URL` (overrides chain.rpc)")
	fs.StringVar(&f.registry, "registry", "", "ENS registry `ADDRESS` (overrides chain.ens_registry; default the canonical "+ens.CanonicalRegistry.Hex()+")")
	fs.Uint64Var(&f.chainID, "chain-id", 0, "refuse to run unless the node's chain id is `N` (overrides chain.chain_id)")
	fs.DurationVar(&f.poll, "poll", 0, "receipt poll `INTERVAL` (overrides chain.poll_interval; default 1s)")
	fs.StringVar(&f.universal, "universal-resolver", "", "resolve through the ENS Universal Resolver at `ADDRESS` (overrides chain.universal_resolver; \"none\" walks the registry)")
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
	switch {
	case f.universal == "none":
		ec.UniversalResolver = common.Address{}
	case f.universal != "":
		if !common.IsHexAddress(f.universal) {
			return ec, usageErrorf("--universal-resolver %q is not an address (0x + 40 hex digits) or none", f.universal)
		}
		ec.UniversalResolver = common.HexToAddress(f.universal)
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
snapshot blob. NAME is normalised (ENSIP-15) first, then resolved the way
ENS specifies: through the Universal Resolver when one is configured,
else by walking the registry (ENSIP-10), following CCIP-read lookups to
offchain gateways. --json also says which resolver answered and how.
Exits 4 when the name does not exist or has no record, 7 when an offchain
lookup is refused, 1 when a gateway or the chain cannot be reached.`

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
	name, client, err := cf.connect(ctx, pos[0], false)
	if err != nil {
		return err
	}
	defer client.Close()
	res, err := client.Resolve(ctx, name)
	if err == nil && res.Value == "" {
		err = fmt.Errorf("%w on %s", ens.ErrNoPointer, res.Name)
	}
	if err != nil {
		if errors.Is(err, ens.ErrNoPointer) || errors.Is(err, ens.ErrNameNotFound) {
			return withCode(exitNotFound, err)
		}
		return err
	}
	if *asJSON {
		return json.NewEncoder(env.stdout).Encode(pointerGetResult{
			Name: res.Name, Value: res.Value, Resolver: res.Resolver.Hex(), Via: res.Via.String(),
			Lookups: res.Lookups, Gateways: res.Gateways,
		})
	}
	_, err = fmt.Fprintln(env.stdout, res.Value)
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
for the transaction to be mined and prints its hash and gas used.

Blob ids may begin with "-": one is taken as VALUE wherever it stands, and
as PREV after --expect (or --expect=PREV). Any other VALUE that begins with
"-" goes after "--".`

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
	norm, client, err := cf.connect(ctx, name, true)
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

type pointerGetResult struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// Resolver answered, Via says how (onchain, extended, wildcard,
	// universal-resolver), Lookups counts the CCIP-read lookups followed
	// and Gateways are the origins of the gateways that answered.
	Resolver string   `json:"resolver"`
	Via      string   `json:"via"`
	Lookups  int      `json:"lookups"`
	Gateways []string `json:"gateways,omitempty"`
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

const pointerAdoptHelp = `Resolve a held pointer by taking the other writer's snapshot. Publishing
is held when the agent's agent-snapshot record names a blob that is not of
the agent's own lineage (another machine, another writer); 'hermesd status'
and /readyz say so. adopt restores the snapshot the record names into the
brain directory, after moving the current brain aside to a sibling
directory (printed; nothing is deleted), verifies it, and resumes
publishing from it. A restore that fails puts the brain back.

When hermesd runs on this configuration (http.socket, or http.listen with
http.token), the daemon does it; otherwise the command works on the state
directory itself.

Exit status: 0 adopted; 2 nothing is held (or a usage or configuration
error); 1 the chain, Walrus or the disk failed (through the daemon, any
failure); 3, 4, 6 the snapshot does not verify, is missing, or does not
decrypt with this agent's key (the brain is left as it was).`

const pointerOverrideHelp = `Resolve a held pointer by publishing ours: the agent's newest verified
snapshot is written over whatever the record names now (compare-and-set
from that value), and publishing resumes. Use it when the other writer's
snapshot is the one to discard.

When hermesd runs on this configuration (http.socket, or http.listen with
http.token), the daemon does it and this command waits up to --wait for
the pointer to be published; otherwise it writes the record itself, signed
by chain.signer.

Exit status: 0 published; 2 nothing is held (or a usage or configuration
error); 1 not published (the chain failed, or the record changed again and
is held again) — an override that could not be written stays pending and
is published by the daemon.`

// pointerResolution is what adopt and override print with --json.
type pointerResolution struct {
	Agent  string `json:"agent"`
	Name   string `json:"name"`
	Action string `json:"action"` // adopt, override
	// Via says who acted: "daemon" (its API) or "state" (this command,
	// on the state directory).
	Via string `json:"via"`
	// Replaced is the other writer's value the record held.
	Replaced string `json:"replaced,omitempty"`
	// Published is the record's value now: the adopted snapshot, or ours.
	Published string `json:"published,omitempty"`
	// SetAside is where adopt moved the previous brain.
	SetAside string `json:"setAside,omitempty"`
	TxHash   string `json:"txHash,omitempty"`
	GasUsed  uint64 `json:"gasUsed,omitempty"`
	// Pending: override --wait 0 through the daemon; Published is the
	// value the daemon is about to publish.
	Pending bool `json:"pending,omitempty"`
}

func runPointerResolve(ctx context.Context, env *cmdEnv, action string, args []string) error {
	help := pointerAdoptHelp
	usage := "pointer adopt AGENT [-config FILE] [--json]"
	if action == "override" {
		help = pointerOverrideHelp
		usage = "pointer override AGENT [-config FILE] [--wait DURATION] [--json]"
	}
	fs := newFlagSet(env, "pointer "+action, usage, help)
	cfgPath := configFlag(fs)
	asJSON := fs.Bool("json", false, "print the result as one JSON object")
	wait := time.Duration(0)
	if action == "override" {
		fs.DurationVar(&wait, "wait", 2*time.Minute, "through the daemon: wait at most `DURATION` for the pointer to be published (0: do not wait)")
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("pointer %s: want exactly one AGENT, got %d arguments", action, len(pos))
	}
	cfg, ac, log, err := loadAgentConfig(env, *cfgPath, pos[0], "warn")
	if err != nil {
		return err
	}
	if ac.ENSName == "" {
		return usageErrorf("pointer %s: agent %s has no ens_name, so it publishes no pointer and is never held", action, ac.ID)
	}
	out := pointerResolution{Agent: ac.ID, Name: ac.ENSName, Action: action}
	dc, err := findDaemon(ctx, cfg)
	if err != nil {
		return err
	}
	if dc != nil {
		out.Via = "daemon"
		err = dc.resolve(ctx, &out, wait)
	} else {
		out.Via = "state"
		err = resolveOnState(ctx, cfg, ac, log, &out)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(env.stdout).Encode(out)
	}
	switch action {
	case "adopt":
		fmt.Fprintf(env.stdout, "%s: adopted %s (the snapshot %s names); publishing resumed\n", out.Agent, short(out.Published), out.Name)
		if out.SetAside != "" {
			fmt.Fprintf(env.stdout, "the previous brain was set aside in %s\n", out.SetAside)
		}
	case "override":
		if out.Pending {
			fmt.Fprintf(env.stdout, "%s: override recorded; hermesd publishes %s over %s\n", out.Agent, out.Published, sanitize(out.Replaced))
			break
		}
		fmt.Fprintf(env.stdout, "%s: %s → %s (ours, over %s); publishing resumed\n", out.Agent, out.Name, out.Published, sanitize(out.Replaced))
		if out.TxHash != "" {
			fmt.Fprintf(env.stdout, "tx %s, gas used %d\n", out.TxHash, out.GasUsed)
		}
	}
	return nil
}

// notHeld is the refusal when there is nothing to resolve: nothing was
// tried and nothing changed, and trying again cannot help, so it is a
// usage error (exit 2) rather than a failure (1) a supervisor would retry.
func notHeld(id, action string) error {
	return withCode(exitUsage, fmt.Errorf("pointer %s: %s: %w (nothing to resolve; 'hermesd status' shows holds)", action, id, pointer.ErrNotHeld))
}

// resolveOnState adopts or overrides on the state directory, with no
// daemon running.
func resolveOnState(ctx context.Context, cfg *config.Config, ac *config.Agent, log *slog.Logger, out *pointerResolution) (err error) {
	// adopt only reads the chain and Walrus; override signs.
	if out.Action == "override" {
		if err := requireSigners(cfg, "pointer override", ac); err != nil {
			return err
		}
	}
	svc, err := compose.Build(ctx, cfg, log, compose.Options{ReadOnly: out.Action == "adopt"})
	if err != nil {
		return withCode(exitUsage, fmt.Errorf("startup: %w", err))
	}
	defer svc.Close()
	if out.Action == "adopt" {
		// Receipts re-imported from the adopted brain are checked against
		// the same signers as the daemon's, its own included.
		trusted, _, err := compose.Trusted(cfg)
		if err != nil {
			return withCode(exitUsage, err)
		}
		svc.Trusted = trusted
	}
	a, err := openAgentState(svc, cfg, ac.ID, "to act through the running daemon, configure http.socket, or http.token with http.listen")
	if err != nil {
		return err
	}
	defer func() {
		if cerr := a.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	h := a.Head().Hold()
	if h == nil {
		return notHeld(ac.ID, out.Action)
	}
	out.Replaced = h.Value
	if out.Action == "adopt" {
		aside, err := a.Adopt(ctx)
		if errors.Is(err, pointer.ErrNotHeld) {
			return notHeld(ac.ID, out.Action)
		}
		if err != nil {
			return err
		}
		out.SetAside, out.Published = aside, a.Status().Published
		return nil
	}
	if err := a.Override(ctx); err != nil {
		if errors.Is(err, pointer.ErrNotHeld) {
			return notHeld(ac.ID, out.Action)
		}
		return err
	}
	// A rollback found while writing is published over at once, as the
	// daemon does.
	r, ok := pointer.Publish(ctx, svc.Chains(), a.Head(), pointer.PublishOptions{})
	switch {
	case !ok:
		return errors.New("override recorded, but the pointer was not written (it stays pending; 'hermesd run' publishes it)")
	case r.Outcome == pointer.Published:
		out.Published, out.Replaced, out.TxHash, out.GasUsed = r.Update.Value, r.Update.Expected, r.Write.Tx.Hash, r.Write.Tx.Gas
		if r.Err != nil {
			return fmt.Errorf("published %s, but the agent state was not saved: %w", r.Update.Value, r.Err)
		}
		return nil
	case r.Outcome == pointer.Held, r.Outcome == pointer.Unauthorized:
		return fmt.Errorf("not published; held again: %w", r.Err)
	case r.Outcome == pointer.Lagging:
		return fmt.Errorf("override written to ens.records %s (tx %s), not yet visible from L1; 'hermesd run' confirms it", r.Target, r.Write.Tx.Hash)
	}
	return fmt.Errorf("override recorded, but the pointer was not written (it stays pending; 'hermesd run' publishes it): %w", r.Err)
}

// daemonClient talks to a running daemon's API.
type daemonClient struct {
	http  *http.Client
	base  string // http://host:port or http://hermesd (socket)
	token string // "" over the socket
	where string // for messages
}

// findDaemon returns a client of the daemon running on cfg, or nil when
// none answers. A daemon that answers only on TCP without http.token
// cannot be asked to change anything: that is a configuration error.
func findDaemon(ctx context.Context, cfg *config.Config) (*daemonClient, error) {
	if p := cfg.HTTP.Socket; p != "" {
		c := &daemonClient{
			http: &http.Client{Transport: &http.Transport{
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, "unix", p)
				},
			}},
			base:  "http://hermesd",
			where: "unix:" + p,
		}
		if c.alive(ctx) {
			return c, nil
		}
	}
	l := cfg.HTTP.Listen
	if l == "" {
		return nil, nil
	}
	if _, port, err := net.SplitHostPort(l); err != nil || port == "0" {
		return nil, nil
	}
	// No proxy from the environment: the daemon is where the
	// configuration says.
	c := &daemonClient{http: &http.Client{Transport: &http.Transport{}}, base: "http://" + l, where: "http://" + l}
	if !c.alive(ctx) {
		return nil, nil
	}
	if cfg.HTTP.Token.IsZero() {
		return nil, usageErrorf("hermesd is running on this configuration (%s) and takes this command only over http.socket or with http.token; "+
			"configure one of them, or stop hermesd and run the command again", c.where)
	}
	tok, err := config.ReadSecret(cfg.HTTP.Token)
	if err != nil {
		return nil, withCode(exitUsage, fmt.Errorf("http.token: %w", err))
	}
	c.token = tok
	return c, nil
}

// alive reports whether a hermesd answers /healthz there.
func (c *daemonClient) alive(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/healthz", nil)
	if err != nil {
		return false
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<10))
	return resp.StatusCode == http.StatusOK
}

// maxAPIBody bounds what is read of an API answer.
const maxAPIBody = 16 << 20

// do sends a request and decodes a JSON answer into v; an error status
// becomes an error carrying the daemon's message.
func (c *daemonClient) do(ctx context.Context, method, path string, v any) error {
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader("{}")
	} else {
		// A status is quick; an adopt downloads a snapshot and takes
		// what it takes (the caller's context ends it).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("ask hermesd at %s: %w", c.where, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIBody))
	if err != nil {
		return fmt.Errorf("ask hermesd at %s: %w", c.where, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		json.Unmarshal(b, &e)
		msg := sanitize(strings.TrimSpace(e.Error))
		if msg == "" {
			msg = resp.Status
		}
		err := fmt.Errorf("hermesd at %s: %s", c.where, msg)
		switch resp.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusMisdirectedRequest:
			return withCode(exitUsage, err)
		case http.StatusConflict:
			return &apiConflict{err}
		}
		return err
	}
	if v == nil {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("hermesd at %s: unreadable answer: %w", c.where, err)
	}
	return nil
}

// apiConflict is the daemon's 409: the agent is not held.
type apiConflict struct{ error }

func (e *apiConflict) Unwrap() error { return e.error }

// agentStatus returns one agent's status as the daemon reports it.
func (c *daemonClient) agentStatus(ctx context.Context, id string) (agent.Status, error) {
	var rep daemon.StatusReport
	if err := c.do(ctx, http.MethodGet, "/v1/status", &rep); err != nil {
		return agent.Status{}, err
	}
	for _, s := range rep.Agents {
		if s.ID == id {
			return s, nil
		}
	}
	return agent.Status{}, withCode(exitUsage, fmt.Errorf("hermesd at %s does not run agent %s (another configuration?)", c.where, id))
}

// resolve asks the daemon to adopt or override; for override it waits up
// to wait for the pointer to be published.
func (c *daemonClient) resolve(ctx context.Context, out *pointerResolution, wait time.Duration) error {
	before, err := c.agentStatus(ctx, out.Agent)
	if err != nil {
		return err
	}
	if before.Hold == nil {
		return notHeld(out.Agent, out.Action)
	}
	out.Replaced = before.Hold.Value
	var ans map[string]string
	err = c.do(ctx, http.MethodPost, "/v1/agents/"+url.PathEscape(out.Agent)+"/pointer/"+out.Action, &ans)
	var conflict *apiConflict
	if errors.As(err, &conflict) {
		return notHeld(out.Agent, out.Action)
	}
	if err != nil {
		return err
	}
	out.SetAside = ans["setAside"]
	if out.Action == "adopt" {
		s, err := c.agentStatus(ctx, out.Agent)
		if err != nil {
			return err
		}
		out.Published = s.Published
		return nil
	}
	deadline := time.Now().Add(wait)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		s, err := c.agentStatus(ctx, out.Agent)
		if err != nil {
			return err
		}
		switch {
		case s.Hold != nil:
			return fmt.Errorf("not published; held again: %s", sanitize(s.Hold.Reason))
		case s.Pending == nil:
			out.Published = s.Published
			return nil
		case wait <= 0:
			out.Published, out.Pending = s.Pending.Value, true
			return nil
		case time.Now().After(deadline):
			why := ""
			if s.Pending.LastErr != "" {
				why = ": " + sanitize(s.Pending.LastErr)
			}
			return fmt.Errorf("override recorded; hermesd has not published %s within %v (it keeps trying)%s", s.Pending.Value, wait, why)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
