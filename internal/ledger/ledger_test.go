package ledger

import (
	"encoding/json"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/walruscost"
)

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var t0 = time.Date(2026, 11, 27, 10, 30, 0, 0, time.UTC)

func gwei(n int64) *big.Int { return new(big.Int).Mul(big.NewInt(n), big.NewInt(1e9)) }

func TestRecordPersistsAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	clk := &clock{t: t0}
	l := Open(dir, Options{Now: clk.Now})
	blob := walruscost.NewBlob(66_034_000, 5, 7_560_000)
	for _, s := range []Spend{
		Store(blob), Store(walruscost.Charge{}), Snapshot(NaiveBlobSize(3, 1000), 5, 1000),
		Tx(1, 47_819, gwei(2), 1),
	} {
		if err := l.Record("auditor", s); err != nil {
			t.Fatal(err)
		}
	}
	clk.add(time.Hour)
	if err := l.Record("auditor", Tx(8453, 30_000, big.NewInt(1_000_000), 0.5)); err != nil {
		t.Fatal(err)
	}
	want := l.Book("auditor")

	// A new process (the daemon restarted) reads what was recorded.
	got, err := Load(dir, "auditor")
	if err != nil {
		t.Fatal(err)
	}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) {
		t.Fatalf("reloaded %s\nwant %s", gj, wj)
	}
	tot := got.Total
	if tot.Snapshots != 1 || tot.Blobs != 1 || tot.Reused != 1 || tot.FROST != 7_560_000 || tot.SuiTx != 2 ||
		tot.EncodedBytes != 66_034_000 || tot.EncodedByteEpochs != 5*66_034_000 {
		t.Errorf("walrus totals %+v", tot)
	}
	if c := tot.Chains[1]; c == nil || c.Gas != 47_819 || c.FeeWei.Cmp(new(big.Int).Mul(big.NewInt(47_819), gwei(2))) != 0 || c.Transactions != 1 {
		t.Errorf("L1 gas %+v", c)
	}
	if c := tot.Chains[8453]; c == nil || c.Gas != 30_000 || c.FeeWei.Int64() != 30_000*1_000_000 || c.Transactions != 0.5 {
		t.Errorf("L2 gas %+v", c)
	}
	if n := tot.Naive; n.EncodedBytes != 66_034_000 || n.Units != 63 || n.UnitEpochs != 315 || n.EncodedByteEpochs != 5*66_034_000 {
		t.Errorf("naive %+v", n)
	}
	if len(got.Hours) != 2 || !got.Since.Equal(t0) {
		t.Errorf("hours %d, since %v", len(got.Hours), got.Since)
	}
	// The reopened ledger goes on from there.
	l2 := Open(dir, Options{Now: clk.Now})
	if err := l2.Record("auditor", Store(blob)); err != nil {
		t.Fatal(err)
	}
	if b := l2.Book("auditor"); b.Total.Blobs != 2 || b.Total.FROST != 2*7_560_000 {
		t.Errorf("after restart: %+v", b.Total)
	}
	if fi, err := os.Stat(Path(dir, "auditor")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode: %v %v", fi, err)
	}
}

func TestRecentWindowAndBound(t *testing.T) {
	clk := &clock{t: t0}
	l := Open(t.TempDir(), Options{Now: clk.Now})
	// One blob an hour for two days.
	for i := 0; i < 48; i++ {
		if err := l.Record("a", Store(walruscost.NewBlob(1, 1, 100))); err != nil {
			t.Fatal(err)
		}
		clk.add(time.Hour)
	}
	b := l.Book("a")
	if len(b.Hours) != KeepHours {
		t.Fatalf("%d hours kept, want %d", len(b.Hours), KeepHours)
	}
	now := clk.Now() // 10:30 two days on; the last record was at 09:30
	s, win := b.Recent(now)
	// The window: 11:00 the day before to 10:30: 23 h 30 min, holding the
	// records of 11:30 … 09:30, 23 of them.
	if win != 23*time.Hour+30*time.Minute || s.Blobs != 23 {
		t.Errorf("recent: %d blobs over %v; want 23 over 23h30m", s.Blobs, win)
	}
	if b.Total.Blobs != 48 {
		t.Errorf("total %d, want 48", b.Total.Blobs)
	}
	r := NewReport([]Book{b}, Prices{}, now)
	perDay := r.Agents[0].Hermesd.PerDay.Blobs
	if math.Abs(perDay-23*24/23.5) > 1e-9 {
		t.Errorf("per day %v, want %v", perDay, 23*24/23.5)
	}
	if pm := r.Agents[0].Hermesd.PerMonth.Blobs; math.Abs(pm-perDay*DaysPerMonth) > 1e-9 {
		t.Errorf("per month %v", pm)
	}

	// A young book projects from its own age.
	clk2 := &clock{t: t0}
	l2 := Open(t.TempDir(), Options{Now: clk2.Now})
	l2.Record("b", Store(walruscost.NewBlob(1, 1, 100)))
	clk2.add(30 * time.Minute)
	l2.Record("b", Store(walruscost.NewBlob(1, 1, 100)))
	clk2.add(30 * time.Minute)
	_, win = l2.Book("b").Recent(clk2.Now())
	if win != time.Hour {
		t.Errorf("young book's window %v, want 1h", win)
	}
	r = NewReport([]Book{l2.Book("b")}, Prices{}, clk2.Now())
	if r.Agents[0].Hermesd.PerDay.Blobs != 48 {
		t.Errorf("2 blobs in an hour: %v a day, want 48", r.Agents[0].Hermesd.PerDay.Blobs)
	}
}

func TestReportPrices(t *testing.T) {
	clk := &clock{t: t0}
	l := Open(t.TempDir(), Options{Now: clk.Now})
	// Two snapshots of a 1 MB brain; the first a blob, the second a patch
	// of a quilt; one pointer write at 1 gwei.
	l.Record("a", Snapshot(1_000_000, 5, 1000))
	l.Record("a", Store(walruscost.NewBlob(66_034_000, 5, 63*520_000)))
	l.Record("a", Snapshot(1_000_000, 5, 1000))
	l.Record("a", Store(walruscost.NewBlob(72_040_000, 5, 69*520_000).Split([]uint64{1, 3})[0]))
	l.Record("a", Tx(1, 47_819, gwei(1), 1))
	clk.add(time.Hour)
	p := Prices{Walrus: walruscost.DefaultPrice, WALUSD: 0.5, ETHUSD: 3000}
	r := NewReport([]Book{l.Book("a")}, p, clk.Now())
	a := r.Agents[0]
	sp := a.Hermesd.Spent
	wantWAL := float64(63*520_000+69*520_000/4) / 1e9
	if sp.Blobs != 1 || sp.Patches != 1 || math.Abs(sp.WAL-wantWAL) > 1e-12 || sp.SuiTransactions != 2.5 {
		t.Errorf("spent %+v, want 1 blob, 1 patch, %v WAL, 2.5 Sui tx", sp, wantWAL)
	}
	if len(sp.Chains) != 1 || *sp.Chains[0].ETH != 47_819e-9 {
		t.Errorf("gas %+v", sp.Chains)
	}
	if sp.USD == nil || sp.USD.Complete || sp.USD.Sui != nil || math.Abs(sp.USD.Total-(wantWAL*0.5+47_819e-9*3000)) > 1e-9 {
		t.Errorf("usd %+v", sp.USD)
	}
	// The naive way: two whole-brain blobs (1 MB: symbols of 6 bytes,
	// 70,038,000 encoded, 67 units) for 5 epochs, 4 Sui transactions, two
	// L1 updates at the recorded 1 gwei.
	nv := a.Naive.Spent
	if nv.Blobs != 2 || nv.EncodedBytes != 2*70_038_000 || nv.SuiTransactions != 4 ||
		math.Abs(nv.WAL-2*67*520_000/1e9) > 1e-12 {
		t.Errorf("naive %+v", nv)
	}
	if len(nv.Chains) != 1 || nv.Chains[0].ChainID != 1 || nv.Chains[0].Gas != 2*NaiveWriteGas ||
		nv.Chains[0].ETH == nil || math.Abs(*nv.Chains[0].ETH-2*NaiveWriteGas*1e-9) > 1e-15 {
		t.Errorf("naive gas %+v", nv.Chains)
	}
	// Without USD prices no USD figure.
	if r := NewReport([]Book{l.Book("a")}, Prices{Walrus: walruscost.DefaultPrice}, clk.Now()); r.Agents[0].Hermesd.Spent.USD != nil {
		t.Error("USD shown without prices")
	}
	// The total of several books.
	l.Record("b", Store(walruscost.NewBlob(72_040_000, 5, 69*520_000).Split([]uint64{1, 3})[1]))
	r = NewReport([]Book{l.Book("a"), l.Book("b")}, p, clk.Now())
	if r.Total.Hermesd.Spent.Patches != 2 || r.Total.Recorded.FROST != 63*520_000+69*520_000 {
		t.Errorf("total %+v", r.Total.Recorded)
	}
}

func TestUnreadableLedgers(t *testing.T) {
	dir := t.TempDir()
	write := func(agent, content string) {
		t.Helper()
		p := Path(dir, agent)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("corrupt", `{"version":1,"agent":"corrupt","total":{`)
	write("newer", `{"version":2,"agent":"newer","total":{"blobs":7}}`)
	write("other", `{"version":1,"agent":"someone-else","total":{"blobs":7}}`)
	l := Open(dir, Options{})
	for _, a := range []string{"corrupt", "newer", "other"} {
		if _, err := Load(dir, a); err == nil {
			t.Errorf("%s: loaded", a)
		}
		if err := l.Record(a, Store(walruscost.NewBlob(1, 1, 1))); err != nil {
			t.Errorf("%s: %v", a, err)
		}
		if b := l.Book(a); b.Total.Blobs != 1 {
			t.Errorf("%s: %d blobs counted, want 1", a, b.Total.Blobs)
		}
	}
	// The corrupt file is kept aside; the newer one is left alone.
	if b, err := os.ReadFile(Path(dir, "corrupt") + ".bad"); err != nil || string(b) != `{"version":1,"agent":"corrupt","total":{` {
		t.Errorf("corrupt ledger not kept: %q %v", b, err)
	}
	if b, err := os.ReadFile(Path(dir, "newer")); err != nil || string(b) != `{"version":2,"agent":"newer","total":{"blobs":7}}` {
		t.Errorf("newer ledger overwritten: %q %v", b, err)
	}
	// A symbolic link planted at the ledger's name is not followed.
	target := filepath.Join(dir, "elsewhere.json")
	os.WriteFile(target, []byte(`{"version":1,"agent":"linked"}`), 0o600)
	os.MkdirAll(filepath.Dir(Path(dir, "linked")), 0o700)
	if err := os.Symlink(target, Path(dir, "linked")); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, "linked"); err == nil {
		t.Error("a symlinked ledger was read")
	}
	// Too big.
	write("big", `{"version":1,"agent":"big","x":"`+string(make([]byte, maxFile))+`"}`)
	if _, err := Load(dir, "big"); err == nil {
		t.Error("an oversized ledger was read")
	}
}

func TestConcurrentRecords(t *testing.T) {
	l := Open(t.TempDir(), Options{})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				if err := l.Record([]string{"a", "b"}[g%2], Store(walruscost.NewBlob(10, 2, 3))); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	for _, a := range []string{"a", "b"} {
		b, err := Load(l.Dir(), a)
		if err != nil {
			t.Fatal(err)
		}
		if b.Total.Blobs != 100 || b.Total.FROST != 300 || b.Total.EncodedByteEpochs != 2000 {
			t.Errorf("%s: %+v", a, b.Total)
		}
	}
}

func TestChainBound(t *testing.T) {
	l := Open(t.TempDir(), Options{})
	for id := uint64(1); id <= maxChains; id++ {
		if err := l.Record("a", Tx(id, 1, big.NewInt(1), 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Record("a", Tx(maxChains+1, 1, big.NewInt(1), 1)); err == nil {
		t.Error("a 17th chain recorded")
	}
	if b, err := Load(l.Dir(), "a"); err != nil || len(b.Total.Chains) != maxChains {
		t.Errorf("%d chains, %v", len(b.Total.Chains), err)
	}
}
