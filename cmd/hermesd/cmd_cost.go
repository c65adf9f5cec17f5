package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/ledger"
	"github.com/hermesd/hermesd/internal/walrus"
)

func runCost(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "cost", "cost [-config FILE] [--json] [AGENT]",
		`Show what the agents have spent — Walrus storage as the publishers charged
it (blobs, quilt patches, encoded bytes, encoded bytes x epochs, WAL), the
Sui transactions those stores took (a quilt's charge and transactions
shared by its patches in proportion to their bytes), and the gas of
pointer transactions by chain (gas used x effective gas price) — and what
they spend per day and per month at their recent rate: the last 24 clock
hours (less when recording began later).

Beside it, what the same snapshots would cost the naive way: one blob
holding the whole brain and one L1 setText (47,819 gas) per snapshot, priced
at cost.walrus_storage_price and cost.walrus_write_price and at the gas
price paid on the L1. USD figures need cost.wal_usd, cost.eth_usd and
cost.sui_tx_usd.

Reads the state directory without its lock, so it works beside a running
daemon and without one.`)
	cfgPath := configFlag(fs)
	jsonOut := fs.Bool("json", false, "print JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usageErrorf("cost takes at most one AGENT")
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(cfg.Agents))
	for _, a := range cfg.Agents {
		ids = append(ids, a.ID)
	}
	if len(pos) == 1 {
		if _, err := cfg.Agent(pos[0]); err != nil {
			return withCode(exitUsage, err)
		}
		ids = pos[:1]
	}
	rep, err := costReport(cfg, ids, time.Now())
	if err != nil {
		return err
	}
	if *jsonOut {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printCost(env.stdout, rep, len(pos) == 1)
	return nil
}

// costReport reads the ledgers of agents ids from the state directory.
func costReport(cfg *config.Config, ids []string, now time.Time) (ledger.Report, error) {
	books := make([]ledger.Book, 0, len(ids))
	for _, id := range ids {
		b, err := ledger.Load(cfg.StateDir, id)
		if err != nil {
			return ledger.Report{}, fmt.Errorf("%w (hermesd run moves it aside to %s.bad and counts again from zero)", err, ledger.FileName)
		}
		books = append(books, b)
	}
	return ledger.NewReport(books, compose.Prices(cfg), now), nil
}

func printCost(w io.Writer, rep ledger.Report, one bool) {
	if !one && len(rep.Agents) > 1 {
		printCostSummary(w, rep, "")
		fmt.Fprintln(w)
		printCostDetail(w, "all agents", rep.Total, rep.Prices)
		return
	}
	a := rep.Total
	name := "all agents"
	if len(rep.Agents) == 1 {
		a, name = rep.Agents[0], "agent "+rep.Agents[0].Agent
	}
	printCostDetail(w, name, a, rep.Prices)
}

// printCostSummary is one line per agent, each line after indent. STORES
// counts an agent's own blobs and its quilt patches (shares of quilts).
func printCostSummary(w io.Writer, rep ledger.Report, indent string) {
	width := len("TOTAL")
	for _, a := range rep.Agents {
		width = max(width, len(a.Agent))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s%-*s\tSNAPSHOTS\tSTORES\tWAL\tWAL/MONTH\tSUI TX\tGAS ETH\tETH/MONTH\tUSD/MONTH\tNAIVE USD/MONTH\t\n", indent, width, "AGENT")
	young := false
	for _, a := range append(slices.Clone(rep.Agents), rep.Total) {
		name := a.Agent
		if name == "" {
			name = "TOTAL"
		}
		name = fmt.Sprintf("%s%-*s", indent, width, name)
		h, m, n := a.Hermesd.Spent, a.Hermesd.PerMonth, a.Naive.PerMonth
		monthly := []string{noProjection, noProjection, noProjection, noProjection}
		if m != nil && n != nil {
			monthly = []string{token(m.WAL), eth(m.Chains), dollars(m.USD), dollars(n.USD)}
		} else if !a.ProjectFrom.IsZero() {
			young = true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, count(h.Snapshots), count(h.Blobs+h.Patches),
			token(h.WAL), monthly[0], count(h.SuiTransactions), eth(h.Chains), monthly[1], monthly[2], monthly[3])
	}
	tw.Flush()
	if young {
		fmt.Fprintf(w, "%s%s: less than %s recorded; no rate to project from yet\n", indent, noProjection, hours(ledger.MinWindow))
	}
}

// noProjection stands for a projection not made (ledger.MinWindow).
const noProjection = "-"

// hours is "an hour", "2 hours".
func hours(d time.Duration) string {
	if d == time.Hour {
		return "an hour"
	}
	return d.String()
}

// printCostDetail is one agent's (or the total's) account, row by row.
func printCostDetail(w io.Writer, name string, a ledger.AgentReport, p ledger.Prices) {
	if a.Since.IsZero() {
		fmt.Fprintf(w, "%s: nothing recorded yet\n", name)
		return
	}
	window := time.Duration(a.Window * float64(time.Second)).Round(time.Second)
	if a.Hermesd.PerDay == nil {
		fmt.Fprintf(w, "%s: recorded since %s, for %s; per day and month from %s, once %s is recorded (%s of start-up says nothing about a month)\n", name,
			a.Since.UTC().Format(time.RFC3339), window, a.ProjectFrom.UTC().Format(time.RFC3339), hours(ledger.MinWindow), window)
	} else {
		fmt.Fprintf(w, "%s: recorded since %s; per day and month at the rate of the last %s\n", name,
			a.Since.UTC().Format(time.RFC3339), window)
	}
	fmt.Fprintf(w, "naive: one whole-brain blob and one L1 setText (%s gas) per snapshot, at %s + %s FROST per MiB (storage per epoch + write)\n\n",
		count(ledger.NaiveWriteGas), count(float64(p.Walrus.Storage)), count(float64(p.Walrus.Write)))
	h, n := a.Hermesd, a.Naive
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	// Labels are padded to one width: the writer aligns numbers right.
	const labelWidth = 26
	fmt.Fprintf(tw, "%-*s\tSPENT\tPER DAY\tPER MONTH\tNAIVE SPENT\tNAIVE PER MONTH\t\n", labelWidth, "")
	row := func(label string, f func(ledger.Figures) string) {
		projected := func(x *ledger.Figures) string {
			if x == nil {
				return noProjection
			}
			return f(*x)
		}
		fmt.Fprintf(tw, "%-*s\t%s\t%s\t%s\t%s\t%s\t\n", labelWidth, label, f(h.Spent), projected(h.PerDay), projected(h.PerMonth), f(n.Spent), projected(n.PerMonth))
	}
	row("snapshots", func(f ledger.Figures) string { return count(f.Snapshots) })
	row("Walrus blobs", func(f ledger.Figures) string { return count(f.Blobs) })
	if h.Spent.Patches > 0 {
		row("quilt patches", func(f ledger.Figures) string { return count(f.Patches) })
	}
	if h.Spent.Reused > 0 {
		row("already stored", func(f ledger.Figures) string { return count(f.Reused) })
	}
	row("encoded", func(f ledger.Figures) string { return size(f.EncodedBytes) })
	row("encoded x epochs", func(f ledger.Figures) string { return size(f.EncodedByteEpochs) })
	row("Walrus WAL", func(f ledger.Figures) string { return token(f.WAL) })
	row("Sui transactions", func(f ledger.Figures) string { return count(f.SuiTransactions) })
	for _, id := range chainsOf(h.Spent, n.Spent) {
		pick := func(f ledger.Figures) *ledger.ChainFigures {
			for i := range f.Chains {
				if f.Chains[i].ChainID == id {
					return &f.Chains[i]
				}
			}
			return nil
		}
		c := "chain " + strconv.FormatUint(id, 10)
		row(c+" transactions", func(f ledger.Figures) string {
			if x := pick(f); x != nil {
				return count(x.Transactions)
			}
			return "0"
		})
		row(c+" gas", func(f ledger.Figures) string {
			if x := pick(f); x != nil {
				return count(x.Gas)
			}
			return "0"
		})
		row(c+" ETH", func(f ledger.Figures) string {
			if x := pick(f); x != nil {
				if x.ETH == nil {
					return "?"
				}
				return token(*x.ETH)
			}
			return "0"
		})
	}
	if h.Spent.USD != nil {
		row("USD", func(f ledger.Figures) string { return dollars(f.USD) })
	}
	tw.Flush()
	if n := a.Recorded.Clamped; n > 0 {
		fmt.Fprintf(w, "\n%s\n", clampedNote(n))
	}
	if h.Spent.USD == nil {
		fmt.Fprintln(w, "\nUSD: set cost.wal_usd, cost.eth_usd and cost.sui_tx_usd")
	} else if !h.Spent.USD.Complete || !n.Spent.USD.Complete {
		fmt.Fprintln(w, "\nUSD marked * leaves out what has no configured price (cost.wal_usd, cost.eth_usd, cost.sui_tx_usd)")
	}
}

// clampedNote says that n store answers were not believed.
func clampedNote(n uint64) string {
	what := "Walrus store answers"
	if n == 1 {
		what = "Walrus store answer"
	}
	return fmt.Sprintf("note: %s %s reported more than Walrus's formula allows for the bytes sent (at cost.walrus_shards and the cost.walrus_*_price settings); "+
		"counted at the formula's bound (the log names the publisher)", count(float64(n)), what)
}

func chainsOf(fs ...ledger.Figures) []uint64 {
	var ids []uint64
	for _, f := range fs {
		for _, c := range f.Chains {
			if !slices.Contains(ids, c.ChainID) {
				ids = append(ids, c.ChainID)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// count is a number of things: whole with separators, or with one decimal
// when a projection makes it fractional.
func count(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return thousands(strconv.FormatInt(int64(v), 10))
	}
	if v >= 100 {
		return thousands(strconv.FormatInt(int64(math.Round(v)), 10))
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// thousands puts thousands separators into a decimal integer.
func thousands(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// token is an amount of WAL or ETH.
func token(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 0.001:
		// Three significant digits, without an exponent.
		return strconv.FormatFloat(v, 'f', max(0, 2-int(math.Floor(math.Log10(v)))), 64)
	case v < 1000:
		return strconv.FormatFloat(v, 'f', 4, 64)
	}
	return thousands(strconv.FormatInt(int64(math.Round(v)), 10))
}

// eth sums the fees of every chain.
func eth(cs []ledger.ChainFigures) string {
	var sum float64
	for _, c := range cs {
		if c.ETH == nil {
			return "?"
		}
		sum += *c.ETH
	}
	return token(sum)
}

func size(v float64) string {
	if v >= math.MaxInt64 {
		return "huge"
	}
	return walrus.FormatSize(int64(v))
}

func dollars(u *ledger.USD) string {
	if u == nil {
		return "-"
	}
	s := "$" + strconv.FormatFloat(u.Total, 'f', 2, 64)
	if u.Total > 0 && u.Total < 0.01 {
		s = "$" + strconv.FormatFloat(u.Total, 'g', 2, 64)
	}
	if !u.Complete {
		s += "*"
	}
	return s
}
