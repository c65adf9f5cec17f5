package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/ledger"
	"github.com/hermesd/hermesd/internal/pointer"
	"github.com/hermesd/hermesd/internal/state"
)

const pointerMoveHelp = `Move NAME's agent-snapshot record between L1 and an L2 (an ens.records
entry), in the order that never lets NAME resolve to nothing or to an
older value (docs/design.md §7.4):

  1. the head — what NAME resolves to through L1 now — is written at the
     destination (--to ID: that entry's contract, by its signer;
     --to l1: the L1 resolver --resolver ADDRESS, a PublicResolver);
  2. the destination's L1 resolver (ens.records[].l1_resolver, or
     --resolver) is asked, through CCIP-read as a wallet would, whether
     it serves the head for NAME; nothing has changed on L1 yet;
  3. one L1 transaction makes it NAME's resolver in the registry
     (setResolver; the signer must own NAME there, or be an operator its
     owner approved);
  4. NAME is resolved through L1 until it shows the head through the new
     resolver.

Each step is skipped when it is done already: after a crash or an error,
run the same command again and it finishes the move. --dry-run checks
everything and prints the plan with the L1 transaction's gas estimate,
sending nothing.

For a configured agent with this ens_name, the state directory's lock is
taken (stop hermesd first: a running daemon would go on writing where the
record was), the gas per month before and after is computed from the
agent's cost ledger (where the move's own transactions are then recorded), and the configuration change to make is printed:
its records: must name where the record lives now (hermesd refuses to
publish an agent whose name resolves through another ens.records entry's
l1_resolver than its records: says).

Exit status: 0 moved (or already moved); 2 a usage or configuration
error, or nothing to move; 4 NAME has no owner or no record; 5 hermesd
is running on this state directory; 1 anything else (the chain, the
gateway, a signer that may not change NAME's resolver) — nothing is lost:
run it again.`

// pointerMoveResult is what pointer move prints with --json.
type pointerMoveResult struct {
	Name    string `json:"name"`
	Agent   string `json:"agent,omitempty"`
	To      string `json:"to"` // the ens.records id, or "l1"
	Value   string `json:"value"`
	DryRun  bool   `json:"dryRun,omitempty"`
	Done    bool   `json:"alreadyMoved,omitempty"`
	Visible bool   `json:"visible"`
	// FromResolver answered before (FromResolverOf: the name whose
	// registry entry holds it); ToResolver serves the record now.
	FromResolver   string `json:"fromResolver"`
	FromResolverOf string `json:"fromResolverOf,omitempty"`
	PreviousOwn    string `json:"previousResolver,omitempty"` // the name's own resolver before (zero: none)
	ToResolver     string `json:"toResolver"`
	// Dest is the write of the head at the destination.
	DestPrevious string `json:"destPrevious"`
	DestTxHash   string `json:"destTxHash,omitempty"`
	DestChainID  uint64 `json:"destChainId,omitempty"`
	DestGasUsed  uint64 `json:"destGasUsed,omitempty"`
	// The L1 resolver change: its estimate, and once sent its receipt.
	L1GasEstimate uint64 `json:"l1GasEstimate,omitempty"`
	L1GasPrice    string `json:"l1GasPrice,omitempty"` // wei, decimal
	L1TxHash      string `json:"l1TxHash,omitempty"`
	L1GasUsed     uint64 `json:"l1GasUsed,omitempty"`
	// Gas is the agent's pointer gas before and after, from its ledger.
	Gas *moveGas `json:"gas,omitempty"`
	// ConfigChange is the agent's records: line the configuration must
	// have now ("" when it has it already).
	ConfigChange string `json:"configChange,omitempty"`
}

func runPointerMove(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "pointer move", "pointer move NAME --to ID|l1 [--resolver ADDRESS] [--dry-run] [--json] [-config FILE] [key flags]", pointerMoveHelp)
	var cf chainFlags
	cf.register(fs, true)
	toFlag := fs.String("to", "", "where the record goes: an ens.records `ID`, or l1 (required)")
	resolverFlag := fs.String("resolver", "", "the L1 resolver `ADDRESS` that will serve the record (required with --to l1: a PublicResolver the signer may write; default for --to ID: ens.records[].l1_resolver)")
	dryRun := fs.Bool("dry-run", false, "check and estimate, print the plan, send nothing")
	wait := fs.Duration("wait", 0, "wait at most `DURATION` for the new resolver, then L1 resolution, to show the head (default: the destination's visibility_timeout; 30s for l1)")
	asJSON := fs.Bool("json", false, "print the result as one JSON object")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("pointer move: want exactly one NAME, got %d arguments", len(pos))
	}
	if *toFlag == "" {
		return usageErrorf("pointer move: say where the record goes with --to ID (an ens.records entry) or --to l1")
	}
	cfg, err := cf.loadConfig()
	if err != nil {
		return err
	}
	if cfg == nil {
		return usageErrorf("pointer move: ens.records are read from the configuration; pass -config FILE")
	}
	norm, err := ens.Normalize(pos[0])
	if err != nil {
		return withCode(exitUsage, err)
	}
	to := *toFlag
	var rt *config.RecordsTarget
	if to != config.RecordsL1 {
		if rt = cfg.RecordsTarget(to); rt == nil {
			return usageErrorf("pointer move: --to %s: no such ens.records entry in the configuration (or l1)", sanitize(to))
		}
	}
	var resolver common.Address
	switch {
	case *resolverFlag != "":
		if !common.IsHexAddress(*resolverFlag) {
			return usageErrorf("pointer move: --resolver %q is not an address (0x + 40 hex digits)", sanitize(*resolverFlag))
		}
		resolver = common.HexToAddress(*resolverFlag)
	case rt == nil:
		return usageErrorf("pointer move: --to l1 needs --resolver ADDRESS, the L1 resolver (a PublicResolver the signer may write) that will hold the record; 'pointer move --to ID' printed the one the name had")
	case rt.L1Resolver == "":
		return usageErrorf("pointer move: ens.records %s names no l1_resolver: set it to the L1 resolver that serves its records (its OffchainResolver), or pass --resolver ADDRESS", rt.ID)
	default:
		resolver = common.HexToAddress(rt.L1Resolver)
	}
	ac := agentOfName(cfg, norm)
	if ac != nil && !*dryRun {
		// The lock keeps a daemon from running on the state directory
		// while the record moves: it would write the old place.
		sd, err := compose.OpenState(cfg)
		if err != nil {
			if errors.Is(err, state.ErrLocked) {
				return fmt.Errorf("%w; stop hermesd first: a move changes where agent %s's record is written, and the running daemon would go on writing the old place", err, ac.ID)
			}
			return err
		}
		defer sd.Close()
	}
	_, l1, err := cf.connect(ctx, norm, true)
	if err != nil {
		return err
	}
	defer l1.Close()
	var (
		req  pointer.MoveRequest
		dest *ens.Client
	)
	if rt != nil {
		if dest, err = cf.recordsClient(ctx, rt); err != nil {
			return err
		}
		req = compose.RecordsMove(rt, dest)
	} else {
		ec, err := cf.clientConfig(true)
		if err != nil {
			return err
		}
		// The L1 resolver as a records contract: written and read
		// directly, not through the name's resolution (which does not
		// reach it until the move's resolver change).
		ec.Records, ec.Logger = resolver, slog.New(slog.DiscardHandler)
		if dest, err = ens.New(ctx, ec); err != nil {
			return withCode(exitUsage, err)
		}
		req = compose.L1Move(cfg, resolver, dest)
	}
	defer dest.Close()
	req.Name, req.Resolver, req.L1, req.DryRun = norm, resolver, l1, *dryRun
	if *wait > 0 {
		req.Visibility = *wait
	}

	res, err := pointer.Move(ctx, req)
	out := pointerMoveResult{
		Name: norm, To: to, Value: res.Value, DryRun: *dryRun, Done: res.Done, Visible: res.Visible,
		FromResolver: res.From.Hex(), FromResolverOf: res.ResolverOf, ToResolver: resolver.Hex(),
		DestPrevious: res.AtDest, L1GasEstimate: res.Plan.Gas, L1GasPrice: bigString(res.Plan.GasPrice),
	}
	if res.Plan.From != (common.Address{}) {
		out.PreviousOwn = res.Plan.From.Hex()
	}
	if w := res.DestWrite; w.Tx.Hash != "" {
		out.DestTxHash, out.DestChainID, out.DestGasUsed = w.Tx.Hash, w.Tx.ChainID, w.Tx.Gas
	}
	if r := res.Resolver; !r.Unchanged && r.TxHash != (common.Hash{}) {
		out.L1TxHash, out.L1GasUsed = r.TxHash.Hex(), r.GasUsed
	}
	if err == nil && ac != nil {
		out.Agent = ac.ID
		if cfg.RecordsOf(ac) != rt {
			out.ConfigChange = fmt.Sprintf("records: %s", to)
		}
		out.Gas = moveGasFigures(env, cfg, ac, l1, rt, res, out.DestGasUsed)
	}
	if ac != nil && !*dryRun {
		// What the move paid is the agent's, like its pointer writes
		// (after the figures above, which are of its writes alone).
		recordMove(env, cfg, ac.ID, res)
	}
	if err != nil {
		if out.DestTxHash != "" {
			// What was done stays done; a re-run goes on from there.
			fmt.Fprintf(env.stdout, "head %s written at %s: tx %s (chain %d), gas used %d\n", sanitize(out.Value), destLabel(out), out.DestTxHash, out.DestChainID, out.DestGasUsed)
		}
		if errors.Is(err, pointer.ErrNoHead) {
			return withCode(exitUsage, err)
		}
		return fmt.Errorf("pointer move %s --to %s: %w", norm, to, err)
	}
	if *asJSON {
		return json.NewEncoder(env.stdout).Encode(out)
	}
	printMove(env.stdout, out, res)
	return nil
}

// moveGasFigures is the agent's pointer gas before and after the move
// (nil, said on stderr, when its ledger cannot be read).
func moveGasFigures(env *cmdEnv, cfg *config.Config, ac *config.Agent, l1 *ens.Client, rt *config.RecordsTarget, res pointer.MoveResult, destGas uint64) *moveGas {
	l1ID := uint64(0)
	if id := l1.ChainID(); id != nil {
		l1ID = id.Uint64()
	}
	destID := l1ID
	if rt != nil {
		destID = rt.ChainID
	}
	// Where the record was: the entry whose l1_resolver answered, else L1.
	fromID := l1ID
	if from, _ := compose.RouteOf(cfg, res.From, ""); from != "" {
		if t := cfg.RecordsTarget(from); t != nil {
			fromID = t.ChainID
		}
	}
	if fromID == destID {
		return nil
	}
	g, err := moveGasOf(cfg, ac.ID, fromID, destID, destGas, time.Now())
	if err != nil {
		fmt.Fprintf(env.stderr, "hermesd: the gas figures are not shown: %v\n", err)
		return nil
	}
	return &g
}

// recordMove records the move's mined transactions in the agent's cost
// ledger (the state directory's lock is held).
func recordMove(env *cmdEnv, cfg *config.Config, agent string, res pointer.MoveResult) {
	l := ledger.Open(cfg.StateDir, ledger.Options{})
	var errs []error
	if f := res.DestWrite.Fee; f != nil {
		errs = append(errs, l.Record(agent, ledger.Tx(f.ChainID, f.Gas, f.GasPrice, f.Share)))
	}
	if r := res.Resolver; !r.Unchanged && r.GasUsed > 0 {
		errs = append(errs, l.Record(agent, ledger.Tx(r.ChainID, r.GasUsed, r.EffectiveGasPrice, 1)))
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(env.stderr, "hermesd: the move's gas is not in the cost ledger: %v\n", err)
	}
}

// agentOfName is the configured agent whose ens_name is norm (nil: none).
func agentOfName(cfg *config.Config, norm string) *config.Agent {
	for i := range cfg.Agents {
		a := &cfg.Agents[i]
		if a.ENSName == "" {
			continue
		}
		if an, err := ens.Normalize(a.ENSName); err == nil && an == norm {
			return a
		}
	}
	return nil
}

// destLabel names a move's destination.
func destLabel(out pointerMoveResult) string {
	if out.To == config.RecordsL1 {
		return "the L1 resolver " + out.ToResolver
	}
	return "ens.records " + out.To
}

func printMove(w io.Writer, out pointerMoveResult, res pointer.MoveResult) {
	dest := destLabel(out)
	switch {
	case out.Done:
		fmt.Fprintf(w, "%s resolves through %s already (%s): moved; nothing sent\n", out.Name, out.ToResolver, sanitize(out.Value))
	case out.DryRun:
		fmt.Fprintf(w, "plan: move %s (head %s) to %s\n", out.Name, sanitize(out.Value), dest)
		fmt.Fprintf(w, "  now: resolves through %s, the resolver of %s (%s)\n", out.FromResolver, out.FromResolverOf, res.Via)
		if out.DestPrevious == out.Value {
			fmt.Fprintf(w, "  1. %s holds the head already: nothing to write\n", dest)
		} else {
			fmt.Fprintf(w, "  1. write the head at %s (it holds %q now)\n", dest, sanitize(out.DestPrevious))
		}
		fmt.Fprintf(w, "  2. check that %s serves the head for %s\n", out.ToResolver, out.Name)
		fmt.Fprintf(w, "  3. L1 setResolver(%s, %s): about %d gas", out.Name, out.ToResolver, out.L1GasEstimate)
		if p := res.Plan.GasPrice; p != nil {
			gwei, _ := new(big.Float).Quo(new(big.Float).SetInt(p), big.NewFloat(1e9)).Float64()
			eth, _ := new(big.Float).Quo(new(big.Float).Mul(new(big.Float).SetInt(p), new(big.Float).SetUint64(out.L1GasEstimate)), big.NewFloat(1e18)).Float64()
			fmt.Fprintf(w, " (%.6g ETH at %.4g gwei now)", eth, gwei)
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "  4. resolve %s through L1 until it shows the head\n", out.Name)
	default:
		if out.DestTxHash != "" {
			fmt.Fprintf(w, "head %s written at %s: tx %s (chain %d), gas used %d\n", sanitize(out.Value), dest, out.DestTxHash, out.DestChainID, out.DestGasUsed)
		} else {
			fmt.Fprintf(w, "head %s: %s holds it already\n", sanitize(out.Value), dest)
		}
		if out.L1TxHash != "" {
			fmt.Fprintf(w, "%s's resolver: %s → %s, L1 tx %s, gas used %d\n", out.Name, out.FromResolver, out.ToResolver, out.L1TxHash, out.L1GasUsed)
		}
		fmt.Fprintf(w, "verified: %s resolves through L1 to %s via %s (%d reads, %s)\n", out.Name, sanitize(out.Value), out.ToResolver, res.Reads, res.Waited.Round(time.Millisecond))
	}
	if g := out.Gas; g != nil {
		printMoveGas(w, *g)
	}
	if out.ConfigChange != "" {
		verb := "set"
		if out.DryRun {
			verb = "then set"
		}
		fmt.Fprintf(w, "configuration: %s agent %s's %s (hermesd refuses to publish it until its records: says where the record lives)\n", verb, out.Agent, out.ConfigChange)
	}
	if !out.DryRun && out.To != config.RecordsL1 && out.PreviousOwn != "" {
		fmt.Fprintf(w, "to move back: hermesd pointer move %s --to l1 --resolver %s\n", out.Name, out.PreviousOwn)
	}
}

// moveGas is an agent's pointer gas before and after a move, from its
// cost ledger: per month at the agent's observed rate once the ledger
// spans ledger.MinWindow, and per write always.
type moveGas struct {
	FromChain uint64 `json:"fromChainId"`
	ToChain   uint64 `json:"toChainId"`
	// Projected: the ledger spans enough time to project a month;
	// Window is the time the rate was taken over (seconds), ProjectFrom
	// when the projection begins otherwise.
	Projected   bool      `json:"projected"`
	Window      float64   `json:"windowSeconds"`
	ProjectFrom time.Time `json:"projectFrom,omitzero"`
	// WritesPerMonth at the observed rate (0 when not projected).
	WritesPerMonth float64 `json:"writesPerMonth"`
	// Before: gas a month on FromChain; After: on FromChain (0) and on
	// ToChain at the same rate of writes.
	BeforePerMonth    float64  `json:"beforeGasPerMonth"`
	AfterFromPerMonth float64  `json:"afterFromGasPerMonth"`
	AfterToPerMonth   float64  `json:"afterToGasPerMonth"`
	BeforeETHPerMonth *float64 `json:"beforeEthPerMonth,omitempty"`
	// Per write: the recorded mean on FromChain, and on ToChain the
	// recorded mean there, else what the move's own write there used.
	BeforePerWrite float64 `json:"beforeGasPerWrite"`
	AfterPerWrite  float64 `json:"afterGasPerWrite"`
	// AfterBasis says where AfterPerWrite comes from.
	AfterBasis string `json:"afterBasis"`
}

// moveGasOf computes agent's moveGas from its ledger; destWrite is the
// gas the move's own write at the destination used (0: none sent).
func moveGasOf(cfg *config.Config, agent string, from, to, destWrite uint64, now time.Time) (moveGas, error) {
	b, err := ledger.Load(cfg.StateDir, agent)
	if err != nil {
		return moveGas{}, err
	}
	rep := ledger.NewReport([]ledger.Book{b}, compose.Prices(cfg), now).Agents[0]
	g := moveGas{FromChain: from, ToChain: to, Window: rep.Window, ProjectFrom: rep.ProjectFrom}
	mean := func(id uint64) float64 {
		c := rep.Recorded.Chains[id]
		if c == nil || c.Transactions <= 0 {
			return 0
		}
		return float64(c.Gas) / c.Transactions
	}
	g.BeforePerWrite = mean(from)
	switch {
	case mean(to) > 0:
		g.AfterPerWrite, g.AfterBasis = mean(to), "recorded"
	case destWrite > 0:
		g.AfterPerWrite, g.AfterBasis = float64(destWrite), "the move's write"
	default:
		g.AfterBasis = "unknown (no write there recorded or sent)"
	}
	if pm := rep.Hermesd.PerMonth; pm != nil {
		g.Projected = true
		for _, c := range pm.Chains {
			if c.ChainID == from {
				g.WritesPerMonth, g.BeforePerMonth, g.BeforeETHPerMonth = c.Transactions, c.Gas, c.ETH
			}
		}
		g.AfterToPerMonth = g.WritesPerMonth * g.AfterPerWrite
	}
	return g, nil
}

func printMoveGas(w io.Writer, g moveGas) {
	if g.Projected {
		fmt.Fprintf(w, "gas per month (the agent's ledger, %s of writes at %s a month): before %s gas on chain %d; after 0 on chain %d + %s gas on chain %d (%s per write, %s)\n",
			hours(time.Duration(g.Window*float64(time.Second))), count(g.WritesPerMonth), count(g.BeforePerMonth), g.FromChain,
			g.FromChain, count(g.AfterToPerMonth), g.ToChain, count(g.AfterPerWrite), g.AfterBasis)
		return
	}
	from := "nothing recorded yet"
	if !g.ProjectFrom.IsZero() {
		from = "projected from " + g.ProjectFrom.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(w, "gas per month: not projected yet (less than %s in the agent's ledger; %s); per write: before %s gas on chain %d; after 0 on chain %d + %s gas on chain %d (%s)\n",
		hours(ledger.MinWindow), from, count(g.BeforePerWrite), g.FromChain, g.FromChain, count(g.AfterPerWrite), g.ToChain, g.AfterBasis)
}
