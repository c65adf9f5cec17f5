package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/ledger"
	"github.com/hermesd/hermesd/internal/walruscost"
)

// The cost bench on 2 agents for 3 minutes (ticks of 300 ms), with a
// variant that quilts every change, and one renewal: the report's
// invariants hold. Over 100 shards, not mainnet's 1000: a blob id costs
// about a hundredth, so a store fits in a tick. run itself fails when a mode's ledgers differ from
// what the Walrus server answered.
func TestCostFigures(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("this test needs python3 with its sqlite3 module (apt-get install python3): %v", err)
	}
	dir := t.TempDir()
	js := filepath.Join(dir, "out.json")
	var out bytes.Buffer
	err = run(t.Context(), []string{"-dir", filepath.Join(dir, "work"), "-python", python, "-json", js,
		"-agents", "2", "-ticks", "3", "-tick", "300ms", "-b-ticks", "3", "-b-tick", "300ms", "-spread", "false",
		"-variants", "q:snapshot_interval=0s,batch_window=1m", "-renewal-epochs", "3", "-renewal-epoch", "1s", "-shards", "100"}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"(a)", "(b)", "(c)", "(q)", "encoded GB-months", "Sui transactions", "ENS gas (L1)", "renewal of an unchanged brain"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
	data, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var o output
	if err := json.Unmarshal(data, &o); err != nil {
		t.Fatal(err)
	}
	if len(o.Fleets) != 1 || len(o.Fleets[0].Modes) != 3 || len(o.Renewal) != 1 {
		t.Fatalf("%d fleets, modes %v, %d renewals", len(o.Fleets), o.Fleets, len(o.Renewal))
	}
	fl := o.Fleets[0]
	modes := map[string]*figures{}
	for _, f := range fl.Modes {
		modes[f.Key] = f
		if f.Changes != 2*3 {
			t.Errorf("mode %s: %d changes, want 6", f.Key, f.Changes)
		}
		// The ledgers hold what the server answered (run checks it too).
		if f.Ledger.FROST != f.Served.FROST || f.Ledger.EncodedBytes != f.Served.Encoded || f.Served.FROST == 0 {
			t.Errorf("mode %s: ledgers %d FROST, %d encoded; server %d, %d", f.Key, f.Ledger.FROST, f.Ledger.EncodedBytes, f.Served.FROST, f.Served.Encoded)
		}
	}
	// Blobs stored per verified snapshot: quilts share one blob among the
	// agents' packs of a batch; without quilts every snapshot is a blob.
	perSnapshot := func(f *figures) float64 {
		return float64(f.Served.Blobs+f.Served.Quilts) / float64(f.Ledger.Snapshots)
	}
	q, b := modes["q"], modes["b"]
	if perSnapshot(q) >= perSnapshot(b) || perSnapshot(b) < 1 {
		t.Errorf("blobs per snapshot: quilts %.2f (%d blobs, %d quilts, %d snapshots), blobs %.2f", perSnapshot(q),
			q.Served.Blobs, q.Served.Quilts, q.Ledger.Snapshots, perSnapshot(b))
	}
	if q.Served.Quilts == 0 || b.Served.Quilts != 0 || q.Ledger.Patches == 0 || b.Ledger.Patches != 0 {
		t.Errorf("quilts: %d with quilts on (%d patches), %d with quilts off (%d patches)", q.Served.Quilts, q.Ledger.Patches, b.Served.Quilts, b.Ledger.Patches)
	}
	// Per agent-month, blob mode stores one blob per change: its Walrus
	// spend is a blob's charge times the changes in a month.
	if !b.StoresMeasured || b.Blobs < 0.5*minutesPerMonth || b.Blobs > 1.5*minutesPerMonth || b.Patches != 0 {
		t.Errorf("blob mode per month: %v blobs, %v patches (measured %v)", b.Blobs, b.Patches, b.StoresMeasured)
	}
	if q.FROST >= b.FROST {
		t.Errorf("Walrus per month: quilts %v FROST, blobs %v", q.FROST, b.FROST)
	}
	// (c) is Walrus's formula over the brains' sizes: every change's blob
	// lies between the template brain's and that plus the changes made.
	c := fl.Naive
	if fl.Shards != 100 {
		t.Fatalf("devnet of %d shards, want the -shards given", fl.Shards)
	}
	lo := charge(t, ledger.NaiveBlobSize(int(fl.Brain.Files), fl.Brain.Bytes))
	hi := charge(t, ledger.NaiveBlobSize(int(fl.Brain.Files), fl.Brain.Bytes+int64(c.Changes)*8192))
	if perChange := c.FROST / minutesPerMonth; perChange < lo-0.5 || perChange > hi+0.5 {
		t.Errorf("(c) %v FROST per change, want %v..%v", perChange, lo, hi)
	}
	if c.SuiTx != 2*minutesPerMonth || c.Gas != float64(fl.UpdateGas)*minutesPerMonth || fl.UpdateGas < 21_000 {
		t.Errorf("(c) %v Sui transactions, %v gas (update %d) per month", c.SuiTx, c.Gas, fl.UpdateGas)
	}
	// Renewal of an unchanged brain: repacks, each a blob of the whole
	// brain stored again, at most one per epoch (epochs 3, margin 1).
	r := o.Renewal[0].F
	if !r.StoresMeasured || r.Snapshots <= 0 || r.Snapshots > 31 || r.Ledger.FROST != r.Served.FROST {
		t.Errorf("renewal: %v repacks per month (measured %v), ledger %d FROST, server %d", r.Snapshots, r.StoresMeasured, r.Ledger.FROST, r.Served.FROST)
	}
	for _, f := range append(fl.Modes, c, r) {
		for _, v := range []float64{f.FROST, f.EncodedBytes, f.ByteEpochs, f.SuiTx, f.Gas} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Errorf("mode %s: figure %v", f.Key, v)
			}
		}
	}
}

// charge is the FROST of one whole-brain blob of size bytes for the
// reference runtime's 5 epochs at the default price.
func charge(t *testing.T, size uint64) float64 {
	enc, err := walruscost.EncodedLength(size, 100)
	if err != nil {
		t.Fatal(err)
	}
	return float64(walruscost.DefaultPrice.Cost(enc, naiveEpochs))
}
