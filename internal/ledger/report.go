package ledger

import (
	"math/big"
	"sort"
	"time"

	"github.com/hermesd/hermesd/internal/walruscost"
)

// DaysPerMonth is the average month a projection per month is.
const DaysPerMonth = 365.25 / 12

// MinWindow is the least recorded time a projection extrapolates. A
// daemon's first minutes are its start-up: every agent's first snapshot
// uploads its whole brain, and with the default snapshot_interval an hour
// holds six regular snapshots at most. Projected to a month, two seconds
// of that would be multiplied 1,300,000-fold (87,660 snapshots a month
// from two); an hour, 730-fold, and the figures say over what they were
// taken. The book's resolution is the clock hour, too.
const MinWindow = time.Hour

// Prices turn a ledger into money. A zero USD price is unknown: the
// figures it would convert are not shown in USD.
type Prices struct {
	// Walrus prices the naive way's storage (what was really stored is
	// priced by the publishers' answers).
	Walrus walruscost.Price `json:"walrus"`
	// WALUSD, ETHUSD: USD per WAL and per ETH (the native token of every
	// chain recorded). SuiTxUSD: USD per Sui transaction.
	WALUSD   float64 `json:"walUsd,omitempty"`
	ETHUSD   float64 `json:"ethUsd,omitempty"`
	SuiTxUSD float64 `json:"suiTxUsd,omitempty"`
	// L1 is the chain id the naive way writes on (0: the chain with the
	// most gas recorded); its gas price is the mean effective price
	// recorded there.
	L1 uint64 `json:"l1ChainId,omitempty"`
}

// Figures are amounts over some period: spent so far, or projected per
// day or per month.
type Figures struct {
	Snapshots         float64 `json:"snapshots"`
	Blobs             float64 `json:"blobs"`
	Patches           float64 `json:"patches,omitempty"`
	Reused            float64 `json:"reused"`
	EncodedBytes      float64 `json:"encodedBytes"`
	EncodedByteEpochs float64 `json:"encodedByteEpochs"`
	WAL               float64 `json:"wal"`
	SuiTransactions   float64 `json:"suiTransactions"`
	// Chains are the pointer transactions by chain, ascending chain id.
	Chains []ChainFigures `json:"chains"`
	// USD is the total at the configured prices; nil without any.
	USD *USD `json:"usd,omitempty"`
}

// ChainFigures are the pointer transactions on one chain.
type ChainFigures struct {
	ChainID      uint64  `json:"chainId"`
	Transactions float64 `json:"transactions"`
	Gas          float64 `json:"gas"`
	// ETH is the fee in the chain's native token; nil when no gas price
	// is known (the naive way's, before any transaction was recorded).
	ETH *float64 `json:"eth"`
}

// USD is a total in US dollars and its parts; a part whose price is not
// configured (or whose amount is unknown) is nil and not in Total.
type USD struct {
	Walrus *float64 `json:"walrus"`
	Sui    *float64 `json:"sui"`
	Gas    *float64 `json:"gas"`
	Total  float64  `json:"total"`
	// Complete: every part is known.
	Complete bool `json:"complete"`
}

// Period is spend so far and projected from the recent rate: no
// projection (nil) before MinWindow is recorded.
type Period struct {
	Spent    Figures  `json:"spent"`
	PerDay   *Figures `json:"perDay,omitempty"`
	PerMonth *Figures `json:"perMonth,omitempty"`
}

// AgentReport is one agent's (or the fleet's) account.
type AgentReport struct {
	Agent string    `json:"agent,omitempty"`
	Since time.Time `json:"since,omitzero"`
	// Window is the recent time the projections extrapolate, in seconds:
	// the last 24 clock hours (less when recording began later).
	Window float64 `json:"windowSeconds"`
	// ProjectFrom is when projections begin, MinWindow after recording
	// did; zero once they are there (or nothing is recorded).
	ProjectFrom time.Time `json:"projectFrom,omitzero"`
	// Recorded are the exact totals behind Hermesd.Spent.
	Recorded Spend `json:"recorded"`
	// Hermesd is what hermesd spent; Naive what one whole-brain blob and
	// one L1 write per snapshot would have.
	Hermesd Period `json:"hermesd"`
	Naive   Period `json:"naive"`
}

// Report is the account of some agents and their total.
type Report struct {
	At     time.Time     `json:"at"`
	Prices Prices        `json:"prices"`
	Agents []AgentReport `json:"agents"`
	Total  AgentReport   `json:"total"`
}

// NewReport accounts for books at now.
func NewReport(books []Book, p Prices, now time.Time) Report {
	r := Report{At: now, Prices: p}
	t := NewTally(p, now)
	for _, b := range books {
		r.Agents = append(r.Agents, t.Add(b))
	}
	r.Total = t.Total()
	return r
}

// Tally accounts for books one at a time and for their total, so a report
// over many agents can be written as it is made (the daemon's status of a
// thousand agents holds one agent's account at a time, not all of them).
type Tally struct {
	p             Prices
	now           time.Time
	total, recent Spend
	since         time.Time
}

// NewTally starts an account at now.
func NewTally(p Prices, now time.Time) *Tally { return &Tally{p: p, now: now} }

// Add returns b's account and counts it in the total.
func (t *Tally) Add(b Book) AgentReport {
	rs, win := b.Recent(t.now)
	a := account(b.Agent, b.Since, b.Total, rs, win, t.p)
	t.total.Add(b.Total)
	t.recent.Add(rs)
	if !b.Since.IsZero() && (t.since.IsZero() || b.Since.Before(t.since)) {
		t.since = b.Since
	}
	return a
}

// Total is the account of every book added so far.
func (t *Tally) Total() AgentReport {
	from := windowStart(t.now)
	if t.since.After(from) {
		from = t.since
	}
	win := time.Duration(0)
	if !t.since.IsZero() {
		win = max(t.now.Sub(from), 0)
	}
	return account("", t.since, t.total, t.recent, win, t.p)
}

func account(agent string, since time.Time, total, recent Spend, win time.Duration, p Prices) AgentReport {
	a := AgentReport{Agent: agent, Since: since, Window: win.Seconds(), Recorded: total.Clone()}
	l1, price := l1Price(total, p.L1)
	a.Hermesd.Spent = figures(total, 1, p)
	a.Naive.Spent = naive(total, 1, p, l1, price)
	if since.IsZero() {
		return a
	}
	if win < MinWindow {
		a.ProjectFrom = since.Add(MinWindow)
		return a
	}
	perDay := float64(24*time.Hour) / float64(win)
	ptr := func(f Figures) *Figures { return &f }
	a.Hermesd.PerDay = ptr(figures(recent, perDay, p))
	a.Hermesd.PerMonth = ptr(figures(recent, perDay*DaysPerMonth, p))
	a.Naive.PerDay = ptr(naive(recent, perDay, p, l1, price))
	a.Naive.PerMonth = ptr(naive(recent, perDay*DaysPerMonth, p, l1, price))
	return a
}

// l1Price is the chain the naive way writes on and its mean effective gas
// price in wei (nil: none recorded).
func l1Price(total Spend, want uint64) (uint64, *big.Float) {
	id := want
	if id == 0 {
		var most uint64
		for cid, c := range total.Chains {
			if c.Gas > most || (c.Gas == most && (id == 0 || cid < id)) {
				id, most = cid, c.Gas
			}
		}
	}
	c := total.Chains[id]
	if c == nil || c.Gas == 0 || c.FeeWei == nil || c.FeeWei.Sign() == 0 {
		return id, nil
	}
	return id, new(big.Float).Quo(new(big.Float).SetInt(c.FeeWei), new(big.Float).SetUint64(c.Gas))
}

func figures(s Spend, k float64, p Prices) Figures {
	f := Figures{
		Snapshots:         float64(s.Snapshots) * k,
		Blobs:             float64(s.Blobs) * k,
		Patches:           float64(s.Patches) * k,
		Reused:            float64(s.Reused) * k,
		EncodedBytes:      float64(s.EncodedBytes) * k,
		EncodedByteEpochs: float64(s.EncodedByteEpochs) * k,
		WAL:               float64(s.FROST) / walruscost.FROSTPerWAL * k,
		SuiTransactions:   s.SuiTx * k,
		Chains:            []ChainFigures{},
	}
	var eth float64
	known := true
	for _, id := range chainIDs(s) {
		c := s.Chains[id]
		cf := ChainFigures{ChainID: id, Transactions: c.Transactions * k, Gas: float64(c.Gas) * k}
		if c.FeeWei != nil && (c.FeeWei.Sign() > 0 || c.Gas == 0) {
			v := weiToETH(c.FeeWei) * k
			cf.ETH = &v
			eth += v
		} else {
			known = false
		}
		f.Chains = append(f.Chains, cf)
	}
	f.USD = usd(f.WAL, f.SuiTransactions, eth, known, p)
	return f
}

// naive prices the naive way of s: one blob per snapshot at p.Walrus, two
// Sui transactions each, one L1 update each at the recorded gas price.
func naive(s Spend, k float64, p Prices, l1 uint64, gasPrice *big.Float) Figures {
	n := s.Naive
	frost := float64(p.Walrus.Storage)*float64(n.UnitEpochs) + float64(p.Walrus.Write)*float64(n.Units)
	snaps := float64(s.Snapshots) * k
	f := Figures{
		Snapshots:         snaps,
		Blobs:             snaps,
		EncodedBytes:      float64(n.EncodedBytes) * k,
		EncodedByteEpochs: float64(n.EncodedByteEpochs) * k,
		WAL:               frost / walruscost.FROSTPerWAL * k,
		SuiTransactions:   walruscost.SuiTxPerBlob * snaps,
		Chains:            []ChainFigures{},
	}
	if s.Snapshots == 0 {
		f.USD = usd(f.WAL, f.SuiTransactions, 0, true, p)
		return f
	}
	cf := ChainFigures{ChainID: l1, Transactions: snaps, Gas: NaiveWriteGas * snaps}
	var eth float64
	if gasPrice != nil {
		wei, _ := new(big.Float).Mul(gasPrice, big.NewFloat(cf.Gas)).Float64()
		eth = wei / 1e18
		cf.ETH = &eth
	}
	f.Chains = append(f.Chains, cf)
	f.USD = usd(f.WAL, f.SuiTransactions, eth, gasPrice != nil, p)
	return f
}

func usd(wal, suiTx, eth float64, ethKnown bool, p Prices) *USD {
	if p.WALUSD <= 0 && p.SuiTxUSD <= 0 && p.ETHUSD <= 0 {
		return nil
	}
	u := &USD{Complete: true}
	part := func(amount, price float64, known bool) *float64 {
		if price <= 0 || !known {
			u.Complete = false
			return nil
		}
		v := amount * price
		u.Total += v
		return &v
	}
	u.Walrus = part(wal, p.WALUSD, true)
	u.Sui = part(suiTx, p.SuiTxUSD, true)
	u.Gas = part(eth, p.ETHUSD, ethKnown)
	return u
}

func chainIDs(s Spend) []uint64 {
	ids := make([]uint64, 0, len(s.Chains))
	for id := range s.Chains {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

func weiToETH(wei *big.Int) float64 {
	f, _ := new(big.Float).Quo(new(big.Float).SetInt(wei), big.NewFloat(1e18)).Float64()
	return f
}
