package daemon

import (
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/hermesd/hermesd/internal/devchain"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/ledger"
	"github.com/hermesd/hermesd/internal/wait"
	"github.com/hermesd/hermesd/internal/walruscost"
)

// chainSpend sums what signer's transactions mined after block from cost,
// read from the chain's own receipts.
func chainSpend(t *testing.T, url string, from uint64, signer [20]byte) (txs []uint64, gas uint64, fee *big.Int) {
	t.Helper()
	c, err := ethclient.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	head, err := c.BlockNumber(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	fee = new(big.Int)
	for n := from + 1; n <= head; n++ {
		b, err := c.BlockByNumber(t.Context(), new(big.Int).SetUint64(n))
		if err != nil {
			t.Fatal(err)
		}
		for _, tx := range b.Transactions() {
			sender, err := types.Sender(types.LatestSignerForChainID(tx.ChainId()), tx)
			if err != nil || sender != signer {
				continue
			}
			r, err := c.TransactionReceipt(t.Context(), tx.Hash())
			if err != nil {
				t.Fatal(err)
			}
			txs = append(txs, r.GasUsed)
			gas += r.GasUsed
			fee.Add(fee, new(big.Int).Mul(new(big.Int).SetUint64(r.GasUsed), r.EffectiveGasPrice))
		}
	}
	return txs, gas, fee
}

// metricValue is the value of the sample name{labels} in a /metrics answer.
func metricValue(t *testing.T, text, sample string) float64 {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			var f float64
			if err := json.Unmarshal([]byte(v), &f); err != nil {
				// Prometheus writes large values as 1.23e+18: JSON reads that.
				t.Fatalf("%s: %q: %v", sample, v, err)
			}
			return f
		}
	}
	t.Fatalf("no sample %s in /metrics", sample)
	return 0
}

// TestSpendAccounted runs an agent through two snapshots and two pointer
// writes on the devnet, and checks what the daemon recorded against the
// Walrus server's answers and the chain's receipts, exactly; that status,
// /v1/status and /metrics show it; that it survives a restart; and that
// every metric the Grafana dashboard queries exists. Quilts are off: every
// pack is a blob of its own, recorded once, and every pointer a blob id
// (43 characters), as the naive way writes (TestSpendAccountedQuilts
// covers quilts).
func TestSpendAccounted(t *testing.T) {
	t.Parallel()
	// Mainnet's 1000 shards: the figures below are what an operator pays.
	w := newWorldWith(t, devnet.Options{NoQuilts: true, Shards: walruscost.DefaultShards}, devnet.Agent{ID: "auditor", ENSName: "auditor.hermes.eth"})
	seedBrain(t, w.brain("auditor"))
	rpc, err := ethclient.Dial(w.dn.Chain.URL())
	if err != nil {
		t.Fatal(err)
	}
	start, err := rpc.BlockNumber(t.Context())
	rpc.Close()
	if err != nil {
		t.Fatal(err)
	}
	d := w.start()
	first := published(t, d, "auditor")
	writeFile(t, filepath.Join(w.brain("auditor"), "skills/new.md"), "a new skill\n", 0o644)
	a, _ := d.Agent("auditor")
	wait.For(t, "the second snapshot published", func() bool {
		s := a.Status()
		return s.Last != nil && s.Last.BlobID != first && s.Published == s.Last.BlobID && s.Pending == nil
	})
	signer := crypto.PubkeyToAddress(w.dn.SignerKey.PublicKey)
	txs, gas, fee := chainSpend(t, w.dn.Chain.URL(), start, signer)
	if len(txs) != 2 {
		t.Fatalf("%d pointer transactions mined, want 2", len(txs))
	}
	chainID := uint64(devchain.DefaultChainID)
	if w.dn.Config.Chain.ChainID != 0 {
		chainID = w.dn.Config.Chain.ChainID
	}
	// The agent's share of a transaction is recorded just after its state.
	var book ledger.Book
	wait.For(t, "the gas recorded", func() bool {
		book = d.ledger.Book("auditor")
		c := book.Total.Chains[chainID]
		return c != nil && c.Gas == gas
	})
	puts := stores(t, w)
	epochs := uint64(w.dn.Config.EpochsOf(&w.dn.Config.Agents[0]))

	t.Run("walrus: every store answer", func(t *testing.T) {
		// Each pack of this small brain is under 445,557 bytes: 66,034,000
		// encoded, 63 units, at the local server's default price.
		tot := book.Total
		n := uint64(puts)
		want := ledger.Spend{Snapshots: 2, Blobs: n, EncodedBytes: n * 66_034_000, EncodedByteEpochs: n * 66_034_000 * epochs,
			FROST: n * walruscost.DefaultPrice.Cost(66_034_000, epochs), SuiTx: 2 * float64(n)}
		if tot.Snapshots != want.Snapshots || tot.Blobs != want.Blobs || tot.Reused != 0 || tot.EncodedBytes != want.EncodedBytes ||
			tot.EncodedByteEpochs != want.EncodedByteEpochs || tot.FROST != want.FROST || tot.SuiTx != want.SuiTx {
			t.Errorf("recorded %+v\nwant     %+v (%d stores answered)", tot, want, puts)
		}
		// The naive way: two whole-brain blobs of ~60 KB: 66,034,000 each.
		if tot.Naive.EncodedBytes != 2*66_034_000 || tot.Naive.Units != 2*63 || tot.Naive.UnitEpochs != 2*63*epochs {
			t.Errorf("naive %+v", tot.Naive)
		}
	})

	t.Run("gas: every receipt", func(t *testing.T) {
		c := book.Total.Chains[chainID]
		if c.Gas != gas || c.FeeWei.Cmp(fee) != 0 || c.Transactions != 2 || len(book.Total.Chains) != 1 {
			t.Errorf("recorded %d gas, %s wei, %v transactions; the chain says %d gas, %s wei, 2", c.Gas, c.FeeWei, c.Transactions, gas, fee)
		}
		// The second write is an update of the record. The naive way
		// writes a bare blob id (ledger.NaiveWriteGas, measured on the
		// devnet's contracts); ours carries its head's digest too, one
		// storage slot more (docs/format-v3.md §14.3).
		if extra := int64(txs[1]) - int64(ledger.NaiveWriteGas); extra < 5_000 || extra > 6_500 {
			t.Errorf("a pointer update costs %d gas on the devnet; a bare blob id's (ledger.NaiveWriteGas) is %d", txs[1], ledger.NaiveWriteGas)
		}
		t.Logf("pointer writes: %v gas (the naive way counts %d per snapshot)", txs, ledger.NaiveWriteGas)
	})

	t.Run("status and metrics", func(t *testing.T) {
		resp, err := http.Get("http://" + d.Addr() + "/v1/status")
		if err != nil {
			t.Fatal(err)
		}
		var st StatusReport
		err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st)
		resp.Body.Close()
		if err != nil || st.Cost == nil || len(st.Cost.Agents) != 1 {
			t.Fatalf("/v1/status cost: %v %+v", err, st.Cost)
		}
		ar := st.Cost.Agents[0]
		// Seconds of records are no rate to project a month from.
		if ar.Agent != "auditor" || ar.Recorded.FROST != book.Total.FROST || ar.Hermesd.Spent.Blobs != float64(book.Total.Blobs) ||
			ar.Hermesd.PerDay != nil || !ar.ProjectFrom.Equal(book.Since.Add(ledger.MinWindow)) || ar.Naive.Spent.Chains[0].Gas != 2*ledger.NaiveWriteGas {
			t.Errorf("status cost %+v", ar)
		}
		m := getMetrics(t, d)
		for sample, want := range map[string]float64{
			`hermesd_walrus_cost_frost_total{agent="auditor"}`:                                   float64(book.Total.FROST),
			`hermesd_walrus_stores_total{agent="auditor",kind="blob"}`:                           float64(puts),
			`hermesd_walrus_encoded_byte_epochs_total{agent="auditor"}`:                          float64(book.Total.EncodedByteEpochs),
			`hermesd_sui_transactions_total{agent="auditor"}`:                                    2 * float64(puts),
			`hermesd_gas_used_total{agent="auditor",chain_id="` + itoa(chainID) + `"}`:           float64(gas),
			`hermesd_chain_transactions_total{agent="auditor",chain_id="` + itoa(chainID) + `"}`: 2,
		} {
			if got := metricValue(t, m, sample); got != want {
				t.Errorf("%s = %v, want %v", sample, got, want)
			}
		}
		feeF, _ := new(big.Float).SetInt(fee).Float64()
		if got := metricValue(t, m, `hermesd_gas_fee_wei_total{agent="auditor",chain_id="`+itoa(chainID)+`"}`); got != feeF {
			t.Errorf("fee metric %v, want %v", got, feeF)
		}
	})

	t.Run("dashboard queries only metrics that exist", func(t *testing.T) {
		checkDashboard(t, getMetrics(t, d))
	})

	stop(t, d)
	t.Run("a restart keeps the spend", func(t *testing.T) {
		d2 := w.start()
		m := getMetrics(t, d2)
		if got := metricValue(t, m, `hermesd_walrus_cost_frost_total{agent="auditor"}`); got != float64(book.Total.FROST) {
			t.Errorf("after a restart the Walrus cost reads %v, want %v", got, float64(book.Total.FROST))
		}
		if b := d2.ledger.Book("auditor"); b.Total.Chains[chainID].Gas != gas || b.Total.Snapshots < 2 {
			t.Errorf("after a restart: %+v", b.Total)
		}
	})
}

func itoa(n uint64) string { return new(big.Int).SetUint64(n).String() }

// promNames are identifiers a PromQL expression uses that are not metric
// names: keywords, and the label lists of by/without/on/ignoring/group_*.
var (
	promKeywords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
		"group_right": true, "bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true}
	promStrings  = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promMatchers = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promLabels   = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	labelValues  = regexp.MustCompile(`^\s*label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)`)
)

// metricNames returns the metric names a PromQL expression (or a Grafana
// label_values query) reads.
func metricNames(expr string) []string {
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		return []string{m[1]}
	}
	e := promStrings.ReplaceAllString(expr, " ")
	e = promMatchers.ReplaceAllString(e, " ")
	e = promLabels.ReplaceAllString(e, " ")
	var names []string
	for _, loc := range promIdent.FindAllStringIndex(e, -1) {
		id := e[loc[0]:loc[1]]
		rest := strings.TrimLeft(e[loc[1]:], " \t\n")
		if promKeywords[strings.ToLower(id)] || strings.HasPrefix(rest, "(") {
			continue // a keyword or a function
		}
		if loc[0] > 0 && (e[loc[0]-1] == '.' || (e[loc[0]-1] >= '0' && e[loc[0]-1] <= '9')) {
			continue // part of a number: 1e9, 0.9
		}
		names = append(names, id)
	}
	return names
}

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string]string{
		`sum by (agent) (rate(hermesd_walrus_cost_frost_total{agent=~"$agent"}[$__rate_interval])) * 86400 / 1e9`: "hermesd_walrus_cost_frost_total",
		`histogram_quantile(0.9, sum by (le, stage) (rate(x_bucket{a="b,c"}[5m])))`:                               "x_bucket",
		`time() - a_seconds{agent=~"$agent"}`:                                                                     "a_seconds",
		`sum(rate(a[1h])) / sum(rate(b[1h]))`:                                                                     "a b",
		`1 - up{job="x"} == bool 0 and on (agent) other`:                                                          "up other",
		`label_values(hermesd_agent_ready, agent)`:                                                                "hermesd_agent_ready",
	} {
		if got := strings.Join(metricNames(expr), " "); got != want {
			t.Errorf("%s: %q, want %q", expr, got, want)
		}
	}
}

// dashboardQueries are the queries of the Grafana dashboard's panels and
// variables.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "configs", "grafana", "hermesd.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Query any `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	var exprs []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			if tg.Expr == "" {
				t.Errorf("panel %q has a target without an expression", p.Title)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(map[string]any); ok {
			if s, ok := q["query"].(string); ok {
				exprs = append(exprs, s)
			}
		}
	}
	return exprs
}

// dashboardGaps returns the metrics the dashboard's queries read that the
// /metrics answer text lacks, and every metric they read.
func dashboardGaps(t *testing.T, text string) (missing []string, used map[string]bool) {
	t.Helper()
	have := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			have[line[:i]] = true
		}
	}
	used = map[string]bool{}
	for _, e := range dashboardQueries(t) {
		names := metricNames(e)
		if len(names) == 0 {
			t.Errorf("query %q reads no metric", e)
		}
		for _, n := range names {
			if !have[n] && !used[n] {
				missing = append(missing, n)
			}
			used[n] = true
		}
	}
	return missing, used
}

// checkDashboard asserts that every metric the Grafana dashboard's queries
// read is in the /metrics answer text.
func checkDashboard(t *testing.T, text string) {
	t.Helper()
	missing, used := dashboardGaps(t, text)
	if len(missing) > 0 {
		t.Errorf("the dashboard reads metrics /metrics does not have: %v", missing)
	}
	// The dashboard shows spend, snapshots, quilts, pointer lag and errors.
	for _, n := range []string{"hermesd_walrus_cost_frost_total", "hermesd_gas_fee_wei_total", "hermesd_sui_transactions_total",
		"hermesd_snapshots_total", "hermesd_quilts_total", "hermesd_quilt_patches_bucket", "hermesd_quilt_batch_wait_seconds_bucket",
		"hermesd_pointer_pending_age_seconds", "hermesd_unsaved_change_age_seconds", "hermesd_failures_total"} {
		if !used[n] {
			t.Errorf("the dashboard does not show %s", n)
		}
	}
	if gaps := dashboardLabelGaps(t, text); len(gaps) > 0 {
		t.Errorf("the dashboard selects by labels its metrics do not have: %v", gaps)
	}
	t.Logf("the dashboard's queries read %d metrics, all in /metrics", len(used))
}

var (
	promSelector = regexp.MustCompile(`([A-Za-z_:][A-Za-z0-9_:]*)\{([^}]*)\}`)
	promMatcher  = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)`)
)

// dashboardLabelGaps returns the metric{label} pairs the dashboard's
// queries select by whose metric has no series with that label in the
// /metrics answer text (a panel that would show nothing for one agent).
// Prometheus's own target labels (job, instance) are not the daemon's.
func dashboardLabelGaps(t *testing.T, text string) []string {
	t.Helper()
	var gaps []string
	seen := map[string]bool{}
	for _, e := range dashboardQueries(t) {
		e = promStrings.ReplaceAllString(e, `""`)
		for _, sel := range promSelector.FindAllStringSubmatch(e, -1) {
			for _, m := range promMatcher.FindAllStringSubmatch(sel[2], -1) {
				name, label := sel[1], m[1]
				if label == "job" || label == "instance" || seen[name+"{"+label+"}"] {
					continue
				}
				seen[name+"{"+label+"}"] = true
				if !strings.Contains(text, "\n"+name+"{") && !strings.HasPrefix(text, name+"{") {
					continue // a metric /metrics lacks: dashboardGaps reports it
				}
				found := false
				for _, line := range strings.Split(text, "\n") {
					if strings.HasPrefix(line, name+"{") && (strings.Contains(line, "{"+label+"=") || strings.Contains(line, ","+label+"=")) {
						found = true
						break
					}
				}
				if !found {
					gaps = append(gaps, name+"{"+label+"}")
				}
			}
		}
	}
	return gaps
}

// TestDashboardLabelGaps: the check finds a label a metric lacks, and
// passes a metric that has it.
func TestDashboardLabelGaps(t *testing.T) {
	const m = "hermesd_failures_total"
	with := "# x\n" + m + `{agent="a",stage="hash"} 1` + "\n"
	without := "# x\n" + m + `{stage="hash"} 1` + "\n"
	if gaps := dashboardLabelGaps(t, with); slices.Contains(gaps, m+"{agent}") {
		t.Errorf("with the label: %v", gaps)
	}
	if gaps := dashboardLabelGaps(t, without); !slices.Contains(gaps, m+"{agent}") {
		t.Errorf("without the agent label: %v, want %s{agent} among them", gaps, m)
	}
}

// TestDashboardGaps: the check finds a metric /metrics lacks.
func TestDashboardGaps(t *testing.T) {
	missing, used := dashboardGaps(t, "hermesd_agent_ready{agent=\"a\"} 1\n")
	if len(used) < 20 || len(missing) != len(used)-1 {
		t.Errorf("%d of %d metrics missing from a /metrics with one; want all but one", len(missing), len(used))
	}
}
