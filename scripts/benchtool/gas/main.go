// Command benchtool-gas measures what a pointer update costs in gas, for
// an agent whose record lives on L1 and for one whose record lives on an
// L2 (docs/design.md §7.2, §11), for scripts/bench.sh (BENCH_ONLY=gas),
// with the longest value hermesd writes (a quilt patch id and its head's
// digest, docs/format-v3.md §14), and what each form of the value costs.
//
// It runs the devnet (two in-process chains under mainnet's Osaka fee and
// gas rules, the real ENS registry and PublicResolver on both, ENS's
// OffchainResolver and a gateway between them) and publishes through
// hermesd's own writer (internal/pointer, on the clients compose builds),
// which writes each record where it lives; the L2 ones are then read back
// through L1 resolution, as the daemon confirms them. Gas is read from the
// receipts, and the L1's gas is also summed block by block over the L2
// updates, which must send nothing on L1.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/pointer"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "benchtool-gas: %v\n", err)
		stop()
		os.Exit(1)
	}
}

// fleet is the number of agents in one batch.
const fleet = 10

// Assumed prices for the cost lines (stated in the output; gas is what is
// measured).
var (
	l1Gwei   = flag.Float64("l1-gwei", 1, "assumed L1 price per gas (base fee + tip), gwei")
	l2Gwei   = flag.Float64("l2-gwei", 0.01, "assumed L2 price per gas, gwei")
	ethUSD   = flag.Float64("eth-usd", 3000, "assumed ETH price, USD")
	interval = flag.Duration("pointer-interval", 10*time.Minute, "pointer_interval: at most one update per agent per interval")
)

// measured is one layout's figures.
type measured struct {
	first, update           uint64 // one agent, one transaction
	batchFirst, batchUpdate uint64 // per agent in a multicall of fleet
	firstTxs, updateTxs     int    // the transactions the batch took (chain.gas_limit)
	l1During                uint64 // L1 gas spent while publishing this layout
	txBytes                 int    // signed size of one update transaction
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.CommandLine
	dir := fs.String("dir", "", "work directory (fresh)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("-dir is required")
	}
	agents := []devnet.Agent{{ID: "solo", ENSName: "solo.hermes.eth"}, {ID: "solo2", ENSName: "solo.l2.hermes.eth", OnL2: true}}
	for i := range forms {
		agents = append(agents, devnet.Agent{ID: fmt.Sprintf("r%d", i), ENSName: fmt.Sprintf("r%d.hermes.eth", i)})
	}
	for i := range fleet {
		agents = append(agents,
			devnet.Agent{ID: fmt.Sprintf("f%02d", i), ENSName: fmt.Sprintf("f%02d.hermes.eth", i)},
			devnet.Agent{ID: fmt.Sprintf("g%02d", i), ENSName: fmt.Sprintf("g%02d.l2.hermes.eth", i), OnL2: true})
	}
	begin := time.Now()
	dn, err := devnet.Start(ctx, devnet.Options{Dir: *dir, Agents: agents, L2: &devnet.L2Options{}})
	if err != nil {
		return fmt.Errorf("devnet: %w", err)
	}
	defer dn.Close()
	svc, err := compose.Build(ctx, dn.Config, nil, compose.Options{})
	if err != nil {
		return err
	}
	defer svc.Close()
	chains, viaL1 := svc.Chains(), compose.Pointer(svc.Chain)
	// confirm reads the values written on the L2 back through L1
	// resolution (gateway included), as the daemon confirms them.
	confirm := func(target string, ups []pointer.Update) error {
		if target == "" {
			return nil
		}
		for _, u := range ups {
			if v, _, err := viaL1.Read(ctx, u.Name); err != nil || v != u.Value {
				return fmt.Errorf("%s through L1: %q, %v; want %q", u.Name, v, err, u.Value)
			}
		}
		return nil
	}

	layout := func(single string, names []string, target string, tx *ethclient.Client) (measured, error) {
		var m measured
		l1Start, err := dn.Chain.Client().BlockNumber(ctx)
		if err != nil {
			return m, err
		}
		one := func(value, expected string) (pointer.Written, error) {
			ups := []pointer.Update{{Name: single, Value: value, Expected: expected}}
			r := pointer.Write(ctx, chains[target], ups)
			if r[0].Kind != pointer.Wrote || r[0].Tx.Hash == "" {
				return r[0], fmt.Errorf("%s: kind %d: %v", single, r[0].Kind, r[0].Err)
			}
			return r[0], confirm(target, ups)
		}
		many := func(value func(int) string, expected func(int) string) (uint64, int, error) {
			ups := make([]pointer.Update, len(names))
			for i, n := range names {
				ups[i] = pointer.Update{Name: n, Value: value(i), Expected: expected(i)}
			}
			var sum uint64
			txs := map[string]bool{}
			for i, r := range pointer.Write(ctx, chains[target], ups) {
				if r.Kind != pointer.Wrote {
					return 0, 0, fmt.Errorf("%s: kind %d: %v", names[i], r.Kind, r.Err)
				}
				sum += r.Tx.Gas
				txs[r.Tx.Hash] = true
			}
			if len(txs) > 2 {
				return 0, 0, fmt.Errorf("%d agents went into %d transactions, want at most two multicalls", len(names), len(txs))
			}
			return sum / uint64(len(names)), len(txs), confirm(target, ups)
		}
		r, err := one(longest(1), "")
		if err != nil {
			return m, err
		}
		m.first = r.Tx.Gas
		if r, err = one(longest(2), longest(1)); err != nil {
			return m, err
		}
		m.update = r.Tx.Gas
		t, _, err := tx.TransactionByHash(ctx, common.HexToHash(r.Tx.Hash))
		if err != nil {
			return m, fmt.Errorf("transaction %s: %w", r.Tx.Hash, err)
		}
		raw, err := t.MarshalBinary()
		if err != nil {
			return m, err
		}
		m.txBytes = len(raw)
		if m.batchFirst, m.firstTxs, err = many(func(i int) string { return longest(100 + i) }, func(int) string { return "" }); err != nil {
			return m, err
		}
		if m.batchUpdate, m.updateTxs, err = many(func(i int) string { return longest(200 + i) }, func(i int) string { return longest(100 + i) }); err != nil {
			return m, err
		}
		l1End, err := dn.Chain.Client().BlockNumber(ctx)
		if err != nil {
			return m, err
		}
		for b := l1Start + 1; b <= l1End; b++ {
			h, err := dn.Chain.Client().HeaderByNumber(ctx, new(big.Int).SetUint64(b))
			if err != nil {
				return m, err
			}
			m.l1During += h.GasUsed
		}
		return m, nil
	}
	names := func(prefix, parent string) []string {
		var out []string
		for i := range fleet {
			out = append(out, fmt.Sprintf("%s%02d.%s", prefix, i, parent))
		}
		return out
	}
	// Each form of the record's value on a name of its own: a first write,
	// then an update to another value of the same form.
	var byForm [len(forms)][2]uint64
	for i, f := range forms {
		name := fmt.Sprintf("r%d.hermes.eth", i)
		for j, up := range []pointer.Update{{Name: name, Value: f.value(1)}, {Name: name, Value: f.value(2), Expected: f.value(1)}} {
			r := pointer.Write(ctx, svc.Chains()[""], []pointer.Update{up})
			if r[0].Kind != pointer.Wrote || r[0].Tx.Hash == "" {
				return fmt.Errorf("%s (%s): kind %d: %v", name, f.name, r[0].Kind, r[0].Err)
			}
			byForm[i][j] = r[0].Tx.Gas
		}
	}
	l1, err := layout("solo.hermes.eth", names("f", "hermes.eth"), "", dn.Chain.Client())
	if err != nil {
		return fmt.Errorf("L1 layout: %w", err)
	}
	l2, err := layout("solo.l2.hermes.eth", names("g", "l2.hermes.eth"), devnet.L2RecordsID, dn.L2.Chain.Client())
	if err != nil {
		return fmt.Errorf("L2 layout: %w", err)
	}
	took := time.Since(begin)
	report(out, l1, l2, took)
	reportForms(out, byForm)
	if l2.l1During != 0 {
		return fmt.Errorf("the L2 layout used %d gas on L1; it must use none", l2.l1During)
	}
	return nil
}

func report(out io.Writer, l1, l2 measured, took time.Duration) {
	perDay := uint64((24 * time.Hour) / *interval)
	fmt.Fprintf(out, "gas per pointer update (devnet: real ENS registry + PublicResolver 0.3.1, Osaka rules; measured from receipts in %s)\n",
		took.Round(time.Millisecond))
	fmt.Fprintf(out, "  the record is the longest value hermesd writes: a quilt patch id and its head's digest, %d characters (docs/format-v3.md §14)\n",
		len(longest(1)))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "layout\tfirst write\tupdate\tper agent, first, batch of 10\tper agent, update, batch of 10\tL1 gas per update\t")
	fmt.Fprintf(tw, "record on L1\t%d\t%d\t%d\t%d\t%d\t\n", l1.first, l1.update, l1.batchFirst, l1.batchUpdate, l1.update)
	fmt.Fprintf(tw, "record on the L2\t%d\t%d\t%d\t%d\t%d\t\n", l2.first, l2.update, l2.batchFirst, l2.batchUpdate, l2.l1During)
	tw.Flush()
	fmt.Fprintf(out, "  a batch of 10 took %d transaction(s) for first writes and %d for updates on L1, %d and %d on the L2 (chain.gas_limit)\n",
		l1.firstTxs, l1.updateTxs, l2.firstTxs, l2.updateTxs)
	fmt.Fprintf(out, "  (L2 layout: the L1 blocks over all %d of its updates, their L1 read-back through the gateway included, used %d gas)\n", 2+2*fleet, l2.l1During)
	fmt.Fprintf(out, "  signed update transaction: %d bytes on L1, %d on the L2 (an OP-stack L2 adds an L1 data fee for them, not measured here)\n",
		l1.txBytes, l2.txBytes)
	fmt.Fprintf(out, "per agent per day at pointer_interval %s (at most %d updates):\n", *interval, perDay)
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "layout\tL1 gas/day\tL2 gas/day\tL1 gas/day, batched\tcost/day alone\tcost/month alone\t")
	cost := func(gas uint64, gwei float64) float64 { return float64(gas) * gwei * 1e-9 * *ethUSD }
	l1Day, l2Day := perDay*l1.update, perDay*l2.update
	fmt.Fprintf(tw, "record on L1\t%d\t0\t%d\t$%.2f\t$%.0f\t\n", l1Day, perDay*l1.batchUpdate, cost(l1Day, *l1Gwei), 30*cost(l1Day, *l1Gwei))
	fmt.Fprintf(tw, "record on the L2\t%d\t%d\t0\t$%.4f\t$%.3f\t\n", perDay*l2.l1During, l2Day, cost(l2Day, *l2Gwei), 30*cost(l2Day, *l2Gwei))
	tw.Flush()
	fmt.Fprintf(out, "  prices ASSUMED, not measured: L1 %g gwei, L2 %g gwei, ETH $%g (-l1-gwei, -l2-gwei, -eth-usd)\n", *l1Gwei, *l2Gwei, *ethUSD)
	fmt.Fprintf(out, "  L1 gas per update for an agent whose record lives on the L2: %d (goal 0): %s\n", l2.l1During,
		map[bool]string{true: "PASS", false: "MISS"}[l2.l1During == 0])
}

// reportForms prints the gas of each form of the record's value.
func reportForms(out io.Writer, g [len(forms)][2]uint64) {
	fmt.Fprintln(out, "gas of one setText on L1 by the form of the value (a first write, then an update to a value of the same form):")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "value\tcharacters\tfirst write\tupdate\tupdate vs a blob id\t")
	for i, f := range forms {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%+d\t\n", f.name, len(f.value(1)), g[i][0], g[i][1], int64(g[i][1])-int64(g[0][1]))
	}
	tw.Flush()
	last := len(forms) - 1
	fmt.Fprintf(out, "  the longer record (%s) costs %d gas per update, %+.1f%% against a bare patch id "+
		"(a string over 64 bytes takes a third storage slot); a 128-bit digest would save %d of it\n", forms[last].name, g[last][1],
		100*(float64(g[last][1])/float64(g[1][1])-1), int64(g[last][1])-int64(g[last-1][1]))
}

// forms are the values the record takes (docs/format-v3.md §14), shortest
// first; the last is the longest hermesd writes.
var forms = [...]struct {
	name  string
	value func(int) string
}{
	{"blob id (v1, v2)", blob},
	{"patch id (v3, no digest)", patch},
	{"blob id + head digest (v3)", func(i int) string { return blob(i) + "." + digest(i) }},
	// What a digest cut to 128 bits would cost (never written:
	// docs/format-v3.md §14.3 says why).
	{"patch id + 128-bit digest", func(i int) string { return patch(i) + "." + digest(i)[:22] }},
	{"patch id + head digest (v3)", longest},
}

// longest is the longest record value: a quilt patch id and its head's
// digest.
func longest(i int) string { return patch(i) + "." + digest(i) }

// blob is a 43-character Walrus-style blob id, like the daemon writes.
func blob(i int) string {
	sum := sha256.Sum256([]byte(fmt.Sprint("bench-blob", i)))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// patch is a QuiltV1 patch id (50 characters): a quilt's blob id, the
// version and the patch's columns.
func patch(i int) string {
	sum := sha256.Sum256([]byte(fmt.Sprint("bench-quilt", i)))
	return base64.RawURLEncoding.EncodeToString(append(sum[:], 1, byte(i), 0, byte(i)+1, 0))
}

// digest is a head digest's text: 43 characters.
func digest(i int) string {
	sum := sha256.Sum256([]byte(fmt.Sprint("bench-commit", i)))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
