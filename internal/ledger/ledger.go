package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hermesd/hermesd/internal/atomicfile"
	"github.com/hermesd/hermesd/internal/state"
	"github.com/hermesd/hermesd/internal/walruscost"
)

// FileName is an agent's ledger in its state directory.
const FileName = "cost.json"

// Version is the schema version of the file.
const Version = 1

// KeepHours is how many hourly buckets a book keeps: the recent window.
const KeepHours = 24

// maxFile bounds a ledger file; a book stays a few KiB.
const maxFile = 1 << 20

// maxChains bounds the chains a book records gas for.
const maxChains = 16

// maxCount bounds the fractional counts (Sui transactions, shares of
// transactions): 2^53 is where a float64 stops counting one by one, far
// beyond what any agent's ledger reaches, and every figure derived from
// counts this size stays finite.
const maxCount = 1 << 53

// maxFeeWei bounds a chain's fee: no EVM amount exceeds 2^256−1 wei.
var maxFeeWei = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))

// NaiveWriteGas is the gas of one L1 setText update of an agent-snapshot
// record (a 43-character blob id over another) on the ENS PublicResolver
// under mainnet's rules, as measured on the devnet's contracts: what the
// naive way pays for every snapshot.
const NaiveWriteGas = 47_819

// Spend is what was spent: the totals of a book, or of one hour.
type Spend struct {
	// Snapshots are verified snapshots.
	Snapshots uint64 `json:"snapshots"`
	// Blobs are newly created blobs holding this agent's data alone,
	// Patches quilt patches (shares of a quilt blob), Reused store answers
	// that registered nothing (alreadyCertified).
	Blobs   uint64 `json:"blobs"`
	Patches uint64 `json:"patches,omitempty"`
	Reused  uint64 `json:"reused"`
	// EncodedBytes is the encoded length of what was stored;
	// EncodedByteEpochs that times the epochs paid for.
	EncodedBytes      uint64 `json:"encodedBytes"`
	EncodedByteEpochs uint64 `json:"encodedByteEpochs"`
	// FROST is Walrus's cost as the publishers reported it.
	FROST uint64 `json:"frost"`
	// Clamped counts store answers (or shares of one) that reported more
	// than Walrus's formula allows for what was sent: their figures are
	// the formula's bound (walruscost.Charge.Clamped).
	Clamped uint64 `json:"clamped,omitempty"`
	// SuiTx are the Sui transactions the stores took (shares for quilts).
	SuiTx float64 `json:"suiTransactions"`
	// Chains is the gas of pointer transactions by chain id.
	Chains map[uint64]*Chain `json:"chains,omitempty"`
	// Naive is what the same snapshots would have stored the naive way.
	Naive Naive `json:"naive"`
}

// Chain is the gas spent on one chain.
type Chain struct {
	// Transactions counts this agent's shares of transactions.
	Transactions float64 `json:"transactions"`
	Gas          uint64  `json:"gas"`
	// FeeWei is gas times the effective gas price, in wei.
	FeeWei *big.Int `json:"feeWei"`
}

// maxFeeDigits bounds the digits of a fee read from a file: 2^256−1 has
// 78, and parsing a number of a megabyte of digits takes seconds.
const maxFeeDigits = 80

// UnmarshalJSON reads a Chain, refusing a fee too long to be one before
// parsing it.
func (c *Chain) UnmarshalJSON(b []byte) error {
	var raw struct {
		Transactions float64         `json:"transactions"`
		Gas          uint64          `json:"gas"`
		FeeWei       json.RawMessage `json:"feeWei"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*c = Chain{Transactions: raw.Transactions, Gas: raw.Gas}
	if len(raw.FeeWei) == 0 || string(raw.FeeWei) == "null" {
		return nil
	}
	if len(raw.FeeWei) > maxFeeDigits {
		return fmt.Errorf("feeWei of %d characters: out of range (2^256-1 wei has 78 digits)", len(raw.FeeWei))
	}
	c.FeeWei = new(big.Int)
	return json.Unmarshal(raw.FeeWei, c.FeeWei)
}

// Naive is the storage of one whole-brain blob per snapshot.
type Naive struct {
	Bytes             uint64 `json:"bytes"`
	EncodedBytes      uint64 `json:"encodedBytes"`
	EncodedByteEpochs uint64 `json:"encodedByteEpochs"`
	// Units and UnitEpochs price it at any Walrus price:
	// storage·UnitEpochs + write·Units.
	Units      uint64 `json:"units"`
	UnitEpochs uint64 `json:"unitEpochs"`
}

// Store is the spend of one store answer (or one patch's share of a
// quilt's).
func Store(c walruscost.Charge) Spend {
	s := Spend{EncodedBytes: c.EncodedBytes, EncodedByteEpochs: c.EncodedByteEpochs, FROST: c.FROST, SuiTx: c.SuiTx}
	if c.Clamped {
		s.Clamped = 1
	}
	switch {
	case c.Patch:
		s.Patches = 1
	case c.New:
		s.Blobs = 1
	default:
		s.Reused = 1
	}
	return s
}

// Tx is one agent's share of a mined transaction on chain chainID: gas
// units at the transaction's effective gas price (nil: unknown), share
// being its part of the transaction (1/n of a multicall of n).
func Tx(chainID, gas uint64, gasPrice *big.Int, share float64) Spend {
	fee := new(big.Int)
	if gasPrice != nil {
		fee.Mul(new(big.Int).SetUint64(gas), gasPrice)
	}
	return Spend{Chains: map[uint64]*Chain{chainID: {Transactions: share, Gas: gas, FeeWei: fee}}}
}

// Snapshot is one verified snapshot: blobBytes is what one blob holding
// the whole brain would take (NaiveBlobSize), stored for epochs epochs over
// shards shards.
func Snapshot(blobBytes, epochs uint64, shards int) Spend {
	enc, err := walruscost.EncodedLength(blobBytes, shards)
	if err != nil {
		enc = math.MaxUint64 // no network stores it as one blob
	}
	units := walruscost.Units(enc)
	return Spend{Snapshots: 1, Naive: Naive{
		Bytes: blobBytes, EncodedBytes: enc, EncodedByteEpochs: walruscost.ForEpochs(enc, epochs),
		Units: units, UnitEpochs: walruscost.ForEpochs(units, epochs),
	}}
}

// NaiveBlobSize estimates the size of one blob holding a brain of files
// files and bytes bytes: the bytes plus a tar header and padding per file
// (at most 1 KiB), the archive's end and an envelope.
func NaiveBlobSize(files int, bytes int64) uint64 {
	return uint64(max(bytes, 0)) + 1024*uint64(max(files, 0)+1) + 64
}

// Add adds o to s.
func (s *Spend) Add(o Spend) {
	s.Snapshots = add(s.Snapshots, o.Snapshots)
	s.Blobs = add(s.Blobs, o.Blobs)
	s.Patches = add(s.Patches, o.Patches)
	s.Reused = add(s.Reused, o.Reused)
	s.EncodedBytes = add(s.EncodedBytes, o.EncodedBytes)
	s.EncodedByteEpochs = add(s.EncodedByteEpochs, o.EncodedByteEpochs)
	s.FROST = add(s.FROST, o.FROST)
	s.Clamped = add(s.Clamped, o.Clamped)
	s.SuiTx = addCount(s.SuiTx, o.SuiTx)
	for id, c := range o.Chains {
		if c == nil {
			continue
		}
		if s.Chains == nil {
			s.Chains = map[uint64]*Chain{}
		}
		mine := s.Chains[id]
		if mine == nil {
			mine = &Chain{FeeWei: new(big.Int)}
			s.Chains[id] = mine
		}
		mine.Transactions = addCount(mine.Transactions, c.Transactions)
		mine.Gas = add(mine.Gas, c.Gas)
		if c.FeeWei != nil && c.FeeWei.Sign() > 0 {
			if mine.FeeWei == nil {
				mine.FeeWei = new(big.Int)
			}
			if mine.FeeWei.Add(mine.FeeWei, c.FeeWei).Cmp(maxFeeWei) > 0 {
				mine.FeeWei.Set(maxFeeWei)
			}
		}
	}
	n, m := &s.Naive, o.Naive
	n.Bytes = add(n.Bytes, m.Bytes)
	n.EncodedBytes = add(n.EncodedBytes, m.EncodedBytes)
	n.EncodedByteEpochs = add(n.EncodedByteEpochs, m.EncodedByteEpochs)
	n.Units = add(n.Units, m.Units)
	n.UnitEpochs = add(n.UnitEpochs, m.UnitEpochs)
}

// Clone is a deep copy.
func (s Spend) Clone() Spend {
	c := s
	c.Chains = nil
	c.Add(Spend{Chains: s.Chains})
	return c
}

// Hour is the spend of one clock hour.
type Hour struct {
	Start time.Time `json:"start"`
	Spend
}

// Book is one agent's ledger.
type Book struct {
	Version int    `json:"version"`
	Agent   string `json:"agent"`
	// Since is the first record; Updated the last.
	Since   time.Time `json:"since,omitzero"`
	Updated time.Time `json:"updated,omitzero"`
	Total   Spend     `json:"total"`
	// Hours are the last KeepHours clock hours with any spend, oldest
	// first.
	Hours []Hour `json:"hours,omitempty"`
}

// Clone is a deep copy.
func (b Book) Clone() Book {
	c := b
	c.Total = b.Total.Clone()
	c.Hours = make([]Hour, len(b.Hours))
	for i, h := range b.Hours {
		c.Hours[i] = Hour{Start: h.Start, Spend: h.Spend.Clone()}
	}
	return c
}

// windowStart is the start of the oldest hour in the recent window at now.
func windowStart(now time.Time) time.Time {
	return now.UTC().Truncate(time.Hour).Add(-(KeepHours - 1) * time.Hour)
}

// Recent is the spend of the recent window at now — the current clock hour
// and the KeepHours−1 before it — and the time it covers: from the start
// of the oldest of those hours, or from Since when that is later, to now.
func (b Book) Recent(now time.Time) (Spend, time.Duration) {
	from := windowStart(now)
	var s Spend
	for _, h := range b.Hours {
		if !h.Start.Before(from) {
			s.Add(h.Spend)
		}
	}
	if b.Since.After(from) {
		from = b.Since
	}
	return s, max(now.Sub(from), 0)
}

// add records s at now.
func (b *Book) add(s Spend, now time.Time) {
	if b.Since.IsZero() {
		b.Since = now
	}
	b.Updated = now
	b.Total.Add(s)
	hour := now.UTC().Truncate(time.Hour)
	if n := len(b.Hours); n > 0 && b.Hours[n-1].Start.Equal(hour) {
		b.Hours[n-1].Add(s)
	} else if n == 0 || b.Hours[n-1].Start.Before(hour) {
		b.Hours = append(b.Hours, Hour{Start: hour, Spend: s.Clone()})
	} else {
		// The clock went back: the last hour takes it.
		b.Hours[n-1].Add(s)
	}
	from := windowStart(now)
	keep := b.Hours[:0]
	for _, h := range b.Hours {
		if !h.Start.Before(from) {
			keep = append(keep, h)
		}
	}
	b.Hours = keep
}

// check refuses a book this version cannot take as its own.
func (b *Book) check(agent string) error {
	if b.Version != Version {
		return fmt.Errorf("schema version %d, this hermesd writes %d", b.Version, Version)
	}
	if b.Agent != agent {
		return fmt.Errorf("the ledger of agent %q", b.Agent)
	}
	if len(b.Hours) > KeepHours || len(b.Total.Chains) > maxChains {
		return errors.New("more hours or chains than a ledger keeps")
	}
	if err := b.Total.check(); err != nil {
		return fmt.Errorf("total: %w", err)
	}
	for i, h := range b.Hours {
		if len(h.Chains) > maxChains {
			return errors.New("more chains than a ledger keeps")
		}
		if err := h.check(); err != nil {
			return fmt.Errorf("hours[%d]: %w", i, err)
		}
	}
	return nil
}

// check refuses amounts no record can make: a chain without figures, a
// count that is negative, not a number or beyond maxCount, a fee below 0
// or above maxFeeWei. (The unsigned counts cannot go wrong: JSON refuses
// what does not fit.)
func (s *Spend) check() error {
	if !isCount(s.SuiTx) {
		return fmt.Errorf("suiTransactions %g is not a count in 0..2^53", s.SuiTx)
	}
	for id, c := range s.Chains {
		switch {
		case c == nil:
			return fmt.Errorf("chain %d has no figures", id)
		case !isCount(c.Transactions):
			return fmt.Errorf("chain %d: transactions %g is not a count in 0..2^53", id, c.Transactions)
		case c.FeeWei != nil && (c.FeeWei.Sign() < 0 || c.FeeWei.Cmp(maxFeeWei) > 0):
			// The number itself may be thousands of digits: not shown.
			return fmt.Errorf("chain %d: feeWei out of range (negative, or above 2^256-1 wei)", id)
		}
	}
	return nil
}

// Path is agent's ledger file under stateDir.
func Path(stateDir, agent string) string {
	return filepath.Join(state.AgentPath(stateDir, agent), FileName)
}

// errNewer marks a ledger of a newer schema.
var errNewer = errors.New("written by a newer hermesd")

// Load reads agent's book from stateDir; a missing file is an empty book.
// It takes no lock: files are replaced by rename, so a reader beside the
// daemon sees one version or the other.
func Load(stateDir, agent string) (Book, error) {
	b := Book{Version: Version, Agent: agent}
	data, err := state.ReadFile(Path(stateDir, agent), maxFile)
	if errors.Is(err, os.ErrNotExist) {
		return b, nil
	}
	if err != nil {
		return b, fmt.Errorf("cost ledger of agent %s: %w", agent, err)
	}
	got, err := parse(data, agent)
	if err != nil {
		return b, fmt.Errorf("cost ledger %s: %w", Path(stateDir, agent), err)
	}
	return got, nil
}

// parse decodes and checks agent's book.
func parse(data []byte, agent string) (Book, error) {
	var got Book
	if err := json.Unmarshal(data, &got); err != nil {
		return Book{}, fmt.Errorf("corrupt: %w", err)
	}
	if got.Version > Version {
		return Book{}, fmt.Errorf("%w (schema version %d)", errNewer, got.Version)
	}
	if err := got.check(agent); err != nil {
		return Book{}, err
	}
	return got, nil
}

// Ledger records what the agents of one state directory spend. Its
// methods are safe for concurrent use.
type Ledger struct {
	dir string
	now func() time.Time
	log *slog.Logger

	mu    sync.Mutex
	books map[string]*entry
}

type entry struct {
	mu     sync.Mutex
	book   Book
	memory bool // a newer hermesd's file is there: never written
}

// Options adjust Open.
type Options struct {
	Now    func() time.Time // nil: time.Now
	Logger *slog.Logger
}

// Open returns the ledger of the state directory stateDir, whose lock the
// caller holds. Books are read when first used.
func Open(stateDir string, opts Options) *Ledger {
	l := &Ledger{dir: stateDir, now: opts.Now, log: opts.Logger, books: map[string]*entry{}}
	if l.now == nil {
		l.now = time.Now
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	return l
}

// Dir is the state directory.
func (l *Ledger) Dir() string { return l.dir }

func (l *Ledger) entry(agent string) *entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.books[agent]; e != nil {
		return e
	}
	e := &entry{}
	b, err := Load(l.dir, agent)
	switch {
	case errors.Is(err, errNewer):
		l.log.Warn("cost ledger written by a newer hermesd; this one counts in memory only", "agent", agent, "error", err)
		e.memory = true
	case err != nil:
		bad := Path(l.dir, agent) + ".bad"
		if rerr := os.Rename(Path(l.dir, agent), bad); rerr != nil {
			l.log.Warn("cost ledger unreadable and not moved aside; counting in memory only", "agent", agent, "error", err, "rename", rerr)
			e.memory = true
		} else {
			l.log.Warn("cost ledger unreadable; moved aside, counting again from zero", "agent", agent, "error", err, "kept", bad)
		}
	}
	e.book = b
	l.books[agent] = e
	return e
}

// Record adds s to agent's book and writes the book. When the write fails
// the spend stays recorded in memory and the next record writes it.
func (l *Ledger) Record(agent string, s Spend) error {
	e := l.entry(agent)
	e.mu.Lock()
	defer e.mu.Unlock()
	for id := range s.Chains {
		if _, ok := e.book.Total.Chains[id]; !ok && len(e.book.Total.Chains) >= maxChains {
			return fmt.Errorf("cost ledger of agent %s: gas on more than %d chains; chain %d not recorded", agent, maxChains, id)
		}
	}
	e.book.add(s.Clone(), l.now())
	if e.memory {
		return nil
	}
	data, err := json.MarshalIndent(e.book, "", "  ")
	if err != nil {
		return fmt.Errorf("cost ledger of agent %s: %w", agent, err)
	}
	dir := state.AgentPath(l.dir, agent)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cost ledger of agent %s: %w", agent, err)
	}
	if err := atomicfile.WriteFile(Path(l.dir, agent), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("cost ledger of agent %s: %w", agent, err)
	}
	return nil
}

// Total returns a copy of agent's totals.
func (l *Ledger) Total(agent string) Spend {
	e := l.entry(agent)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.book.Total.Clone()
}

// Book returns a copy of agent's book.
func (l *Ledger) Book(agent string) Book {
	e := l.entry(agent)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.book.Clone()
}

// isCount: 0 ≤ f ≤ maxCount (false for NaN).
func isCount(f float64) bool { return f >= 0 && f <= maxCount }

// addCount adds a fractional count, saturating at maxCount; what is not
// a positive number adds nothing.
func addCount(a, b float64) float64 {
	if !(b > 0) {
		return a
	}
	return min(a+b, maxCount)
}

func add(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}
