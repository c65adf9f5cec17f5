// Command benchtool-cost measures what an agent costs per month
// (docs/design.md §11), for scripts/bench.sh (BENCH_ONLY=cost).
//
// The workload: agents whose brains are about 5 MiB — a real SQLite
// memory.db written through SQLite (python3's sqlite3 module), a system
// prompt and skills/*.md — each changed once a minute by one ~4 KiB
// memory appended to its database. Time is compressed: one minute is one
// tick (-tick), and every duration of the configuration (quiet, max_lag,
// batch_window, snapshot_interval, pointer_interval, Walrus's two-week
// epoch) is scaled the same way.
//
// Everything runs in this process: the devnet (a go-ethereum chain with
// the real ENS contracts, and the local Walrus server, localwalrus, the
// server `hermesd walrus serve` runs, answering every store with its
// encoded length and cost by Walrus's formula) and one daemon per mode
// (compose + daemon, what `hermesd run` runs) driving all of that mode's
// agents. For each fleet size and mode the daemon starts, takes and
// publishes every agent's first snapshot, and then the agents change for
// -ticks ticks while every agent's ledger (the daemon's own cost
// accounting, from the server's answers and the chain's receipts) is
// sampled four times a tick.
//
// Per agent-month: for each agent, what its ledger recorded between its
// first and its last spend of a kind (Walrus stores; pointer
// transactions) within the ticks, divided by the time between them —
// whole periods of the agent's own rhythm, so the phase at which the
// window starts does not matter — times 43,830 minutes (30.44 days). The
// first snapshot of each brain (a one-off upload of the whole brain) is
// not part of it. Mode (c), the reference runtime's way, is one blob of
// the whole brain per change, stored for 5 epochs, and one L1 setText per
// change: Walrus's formula (walruscost) applied to the brains' sizes at
// every change of the run, and the gas of one L1 update measured on the
// same devnet.
//
// The ledgers are checked against the Walrus server: a proxy between the
// daemon and the server adds up the encoded lengths and costs of every
// store answer, which must equal what the ledgers recorded.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/pointer"
	"github.com/hermesd/hermesd/internal/walruscost"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "benchtool-cost: %v\n", err)
		stop()
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	dir    string
	fleets []int
	ticks  []int // per fleet: (a) and the variants
	tick   []time.Duration
	bTicks []int // per fleet: (b)
	bTick  []time.Duration
	spread []bool // per fleet: spread the agents' rhythms (modeRun)
	// renewalEpochs are the epochs the renewal of an unchanged brain is
	// measured at, renewalEpoch the short epoch it runs with.
	renewalEpochs []int
	renewalEpoch  time.Duration
	modes         []mode
	python        string
	prices        prices
	jsonOut       string
	verbose       bool
	keepWork      bool
	cpuProfile    string
	// shards is the Walrus network's shard count: encoded sizes (so
	// prices) and blob ids are Walrus's over it.
	shards int
}

func parse(args []string) (*options, error) {
	fs := flag.NewFlagSet("benchtool-cost", flag.ContinueOnError)
	o := &options{}
	fs.StringVar(&o.dir, "dir", "", "work directory (fresh; removed at the end unless -keep)")
	fleets := fs.String("agents", "1,100,1000", "fleet sizes, comma-separated")
	ticks := fs.String("ticks", "64,17,12", "per fleet: minutes (ticks) the agents change after their first snapshots, for (a) and the variants")
	tick := fs.String("tick", "500ms,2s,12s", "per fleet: the wall-clock length of one minute (tick), for (a) and the variants")
	bTicks := fs.String("b-ticks", "64,12,3", "as -ticks, for (b)")
	bTick := fs.String("b-tick", "500ms,5s,30s", "as -tick, for (b): long enough for the daemon to take a snapshot of every change")
	spread := fs.String("spread", "true,true,false", "per fleet: with snapshot_interval, spread the agents' rhythms over a cycle first (else they start together)")
	variants := fs.String("variants", "", "more modes: NAME:key=value,...;NAME:... over the defaults (keys quilts, batch_window, snapshot_interval, pointer_interval, epochs)")
	renewalEpochs := fs.String("renewal-epochs", "3,5,10", "epochs at which to measure the renewal of an unchanged brain (\"\" for none)")
	fs.DurationVar(&o.renewalEpoch, "renewal-epoch", time.Second, "the Walrus epoch of the renewal runs")
	fs.StringVar(&o.python, "python", "python3", "python3 with its sqlite3 module")
	fs.Float64Var(&o.prices.walUSD, "wal-usd", 0.111, "assumed USD per WAL")
	fs.Float64Var(&o.prices.gwei, "gwei", 1, "assumed L1 gas price, gwei")
	fs.Float64Var(&o.prices.ethUSD, "eth-usd", 3000, "assumed USD per ETH")
	fs.IntVar(&o.shards, "shards", walruscost.DefaultShards, "the Walrus network's shard count (figures are mainnet's at 1000; fewer is cheaper to compute and prices otherwise)")
	fs.StringVar(&o.jsonOut, "json", "", "also write the figures as JSON to this file")
	fs.BoolVar(&o.verbose, "v", false, "the daemons' warnings to stderr")
	fs.BoolVar(&o.keepWork, "keep", false, "keep the work directory")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.dir == "" {
		return nil, errors.New("-dir is required")
	}
	// The daemons' configurations live below it and name their paths
	// absolutely (a relative path would be taken from the file's place).
	var err error
	if o.dir, err = filepath.Abs(o.dir); err != nil {
		return nil, err
	}
	if o.fleets, err = ints(*fleets); err != nil {
		return nil, fmt.Errorf("-agents: %w", err)
	}
	if o.ticks, err = ints(*ticks); err != nil {
		return nil, fmt.Errorf("-ticks: %w", err)
	}
	if o.bTicks, err = ints(*bTicks); err != nil {
		return nil, fmt.Errorf("-b-ticks: %w", err)
	}
	if o.tick, err = durations(*tick); err != nil {
		return nil, fmt.Errorf("-tick: %w", err)
	}
	if o.bTick, err = durations(*bTick); err != nil {
		return nil, fmt.Errorf("-b-tick: %w", err)
	}
	for _, f := range strings.Split(*spread, ",") {
		b, err := strconv.ParseBool(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("-spread: %q", f)
		}
		o.spread = append(o.spread, b)
	}
	for _, n := range []int{len(o.ticks), len(o.tick), len(o.bTicks), len(o.bTick), len(o.spread)} {
		if n != len(o.fleets) {
			return nil, errors.New("-ticks, -tick, -b-ticks, -b-tick and -spread need one value per fleet of -agents")
		}
	}
	if *renewalEpochs != "" {
		if o.renewalEpochs, err = ints(*renewalEpochs); err != nil {
			return nil, fmt.Errorf("-renewal-epochs: %w", err)
		}
	}
	o.modes = []mode{configured(), today()}
	if *variants != "" {
		for _, v := range strings.Split(*variants, ";") {
			m, err := parseVariant(v)
			if err != nil {
				return nil, fmt.Errorf("-variants: %w", err)
			}
			o.modes = append(o.modes, m)
		}
	}
	return o, nil
}

func durations(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%q is not a positive duration", f)
		}
		out = append(out, d)
	}
	return out, nil
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseVariant reads NAME:key=value,... over the configured defaults.
func parseVariant(s string) (mode, error) {
	name, kvs, _ := strings.Cut(strings.TrimSpace(s), ":")
	m := configured()
	m.Key, m.Label = name, "variant "+name
	if name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789") != "" || name == "a" || name == "b" || name == "c" {
		return m, fmt.Errorf("variant name %q: lower-case letters and digits, not a, b or c", name)
	}
	for _, kv := range strings.Split(kvs, ",") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		var err error
		dur := func(p *time.Duration) { *p, err = time.ParseDuration(v) }
		switch k {
		case "quilts":
			m.Quilts, err = strconv.ParseBool(v)
		case "batch_window":
			dur(&m.BatchWindow)
		case "snapshot_interval":
			dur(&m.SnapshotInterval)
		case "pointer_interval":
			dur(&m.PointerInterval)
		case "epochs":
			m.Epochs, err = strconv.Atoi(v)
		default:
			err = errors.New("unknown key")
		}
		if err != nil {
			return m, fmt.Errorf("%s: %s: %v", name, kv, err)
		}
	}
	return m, nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return err
	}
	if o.cpuProfile != "" {
		pf, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer func() { pprof.StopCPUProfile(); pf.Close() }()
	}
	if !o.keepWork {
		defer os.RemoveAll(o.dir)
	}
	log := slog.New(slog.DiscardHandler)
	if o.verbose {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	w, err := startWriter(ctx, o.python)
	if err != nil {
		return err
	}
	defer w.close()
	tmpl := filepath.Join(o.dir, "template")
	if err := makeTemplate(w, tmpl); err != nil {
		return fmt.Errorf("template brain: %w", err)
	}
	var all []*tierResult
	for i, n := range o.fleets {
		tr, err := runTier(ctx, o, w, tmpl, i, log)
		if err != nil {
			return fmt.Errorf("%d agents: %w", n, err)
		}
		all = append(all, tr)
		report(out, tr, o.prices)
	}
	rs, err := runRenewal(ctx, o, w, tmpl, log)
	if err != nil {
		return err
	}
	reportRenewal(out, rs, o.prices)
	summary(out, all, o.prices)
	if o.jsonOut != "" {
		data, err := json.MarshalIndent(output{Fleets: all, Renewal: rs}, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonOut, data, 0o644); err != nil {
			return err
		}
	}
	return check(all, rs)
}

// output is what -json writes.
type output struct {
	Fleets  []*tierResult
	Renewal []renewal
}

// tierResult is one fleet size's runs.
type tierResult struct {
	Agents int
	// UpdateGas is one L1 setText update's gas, measured on the devnet.
	UpdateGas uint64
	// Shards is the devnet's Walrus shard count.
	Shards int
	Modes  []*figures
	Naive  *figures
	Brain  struct{ Files, Bytes int64 }
	Took   time.Duration
}

func runTier(ctx context.Context, o *options, w *writer, tmpl string, fleet int, log *slog.Logger) (*tierResult, error) {
	began := time.Now()
	n := o.fleets[fleet]
	dir := filepath.Join(o.dir, fmt.Sprintf("fleet-%d", n))
	agents := []devnet.Agent{{ID: "naive", ENSName: "naive.hermes.eth"}}
	for _, m := range o.modes {
		for i := range n {
			id := m.agentID(i)
			agents = append(agents, devnet.Agent{ID: id, ENSName: id + ".hermes.eth"})
		}
	}
	fmt.Fprintf(os.Stderr, "cost: %d agents: devnet with %d names, Walrus of %d shards\n", n, len(agents), o.shards)
	// The server's epochs are mainnet's two weeks: none ends within the
	// runs (a compressed day at most), as none would within a real day;
	// renewal before expiry is measured on its own (renewal.go).
	dn, err := devnet.Start(ctx, devnet.Options{Dir: filepath.Join(dir, "devnet"), Agents: agents,
		EpochDuration: 14 * 24 * time.Hour, Shards: o.shards, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("devnet: %w", err)
	}
	defer dn.Close()
	tr := &tierResult{Agents: n, Shards: o.shards}
	if tr.UpdateGas, err = updateGas(ctx, dn); err != nil {
		return nil, fmt.Errorf("L1 update gas: %w", err)
	}
	files, bytes, err := otherFiles(tmpl)
	if err != nil {
		return nil, err
	}
	var naive []uint64
	for _, m := range o.modes {
		sc, ticks := scale{o.tick[fleet]}, o.ticks[fleet]
		if m.Key == "b" {
			sc, ticks = scale{o.bTick[fleet]}, o.bTicks[fleet]
		}
		fmt.Fprintf(os.Stderr, "cost: %d agents, mode %s (%s): %d ticks of %v\n", n, m.Key, m.settings(), ticks, sc.tick)
		mr := &modeRun{mode: m, scale: sc, agents: n, ticks: ticks, spread: o.spread[fleet], dir: filepath.Join(dir, m.Key), dn: dn, w: w, tmpl: tmpl, log: log}
		mr.other.files, mr.other.bytes = files, bytes
		res, err := mr.run(ctx)
		if err != nil {
			return nil, fmt.Errorf("mode %s: %w", m.Key, err)
		}
		fmt.Fprintf(os.Stderr, "cost: %d agents, mode %s: first snapshots published after %v, done after %v\n",
			n, m.Key, res.Setup.Round(time.Millisecond), res.Took.Round(time.Millisecond))
		f := measure(res)
		tr.Modes = append(tr.Modes, f)
		naive = append(naive, res.Naive...)
		// The brains and blobs of a mode are not needed any more.
		if err := os.RemoveAll(mr.dir); err != nil {
			return nil, err
		}
	}
	tr.Naive = naiveFigures(naive, tr.UpdateGas, walruscost.DefaultPrice, o.shards)
	db, err := os.Stat(filepath.Join(tmpl, "memory.db"))
	if err != nil {
		return nil, err
	}
	tr.Brain.Files, tr.Brain.Bytes = int64(files+1), bytes+db.Size()
	tr.Took = time.Since(began)
	return tr, nil
}

// updateGas is the gas of one setText update on L1, as the reference
// runtime sends for every change: written through hermesd's own writer
// on the devnet's real PublicResolver, once to create the record and
// once to update it.
func updateGas(ctx context.Context, dn *devnet.Devnet) (uint64, error) {
	svc, err := compose.Build(ctx, dn.Config, nil, compose.Options{})
	if err != nil {
		return 0, err
	}
	defer svc.Close()
	var gas uint64
	for i, up := range []pointer.Update{
		{Name: "naive.hermes.eth", Value: blobID(1)},
		{Name: "naive.hermes.eth", Value: blobID(2), Expected: blobID(1)},
	} {
		r := pointer.Write(ctx, svc.Chain, []pointer.Update{up})[0]
		if r.Kind != pointer.Wrote || r.Tx.Hash == "" {
			return 0, fmt.Errorf("write %d: kind %d: %v", i, r.Kind, r.Err)
		}
		gas = r.Tx.Gas
	}
	return gas, nil
}

// blobID is a 43-character Walrus blob id, as the runtime writes.
func blobID(i int) string {
	sum := sha256.Sum256([]byte(fmt.Sprint("cost-bench-blob", i)))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
