package ledger

import (
	"encoding/json"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/walruscost"
)

// hostileBooks are cost.json files that parse but hold amounts no record
// makes: each must be refused at load, like any other corruption.
var hostileBooks = map[string]string{
	"null chain in total":      `{"version":1,"agent":"a","total":{"chains":{"1337":null}}}`,
	"null chain in an hour":    `{"version":1,"agent":"a","total":{},"hours":[{"start":"2026-11-27T10:00:00Z","chains":{"1337":null}}]}`,
	"huge suiTransactions":     `{"version":1,"agent":"a","total":{"suiTransactions":1e308}}`,
	"negative suiTransactions": `{"version":1,"agent":"a","total":{"suiTransactions":-1e308}}`,
	"hour suiTransactions":     `{"version":1,"agent":"a","total":{},"hours":[{"start":"2026-11-27T10:00:00Z","suiTransactions":1e300}]}`,
	"huge transactions":        `{"version":1,"agent":"a","total":{"chains":{"1":{"transactions":1e308,"gas":1,"feeWei":1}}}}`,
	"negative transactions":    `{"version":1,"agent":"a","total":{"chains":{"1":{"transactions":-1,"gas":1,"feeWei":1}}}}`,
	"feeWei 10^400":            `{"version":1,"agent":"a","total":{"chains":{"1":{"transactions":1,"gas":1,"feeWei":1` + strings.Repeat("0", 400) + `}}}}`,
	"negative feeWei":          `{"version":1,"agent":"a","total":{"chains":{"1":{"transactions":1,"gas":1,"feeWei":-5}}}}`,
}

func writeBook(t *testing.T, dir, agent, content string) {
	t.Helper()
	p := Path(dir, agent)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestHostileLedgers: a ledger holding amounts no record makes is refused
// at load (never a panic, never ±Inf in a report), moved aside once, and
// the account starts again.
func TestHostileLedgers(t *testing.T) {
	for name, content := range hostileBooks {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeBook(t, dir, "a", content)
			if _, err := Load(dir, "a"); err == nil {
				t.Fatal("loaded")
			} else if len(err.Error()) > 300 {
				t.Errorf("error of %d bytes: %.300s…", len(err.Error()), err)
			}
			l := Open(dir, Options{})
			// What /metrics and /v1/status read.
			if tot := l.Total("a"); tot.SuiTx != 0 || len(tot.Chains) != 0 {
				t.Errorf("total after refusal: %+v", tot)
			}
			rep := NewReport([]Book{l.Book("a")}, Prices{WALUSD: 1, ETHUSD: 1, SuiTxUSD: 1}, t0)
			if _, err := json.Marshal(rep); err != nil {
				t.Errorf("report: %v", err)
			}
			if b, err := os.ReadFile(Path(dir, "a") + ".bad"); err != nil || string(b) != content {
				t.Errorf("not moved aside: %v", err)
			}
			if _, err := os.Stat(Path(dir, "a")); !os.IsNotExist(err) {
				t.Errorf("cost.json still there: %v", err)
			}
			// Counting goes on from zero; the next process reads the
			// new file and moves nothing aside again.
			if err := l.Record("a", Tx(1, 10, big.NewInt(3), 1)); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(Path(dir, "a")+".bad", []byte("kept"), 0o600); err != nil {
				t.Fatal(err)
			}
			l2 := Open(dir, Options{})
			if c := l2.Total("a").Chains[1]; c == nil || c.FeeWei.Int64() != 30 {
				t.Errorf("after restart: %+v", l2.Total("a"))
			}
			if b, _ := os.ReadFile(Path(dir, "a") + ".bad"); string(b) != "kept" {
				t.Errorf("moved aside again: %q", b)
			}
		})
	}
}

// TestAddSaturates: whatever a caller records (a receipt's gas price comes
// from an RPC), the sums stay within what a ledger loads.
func TestAddSaturates(t *testing.T) {
	var s Spend
	huge := new(big.Int).Lsh(big.NewInt(1), 255)
	for range 3 {
		s.Add(Tx(1, math.MaxUint64, huge, maxCount))
		s.Add(Spend{SuiTx: maxCount})
	}
	s.Add(Spend{SuiTx: math.NaN(), Chains: map[uint64]*Chain{1: {Transactions: math.Inf(1), FeeWei: big.NewInt(-1)}, 2: nil}})
	s.Add(Spend{SuiTx: -5})
	if err := s.check(); err != nil {
		t.Fatalf("saturated sums refused: %v", err)
	}
	if c := s.Chains[1]; c.FeeWei.Cmp(maxFeeWei) != 0 || c.Transactions != maxCount || c.Gas != math.MaxUint64 || s.SuiTx != maxCount {
		t.Errorf("not saturated: %+v %+v", s, c)
	}
	if _, ok := s.Chains[2]; ok {
		t.Error("a nil chain was added")
	}
	if _, err := json.Marshal(NewReport([]Book{{Version: Version, Agent: "a", Since: t0, Total: s, Hours: []Hour{{Start: t0, Spend: s}}}},
		Prices{WALUSD: 1e6, ETHUSD: 1e6, SuiTxUSD: 1e6}, t0.Add(1))); err != nil {
		t.Errorf("report of saturated sums: %v", err)
	}
}

// FuzzLoad: whatever cost.json holds, Load (parse) refuses it or returns a book
// that reports in finite numbers, takes more records, and writes back as
// the same book.
func FuzzLoad(f *testing.F) {
	for _, c := range hostileBooks {
		f.Add([]byte(c))
	}
	good := Open(f.TempDir(), Options{Now: func() time.Time { return t0 }})
	good.Record("a", Store(walruscost.NewBlob(66_034_000, 5, 7_560_000)))
	good.Record("a", Tx(1, 47_819, big.NewInt(2e9), 0.5))
	good.Record("a", Snapshot(NaiveBlobSize(3, 1000), 5, 1000))
	b, _ := json.Marshal(good.Book("a"))
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFile {
			return
		}
		b, err := parse(data, "a")
		if err != nil {
			return
		}
		for _, now := range []time.Time{t0, t0.Add(time.Second), t0.Add(1000 * time.Hour)} {
			rep := NewReport([]Book{b, b}, Prices{WALUSD: 1e3, ETHUSD: 1e5, SuiTxUSD: 1}, now)
			if _, err := json.Marshal(rep); err != nil {
				t.Fatalf("report of a loaded book: %v", err)
			}
		}
		out, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parse(out, "a"); err != nil {
			t.Fatalf("a loaded book written back is refused: %v", err)
		}
		c := b.Clone()
		c.add(b.Total, t0)
		if err := c.Total.check(); err != nil {
			t.Fatalf("a loaded book plus itself: %v", err)
		}
	})
}

// TestClampedCounted: a charge held to Walrus's formula is counted, per
// share of a quilt too, and survives a restart.
func TestClampedCounted(t *testing.T) {
	dir := t.TempDir()
	l := Open(dir, Options{})
	c := walruscost.NewBlob(66_034_000, 5, 1)
	c.Clamped = true
	for _, s := range append([]walruscost.Charge{c}, c.Split([]uint64{1, 2})...) {
		if err := l.Record("a", Store(s)); err != nil {
			t.Fatal(err)
		}
	}
	l.Record("a", Store(walruscost.NewBlob(66_034_000, 5, 1)))
	b, err := Load(dir, "a")
	if err != nil || b.Total.Clamped != 3 || b.Hours[0].Clamped != 3 {
		t.Errorf("clamped %+v, %v", b.Total, err)
	}
}

// TestNoProjectionFromStartUp: seconds of records (a daemon's start-up,
// every agent's first snapshot a whole brain) are projected to nothing;
// the report says when projections begin, and they do at MinWindow.
func TestNoProjectionFromStartUp(t *testing.T) {
	clk := &clock{t: t0}
	l := Open(t.TempDir(), Options{Now: clk.Now})
	for _, s := range []Spend{Snapshot(NaiveBlobSize(3, 1000), 5, 1000), Store(walruscost.NewBlob(66_034_000, 5, 7_560_000))} {
		l.Record("a", s)
		clk.add(time.Second)
	}
	for _, tc := range []struct {
		at      time.Duration
		project bool
	}{{2 * time.Second, false}, {MinWindow - time.Second, false}, {MinWindow, true}, {23 * time.Hour, true}} {
		r := NewReport([]Book{l.Book("a")}, Prices{WALUSD: 1}, t0.Add(tc.at))
		for _, a := range []AgentReport{r.Agents[0], r.Total} {
			projected := a.Hermesd.PerDay != nil && a.Hermesd.PerMonth != nil && a.Naive.PerDay != nil && a.Naive.PerMonth != nil
			if projected != tc.project {
				t.Errorf("after %v: projected %v, want %v (project from %v)", tc.at, projected, tc.project, a.ProjectFrom)
			}
			if !tc.project && !a.ProjectFrom.Equal(t0.Add(MinWindow)) {
				t.Errorf("after %v: projections from %v, want %v", tc.at, a.ProjectFrom, t0.Add(MinWindow))
			}
			if tc.project && (!a.ProjectFrom.IsZero() || a.Hermesd.PerMonth.Snapshots <= 0) {
				t.Errorf("after %v: %+v", tc.at, a)
			}
		}
		if b, err := json.Marshal(r); err != nil || strings.Contains(string(b), `"perMonth"`) != tc.project {
			t.Errorf("after %v: JSON %v %s", tc.at, err, b)
		}
	}
	// Nothing recorded: nothing to project, no date to give.
	if a := NewReport([]Book{{Version: Version, Agent: "b"}}, Prices{}, t0).Agents[0]; a.Hermesd.PerDay != nil || !a.ProjectFrom.IsZero() {
		t.Errorf("empty book: %+v", a)
	}
}
