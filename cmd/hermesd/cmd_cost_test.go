package main

import (
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/ledger"
	"github.com/hermesd/hermesd/internal/state"
	"github.com/hermesd/hermesd/internal/walruscost"
)

// TestCostCommand: `hermesd cost` reads the ledgers a running daemon
// writes — here the state directory is locked, as by one — in text and
// JSON, for one agent and for all.
func TestCostCommand(t *testing.T) {
	t.Setenv(config.EnvPath, "")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hermesd.yml")
	body := fmt.Sprintf(`state_dir: %s
http:
  listen: ""
walrus:
  publishers: ["http://127.0.0.1:1"]
  aggregators: ["http://127.0.0.1:1"]
encryption:
  key: {file: ./snapshot.key}
chain:
  rpc: http://127.0.0.1:1
  chain_id: 1
  signer: {file: ./chain.key}
cost:
  wal_usd: 0.5
  eth_usd: 3000
  sui_tx_usd: 0.001
agents:
  - id: a1
    brain_dir: ./a1
    ens_name: a1.eth
  - id: a2
    brain_dir: ./a2
`, filepath.Join(dir, "state"))
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	sd, err := state.Open(filepath.Join(dir, "state"), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	l := ledger.Open(sd.Path(), ledger.Options{Now: func() time.Time { return time.Now().Add(-time.Hour) }})
	for _, s := range []ledger.Spend{
		ledger.Snapshot(ledger.NaiveBlobSize(5, 60_000), 5, 1000),
		ledger.Store(walruscost.NewBlob(66_034_000, 5, 32_760_000)),
		ledger.Tx(1, 47_819, big.NewInt(2e9), 1),
	} {
		if err := l.Record("a1", s); err != nil {
			t.Fatal(err)
		}
	}

	stdout, stderr, code := runCmd(t, "cost", "-config", cfg, "--json", "a1")
	if code != 0 {
		t.Fatalf("cost --json: exit %d: %s", code, stderr)
	}
	var rep ledger.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if len(rep.Agents) != 1 || rep.Agents[0].Agent != "a1" || rep.Agents[0].Recorded.FROST != 32_760_000 ||
		rep.Agents[0].Hermesd.Spent.WAL != 0.03276 || rep.Agents[0].Hermesd.PerDay.Blobs <= 0 {
		t.Fatalf("report %s", stdout)
	}
	usd := rep.Agents[0].Hermesd.Spent.USD
	if want := 0.03276*0.5 + 2*0.001 + 47_819*2e9/1e18*3000; usd == nil || !usd.Complete || usd.Total < want-1e-9 || usd.Total > want+1e-9 {
		t.Errorf("USD %+v, want %v", usd, want)
	}
	if rep.Prices.L1 != 1 || rep.Prices.Walrus != walruscost.DefaultPrice {
		t.Errorf("prices %+v", rep.Prices)
	}

	stdout, stderr, code = runCmd(t, "cost", "-config", cfg, "a1")
	if code != 0 {
		t.Fatalf("cost: exit %d: %s", code, stderr)
	}
	t.Logf("hermesd cost a1:\n%s", stdout)
	for _, want := range []string{"agent a1: recorded since", "Walrus WAL", "0.0328", "chain 1 gas", "47,819", "NAIVE PER MONTH", "USD"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("text lacks %q:\n%s", want, stdout)
		}
	}
	// a2's snapshot was a quilt patch: its share (3 of 4 parts by bytes)
	// of the documented quilt example, 72,040,000 encoded bytes for 5
	// epochs. The naive way still stores one whole-brain blob for it.
	share := walruscost.NewBlob(72_040_000, 5, 69*520_000).Split([]uint64{1_000, 3_000})[1]
	for _, s := range []ledger.Spend{ledger.Snapshot(ledger.NaiveBlobSize(5, 60_000), 5, 1000), ledger.Store(share)} {
		if err := l.Record("a2", s); err != nil {
			t.Fatal(err)
		}
	}
	stdout, stderr, code = runCmd(t, "cost", "-config", cfg, "--json", "a2")
	if code != 0 {
		t.Fatalf("cost --json a2: exit %d: %s", code, stderr)
	}
	rep = ledger.Report{}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if a := rep.Agents[0]; a.Agent != "a2" || a.Recorded.FROST != 26_910_000 || a.Recorded.EncodedBytes != 54_030_000 ||
		a.Hermesd.Spent.Blobs != 0 || a.Hermesd.Spent.Patches != 1 || a.Hermesd.Spent.SuiTransactions != 1.5 ||
		a.Naive.Spent.Blobs != 1 || a.Naive.Spent.WAL != 0.03276 || a.Naive.Spent.SuiTransactions != 2 {
		t.Errorf("a2's quilt share or its naive way: %s", stdout)
	}
	stdout, _, code = runCmd(t, "cost", "-config", cfg, "a2")
	t.Logf("hermesd cost a2:\n%s", stdout)
	if code != 0 || !strings.Contains(stdout, "quilt patches") || !strings.Contains(stdout, "0.0269") {
		t.Errorf("a2: exit %d\n%s", code, stdout)
	}
	// All agents: one line each and the total.
	stdout, _, code = runCmd(t, "cost", "-config", cfg)
	t.Logf("hermesd cost:\n%s", stdout)
	if code != 0 || !strings.Contains(stdout, "TOTAL") || !strings.Contains(stdout, "a2") || !strings.Contains(stdout, "all agents: recorded since") {
		t.Errorf("all agents: exit %d\n%s", code, stdout)
	}
	if _, stderr, code := runCmd(t, "cost", "-config", cfg, "nobody"); code != exitUsage || !strings.Contains(stderr, "no agent") {
		t.Errorf("unknown agent: exit %d: %s", code, stderr)
	}
	// Status, with no daemon answering, shows the spend from the ledgers.
	stdout, _, _ = runCmd(t, "status", "-config", cfg, "--json")
	var st statusReport
	if err := json.Unmarshal([]byte(stdout), &st); err != nil || st.Cost == nil || st.Cost.Total.Recorded.Blobs != 1 {
		t.Errorf("status --json cost: %v %s", err, stdout)
	}
	stdout, _, _ = runCmd(t, "status", "-config", cfg)
	if !strings.Contains(stdout, "Spend (per month") || !strings.Contains(stdout, "TOTAL") {
		t.Errorf("status text lacks the spend:\n%s", stdout)
	}
}

// TestCostHostileLedger: cost, cost --json and status on a ledger holding
// amounts no record makes (a null chain, counts beyond any real one, a fee
// of 400 digits) say in one line what is wrong, never panic, never print
// ±Inf, and leave the file where the daemon moves it aside.
func TestCostHostileLedger(t *testing.T) {
	t.Setenv(config.EnvPath, "")
	for name, book := range map[string]string{
		"null chain in total":   `{"version":1,"agent":"a1","total":{"chains":{"1337":null}}}`,
		"null chain in an hour": `{"version":1,"agent":"a1","since":"2026-11-27T10:00:00Z","total":{},"hours":[{"start":"2026-11-27T10:00:00Z","chains":{"1337":null}}]}`,
		"suiTransactions 1e308": `{"version":1,"agent":"a1","since":"2026-11-27T10:00:00Z","total":{"suiTransactions":1e308}}`,
		"suiTransactions -1e308": `{"version":1,"agent":"a1","since":"2026-11-27T10:00:00Z","total":{"suiTransactions":-1e308},` +
			`"hours":[{"start":"2026-11-27T10:00:00Z","suiTransactions":-1e308}]}`,
		"feeWei 10^400":   `{"version":1,"agent":"a1","since":"2026-11-27T10:00:00Z","total":{"chains":{"1":{"transactions":1,"gas":1,"feeWei":1` + strings.Repeat("0", 400) + `}}}}`,
		"negative feeWei": `{"version":1,"agent":"a1","since":"2026-11-27T10:00:00Z","total":{"chains":{"1":{"transactions":1,"gas":1,"feeWei":-1}}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := filepath.Join(dir, "hermesd.yml")
			body := fmt.Sprintf("state_dir: %s\nhttp:\n  listen: \"\"\nwalrus:\n  publishers: [\"http://127.0.0.1:1\"]\n  aggregators: [\"http://127.0.0.1:1\"]\n"+
				"encryption:\n  key: {file: ./snapshot.key}\ncost:\n  wal_usd: 0.5\n  eth_usd: 3000\n  sui_tx_usd: 0.001\nagents:\n  - id: a1\n    brain_dir: ./a1\n",
				filepath.Join(dir, "state"))
			if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			p := ledger.Path(filepath.Join(dir, "state"), "a1")
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(book), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"cost", "a1"}, {"cost", "--json", "a1"}, {"cost"}} {
				stdout, stderr, code := runCmd(t, append(args, "-config", cfg)...)
				if code != exitFailure || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, p) ||
					!strings.Contains(stderr, "cost.json.bad") || strings.Contains(stdout, "Inf") {
					t.Errorf("%v: exit %d\nstdout %s\nstderr %s", args, code, stdout, stderr)
				}
			}
			stdout, stderr, code := runCmd(t, "status", "--json", "-config", cfg)
			if code != 0 || !strings.Contains(stderr, "spend not shown") || strings.Contains(stdout, "Inf") {
				t.Errorf("status: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
			}
			if b, err := os.ReadFile(p); err != nil || string(b) != book {
				t.Errorf("a reader changed the ledger: %v", err)
			}
		})
	}
}

// TestCostClampedNote: store answers held to Walrus's formula are said in
// cost and status.
func TestCostClampedNote(t *testing.T) {
	t.Setenv(config.EnvPath, "")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hermesd.yml")
	body := fmt.Sprintf("state_dir: %s\nhttp:\n  listen: \"\"\nwalrus:\n  publishers: [\"http://127.0.0.1:1\"]\n  aggregators: [\"http://127.0.0.1:1\"]\n"+
		"encryption:\n  key: {file: ./snapshot.key}\nagents:\n  - id: a1\n    brain_dir: ./a1\n", filepath.Join(dir, "state"))
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	l := ledger.Open(filepath.Join(dir, "state"), ledger.Options{})
	c := walruscost.NewBlob(66_034_000, 5, 32_760_000)
	c.Clamped = true
	if err := l.Record("a1", ledger.Store(c)); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"cost", "a1"}, {"status"}} {
		stdout, stderr, code := runCmd(t, append(args, "-config", cfg)...)
		if code != 0 || !strings.Contains(stdout, "note: 1 Walrus store answer reported more than Walrus's formula allows") {
			t.Errorf("%v: exit %d: %s\n%s", args, code, stderr, stdout)
		}
	}
}

// TestCostNoProjectionFromStartUp: right after start, cost and status do
// not project seconds of records to a month; they say when they will.
func TestCostNoProjectionFromStartUp(t *testing.T) {
	t.Setenv(config.EnvPath, "")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hermesd.yml")
	body := fmt.Sprintf("state_dir: %s\nhttp:\n  listen: \"\"\nwalrus:\n  publishers: [\"http://127.0.0.1:1\"]\n  aggregators: [\"http://127.0.0.1:1\"]\n"+
		"encryption:\n  key: {file: ./snapshot.key}\ncost:\n  wal_usd: 0.5\nagents:\n  - id: auditor\n    brain_dir: ./a1\n", filepath.Join(dir, "state"))
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-2 * time.Second)
	l := ledger.Open(filepath.Join(dir, "state"), ledger.Options{Now: func() time.Time { return since }})
	for _, s := range []ledger.Spend{ledger.Snapshot(ledger.NaiveBlobSize(5, 60_000), 5, 1000), ledger.Store(walruscost.NewBlob(66_034_000, 5, 32_760_000)),
		ledger.Snapshot(ledger.NaiveBlobSize(5, 60_000), 5, 1000), ledger.Store(walruscost.NewBlob(66_034_000, 5, 32_760_000))} {
		if err := l.Record("auditor", s); err != nil {
			t.Fatal(err)
		}
	}
	stdout, stderr, code := runCmd(t, "cost", "-config", cfg, "auditor")
	t.Logf("hermesd cost auditor:\n%s", stdout)
	from := since.Add(ledger.MinWindow).UTC().Format(time.RFC3339)
	if code != 0 || !strings.Contains(stdout, "per day and month from "+from+", once an hour is recorded") ||
		strings.Contains(stdout, "at the rate of the last") || strings.Contains(stdout, "87,660") {
		t.Errorf("cost: exit %d: %s\n%s", code, stderr, stdout)
	}
	for _, l := range strings.Split(stdout, "\n") {
		if f := strings.Fields(l); len(f) == 6 && f[0] == "snapshots" && (f[2] != "-" || f[3] != "-" || f[5] != "-") {
			t.Errorf("a projection shown: %q", l)
		}
	}
	stdout, _, code = runCmd(t, "cost", "-config", cfg, "--json", "auditor")
	var rep ledger.Report
	if err := json.Unmarshal([]byte(stdout), &rep); code != 0 || err != nil || rep.Agents[0].Hermesd.PerMonth != nil ||
		rep.Agents[0].ProjectFrom.UTC().Format(time.RFC3339) != from || strings.Contains(stdout, "perMonth") {
		t.Errorf("cost --json: exit %d, %v: %s", code, err, stdout)
	}
	stdout, _, _ = runCmd(t, "status", "-config", cfg)
	if !strings.Contains(stdout, "-: less than an hour recorded; no rate to project from yet") {
		t.Errorf("status:\n%s", stdout)
	}
}
