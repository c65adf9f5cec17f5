package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hermesd/hermesd/internal/ledger"
	"github.com/hermesd/hermesd/internal/walruscost"
)

// Time in the figures: a month is 30.44 days (ledger.DaysPerMonth), and a
// mainnet epoch two weeks, which turns encoded bytes × epochs into
// GB-months.
const (
	minutesPerMonth = ledger.DaysPerMonth * 24 * 60
	epochDays       = 14.0
	// naiveEpochs is what the reference runtime stores every blob for
	// (WALRUS_EPOCHS, default 5).
	naiveEpochs = 5
)

// prices are the assumed market prices the figures are shown at.
type prices struct{ walUSD, gwei, ethUSD float64 }

// figures are one mode's costs per agent-month.
type figures struct {
	Key, Label, Settings string
	Agents, Ticks        int
	Tick                 time.Duration
	// Per agent-month.
	Snapshots, Blobs, Patches float64
	EncodedBytes, ByteEpochs  float64
	FROST, SuiTx              float64
	PointerTx, Gas            float64
	// How they were measured (rates): agents with a period measured, the
	// mean count of spends within the ticks; not Measured: no agent had
	// a period within them.
	StoreAgents, GasAgents      int
	StoreEvents, GasEvents      float64
	StoresMeasured, GasMeasured bool
	// Changes made during the ticks, and verified snapshots over them.
	Changes            int
	SnapshotsPerChange float64
	// Recovery point, in real minutes, over every agent and sample: how
	// old the newest verified snapshot was (durable) and how old the one
	// the ENS pointer named (pointer).
	DurableMean, DurableMax float64
	PointerMean, PointerMax float64
	// The whole run's ledgers against the Walrus server's answers.
	Ledger       ledger.Spend
	Served, Lost served
	Setup        time.Duration
	Took         time.Duration
}

func (f *figures) gbMonths() float64 { return f.ByteEpochs * epochDays / ledger.DaysPerMonth / 1e9 }
func (f *figures) wal() float64      { return f.FROST / walruscost.FROSTPerWAL }
func (f *figures) walrusUSD(p prices) float64 {
	return f.wal() * p.walUSD
}
func (f *figures) gasUSD(p prices) float64 { return f.Gas * p.gwei * 1e-9 * p.ethUSD }

// component reads a kind of spend: Key changes with every spend of the
// kind; Fields are what is measured.
type component struct {
	key    func(ledger.Spend) float64
	fields []func(ledger.Spend) float64
}

func gasOf(s ledger.Spend) (gas, tx float64) {
	for _, c := range s.Chains {
		gas += float64(c.Gas)
		tx += c.Transactions
	}
	return gas, tx
}

var (
	stores = component{
		key: func(s ledger.Spend) float64 { return float64(s.FROST) },
		fields: []func(ledger.Spend) float64{
			func(s ledger.Spend) float64 { return float64(s.Blobs) },
			func(s ledger.Spend) float64 { return float64(s.Patches) },
			func(s ledger.Spend) float64 { return float64(s.EncodedBytes) },
			func(s ledger.Spend) float64 { return float64(s.EncodedByteEpochs) },
			func(s ledger.Spend) float64 { return float64(s.FROST) },
			func(s ledger.Spend) float64 { return s.SuiTx },
		},
	}
	pointers = component{
		key: func(s ledger.Spend) float64 { g, _ := gasOf(s); return g },
		fields: []func(ledger.Spend) float64{
			func(s ledger.Spend) float64 { _, t := gasOf(s); return t },
			func(s ledger.Spend) float64 { g, _ := gasOf(s); return g },
		},
	}
	snapshots = component{
		key:    func(s ledger.Spend) float64 { return float64(s.Snapshots) },
		fields: []func(ledger.Spend) float64{func(s ledger.Spend) float64 { return float64(s.Snapshots) }},
	}
)

// rates measures c per agent-month, averaged over the agents: for each
// agent, what was recorded after one spend of the kind up to a later one,
// over the time between them — whole periods of the agent's own rhythm,
// whatever the phase at which the ticks began. Within the ticks that is
// from its first spend to its last; with only one spend there, from the
// agent's last spend of the kind before the ticks (anchor: its first
// snapshot's store, its first pointer transaction; nothing is recorded
// between that and the first sample), provided the agent's first change
// came within interval (its snapshot_interval, pointer_interval, in bench
// time) of it, so that the anchor began a period of its rhythm. A spend is placed halfway between
// the sample before it and the sample that shows it. Agents with no
// period measured are left out; with none measured at all, measured is
// false.
func rates(r *result, c component, anchor func(anchors) time.Time, interval time.Duration) (per []float64, agents int, events float64, measured bool) {
	per = make([]float64, len(c.fields))
	s := r.Samples
	if len(s) < 2 {
		return per, 0, 0, false
	}
	month := func(d time.Duration) float64 { return minutesPerMonth / (float64(d) / float64(r.Tick)) }
	at := func(k int) time.Time { return s[k-1].At.Add(s[k].At.Sub(s[k-1].At) / 2) }
	var allEvents int
	for i := range r.Agents {
		var ev []int
		for k := 1; k < len(s); k++ {
			if c.key(s[k].Spend[i]) != c.key(s[k-1].Spend[i]) {
				ev = append(ev, k)
			}
		}
		allEvents += len(ev)
		var from, to int
		var span time.Duration
		a := anchor(r.Anchors[i])
		if len(r.Changed[i]) == 0 || a.IsZero() || r.Changed[i][0].After(a.Add(interval)) {
			// The agent's rhythm began with its first change, not at
			// the anchor (no interval, or it had passed before the
			// agents began changing): the anchor starts no period.
			a = time.Time{}
		}
		switch {
		case len(ev) >= 2:
			from, to = ev[0], ev[len(ev)-1]
			span = at(to).Sub(at(from))
		case len(ev) == 1 && !a.IsZero():
			from, to = 0, ev[0]
			span = at(to).Sub(a)
		default:
			continue
		}
		if span <= 0 {
			continue
		}
		k := month(span)
		for j, fl := range c.fields {
			per[j] += (fl(s[to].Spend[i]) - fl(s[from].Spend[i])) * k
		}
		agents++
	}
	if agents == 0 {
		return per, 0, float64(allEvents) / float64(r.Agents), false
	}
	for j := range per {
		per[j] /= float64(agents)
	}
	return per, agents, float64(allEvents) / float64(r.Agents), true
}

// measure turns a mode run into per agent-month figures.
func measure(r *result) *figures {
	f := &figures{Key: r.Mode.Key, Label: r.Mode.Label, Settings: r.Mode.settings(), Agents: r.Agents,
		Ticks: r.Ticks, Tick: r.Tick, Changes: r.Changes, Ledger: r.Ledger, Served: r.Served, Lost: r.Lost, Setup: r.Setup, Took: r.Took}
	sc := scale{r.Tick}
	st, n, ev, ok := rates(r, stores, func(a anchors) time.Time { return a.Store }, sc.of(r.Mode.SnapshotInterval))
	f.Blobs, f.Patches, f.EncodedBytes, f.ByteEpochs, f.FROST, f.SuiTx = st[0], st[1], st[2], st[3], st[4], st[5]
	f.StoreAgents, f.StoreEvents, f.StoresMeasured = n, ev, ok
	pt, n, ev, ok := rates(r, pointers, func(a anchors) time.Time { return a.Pointer }, sc.of(r.Mode.PointerInterval))
	f.PointerTx, f.Gas = pt[0], pt[1]
	f.GasAgents, f.GasEvents, f.GasMeasured = n, ev, ok
	sn, _, _, _ := rates(r, snapshots, func(a anchors) time.Time { return a.Store }, sc.of(r.Mode.SnapshotInterval))
	f.Snapshots = sn[0]
	if s := r.Samples; len(s) > 0 && r.Changes > 0 {
		var made float64
		for i := range r.Agents {
			made += float64(s[len(s)-1].Spend[i].Snapshots - s[0].Spend[i].Snapshots)
		}
		f.SnapshotsPerChange = made / float64(r.Changes)
	}
	f.DurableMean, f.DurableMax, f.PointerMean, f.PointerMax = recoveryPoints(r)
	return f
}

// recoveryPoints are, over every agent and sample, how long the oldest
// change not in the newest verified snapshot had been waiting (durable),
// and the oldest change not in the snapshot the ENS pointer named
// (pointer), in real minutes: what a restore at that moment would lose.
// A snapshot holds the changes made before it began (its CreatedAt).
func recoveryPoints(r *result) (durMean, durMax, ptrMean, ptrMax float64) {
	created := map[string]time.Time{}
	for _, s := range r.Samples {
		for _, a := range s.Status {
			if a.Last != "" {
				created[a.Last] = a.LastAt
			}
		}
	}
	// lag is how long the first change after since has waited at t (0
	// when there is none).
	lag := func(i int, since, t time.Time) float64 {
		ch := r.Changed[i]
		k, _ := slices.BinarySearchFunc(ch, since, func(c, s time.Time) int { return c.Compare(s) })
		if k == len(ch) || ch[k].After(t) {
			return 0
		}
		return float64(t.Sub(ch[k])) / float64(r.Tick)
	}
	var dn, pn int
	for _, s := range r.Samples {
		for i, a := range s.Status {
			if i >= len(r.Changed) || len(r.Changed[i]) == 0 || s.At.Before(r.Changed[i][0]) {
				continue // not changing yet: nothing to lose
			}
			if a.Last != "" {
				m := lag(i, a.LastAt, s.At)
				durMean += m
				durMax = max(durMax, m)
				dn++
			}
			if at, ok := created[a.Published]; ok {
				m := lag(i, at, s.At)
				ptrMean += m
				ptrMax = max(ptrMax, m)
				pn++
			}
		}
	}
	if dn > 0 {
		durMean /= float64(dn)
	}
	if pn > 0 {
		ptrMean /= float64(pn)
	}
	return durMean, durMax, ptrMean, ptrMax
}

// naiveFigures is the reference runtime's way per agent-month: for every
// change one blob of the whole brain (sizes: what it held at each change
// of the run), stored for naiveEpochs, and one L1 update of updateGas.
func naiveFigures(sizes []uint64, updateGas uint64, price walruscost.Price, shards int) *figures {
	f := &figures{Key: "c", Label: "the reference runtime's way (one whole-brain blob for 5 epochs and one L1 setText per change)"}
	if len(sizes) == 0 {
		return f
	}
	var enc, frost float64
	for _, s := range sizes {
		e, c, err := naiveCharge(s, naiveEpochs, price, shards)
		if err != nil {
			return f
		}
		enc += float64(e)
		frost += float64(c)
	}
	k := minutesPerMonth / float64(len(sizes)) // one change a minute
	f.Snapshots, f.Blobs, f.PointerTx = minutesPerMonth, minutesPerMonth, minutesPerMonth
	f.EncodedBytes, f.ByteEpochs, f.FROST = enc*k, enc*naiveEpochs*k, frost*k
	f.SuiTx = walruscost.SuiTxPerBlob * minutesPerMonth
	f.Gas = float64(updateGas) * minutesPerMonth
	f.Changes = len(sizes)
	f.SnapshotsPerChange = 1
	f.StoresMeasured, f.GasMeasured = true, true
	return f
}

func report(out io.Writer, t *tierResult, p prices) {
	fmt.Fprintf(out, "\nper agent-month, %d agent(s), each changing ~4 KiB once a minute (brain: %d files, %.2f MiB at the start)\n",
		t.Agents, t.Brain.Files, float64(t.Brain.Bytes)/(1<<20))
	cols := append(slices.Clone(t.Modes), t.Naive)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	row := func(name string, v func(f *figures) string) {
		fmt.Fprint(tw, name, "\t")
		for _, f := range cols {
			fmt.Fprint(tw, v(f), "\t")
		}
		fmt.Fprintln(tw)
	}
	store := func(v func(f *figures) string) func(f *figures) string {
		return func(f *figures) string {
			if !f.StoresMeasured {
				return "-"
			}
			return v(f)
		}
	}
	gas := func(v func(f *figures) string) func(f *figures) string {
		return func(f *figures) string {
			if !f.GasMeasured {
				return "-"
			}
			return v(f)
		}
	}
	row("", func(f *figures) string { return "(" + f.Key + ")" })
	row("snapshots stored", store(func(f *figures) string { return num(f.Snapshots) }))
	row("Walrus blobs", store(func(f *figures) string { return num(f.Blobs) }))
	row("quilt patches", store(func(f *figures) string { return num(f.Patches) }))
	row("encoded GB-months", store(func(f *figures) string { return num(f.gbMonths()) }))
	row("Walrus storage, WAL", store(func(f *figures) string { return num(f.wal()) }))
	row("Walrus storage, USD", store(func(f *figures) string { return "$" + num(f.walrusUSD(p)) }))
	row("Sui transactions", store(func(f *figures) string { return num(f.SuiTx) }))
	row("pointer transactions", gas(func(f *figures) string { return num(f.PointerTx) }))
	row("ENS gas (L1)", gas(func(f *figures) string { return num(f.Gas) }))
	row("ENS gas, USD", gas(func(f *figures) string { return "$" + num(f.gasUSD(p)) }))
	row("total, USD", store(gas(func(f *figures) string { return "$" + num(f.walrusUSD(p)+f.gasUSD(p)) })))
	rp := func(mean, most func(f *figures) float64) func(f *figures) string {
		return func(f *figures) string {
			if f.Key == "c" {
				return "-"
			}
			return fmt.Sprintf("%.1f/%.1f", mean(f), most(f))
		}
	}
	row("recovery point, snapshot (mean/max min)", rp(func(f *figures) float64 { return f.DurableMean }, func(f *figures) float64 { return f.DurableMax }))
	row("recovery point, pointer (mean/max min)", rp(func(f *figures) float64 { return f.PointerMean }, func(f *figures) float64 { return f.PointerMax }))
	tw.Flush()
	for _, f := range cols {
		fmt.Fprintf(out, "  (%s) %s", f.Key, f.Label)
		if f.Key != "c" {
			fmt.Fprintf(out, ": %s", f.Settings)
		}
		fmt.Fprintln(out)
	}
	for _, f := range t.Modes {
		fmt.Fprintf(out, "  (%s) measured over %d minutes of %v after every first snapshot was published (%v; run %v): %d changes, %.2f verified snapshots per change; "+
			"stores %.1f and pointer transactions %.1f per agent; ledgers %s FROST, %s encoded bytes = the server's answers (%s)",
			f.Key, f.Ticks, f.Tick, f.Setup.Round(time.Second), f.Took.Round(time.Second), f.Changes, f.SnapshotsPerChange,
			f.StoreEvents, f.GasEvents, num(float64(f.Ledger.FROST)), num(float64(f.Ledger.EncodedBytes)), f.Served)
		if f.Lost != (served{}) {
			fmt.Fprintf(out, "; stopping the daemon left %s answered but unread", f.Lost)
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "  (c) Walrus's formula at %d + %d FROST per MiB (epoch, write) over the brains' sizes at the %d changes of the runs; one L1 setText update: %d gas, measured\n",
		walruscost.DefaultPrice.Storage, walruscost.DefaultPrice.Write, t.Naive.Changes, t.UpdateGas)
	if len(t.Modes) >= 2 {
		a, b := t.Modes[0], t.Modes[1]
		fmt.Fprintf(out, "  (b)/(a): Walrus storage %s cheaper, %s fewer Sui transactions; (c)/(a): %s, %s\n",
			ratio(b.FROST, a.FROST), ratio(b.SuiTx, a.SuiTx), ratio(t.Naive.FROST, a.FROST), ratio(t.Naive.SuiTx, a.SuiTx))
	}
}

func summary(out io.Writer, all []*tierResult, p prices) {
	var b strings.Builder
	for _, t := range all {
		if len(t.Modes) < 2 {
			continue
		}
		a, bm := t.Modes[0], t.Modes[1]
		fmt.Fprintf(&b, "  %d agent(s): Walrus storage %s cheaper (goal 100x), Sui transactions %s fewer (goal 50x); (a) costs $%s a month (Walrus $%s, ENS gas $%s)\n",
			t.Agents, ratio(bm.FROST, a.FROST), ratio(bm.SuiTx, a.SuiTx), num(a.walrusUSD(p)+a.gasUSD(p)), num(a.walrusUSD(p)), num(a.gasUSD(p)))
	}
	if b.Len() > 0 {
		fmt.Fprintf(out, "\n(a) hermesd as configured against (b) hermesd with quilts off and the old defaults, per agent-month:\n%s", b.String())
	}
	fmt.Fprintf(out, "prices ASSUMED: $%g per WAL (at which the default 100,000 FROST per MiB-epoch is Walrus's documented $0.023 per encoded GB-month), %g gwei, $%g per ETH; a month is 30.44 days, an epoch 14 days\n",
		p.walUSD, p.gwei, p.ethUSD)
}

// check fails the run when the ledgers and the server disagree.
func check(all []*tierResult, rs []renewal) error {
	var errs []error
	runs := map[int][]*figures{}
	for _, t := range all {
		runs[t.Agents] = append(runs[t.Agents], t.Modes...)
	}
	for _, r := range rs {
		runs[1] = append(runs[1], r.F)
	}
	for n, fs := range runs {
		for _, f := range fs {
			if f.Ledger.FROST != f.Served.FROST || f.Ledger.EncodedBytes != f.Served.Encoded || f.Ledger.EncodedByteEpochs != f.Served.ByteEpochs || f.Served.Bad+f.Lost.Bad > 0 {
				errs = append(errs, fmt.Errorf("%d agents, mode %s: the ledgers recorded %d FROST, %d encoded bytes, %d byte-epochs; the server answered %d, %d, %d (%d unreadable answers)",
					n, f.Key, f.Ledger.FROST, f.Ledger.EncodedBytes, f.Ledger.EncodedByteEpochs, f.Served.FROST, f.Served.Encoded, f.Served.ByteEpochs, f.Served.Bad))
			}
		}
	}
	return errors.Join(errs...)
}

func ratio(a, b float64) string {
	if b == 0 {
		return "inf"
	}
	return fmt.Sprintf("%.0fx", a/b)
}

// num prints a figure with three significant digits and thousands
// separators.
func num(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 1000:
		s := fmt.Sprintf("%.0f", v)
		var b strings.Builder
		for i, c := range s {
			if i > 0 && (len(s)-i)%3 == 0 && c != '-' && s[i-1] != '-' {
				b.WriteByte(',')
			}
			b.WriteRune(c)
		}
		return b.String()
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
