package pointer

import (
	"context"
	"fmt"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/state"
)

// The fakes of the interfaces the package declares, small enough to read
// at a glance: a state file in memory, a lineage of known values, a world
// of records on L1 and on an L2 behind a gateway that can lag, and a clock.

// memStore is a Store in memory that counts its saves and can fail them.
type memStore struct {
	mu    sync.Mutex
	st    state.AgentState
	saves int
	fail  error
}

func (s *memStore) Update(fn func(st *state.AgentState) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !fn(&s.st) {
		return nil
	}
	s.saves++
	return s.fail
}

// get returns a copy of the state.
func (s *memStore) get() *state.AgentState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Clone()
}

// lineageOf is a Lineage: the values of the brain's lock, newest first.
type lineageOf struct {
	mu  sync.Mutex
	ids []string
}

func (l *lineageOf) Knows(v string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range l.ids {
		if id == v {
			return true
		}
	}
	return false
}

func (l *lineageOf) Newest() (state.Snapshot, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ids) == 0 {
		return state.Snapshot{}, false
	}
	return state.Snapshot{BlobID: l.ids[0], BundleHash: "0x" + l.ids[0], CreatedAt: time.Unix(1700000000, 0)}, true
}

func (l *lineageOf) add(v string) {
	l.mu.Lock()
	l.ids = append([]string{v}, l.ids...)
	l.mu.Unlock()
}

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// set moves the clock to t if it is later.
func (c *clock) set(t time.Time) {
	c.mu.Lock()
	if t.After(c.t) {
		c.t = t
	}
	c.mu.Unlock()
}

// world is the records of a few names: on L1, or on an L2 whose values L1
// resolution shows through a gateway that can lag (frozen at what the L2
// held when it began to lag) or fail.
type world struct {
	mu      sync.Mutex
	l1, l2  map[string]string
	onL2    map[string]bool
	shown   map[string]string // the gateway's view while it lags
	lag     bool
	readErr error // every L1 resolution fails with it
	owners  map[string]common.Address
}

func newWorld() *world {
	return &world{l1: map[string]string{}, l2: map[string]string{}, onL2: map[string]bool{}, shown: map[string]string{},
		owners: map[string]common.Address{}}
}

func (w *world) lagging(on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lag = on
	clear(w.shown)
	for k, v := range w.l2 {
		w.shown[k] = v
	}
}

// set puts a value in the record, where it lives.
func (w *world) set(name, v string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.where(name)[name] = v
}

func (w *world) get(name string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.where(name)[name]
}

func (w *world) where(name string) map[string]string {
	if w.onL2[name] {
		return w.l2
	}
	return w.l1
}

// viaL1 is L1 resolution (Reader).
type viaL1 struct{ w *world }

func (r viaL1) Read(_ context.Context, name string) (string, bool, error) {
	w := r.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.readErr != nil {
		return "", false, w.readErr
	}
	m := w.l1
	if w.onL2[name] {
		m = w.l2
		if w.lag {
			m = w.shown
		}
	}
	v, ok := m[name]
	return v, ok, nil
}

// onTarget reads the L2's records directly (Deps.AtTarget).
type onTarget struct{ w *world }

func (r onTarget) Read(_ context.Context, name string) (string, bool, error) {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	v, ok := r.w.l2[name]
	return v, ok, nil
}

func (w *world) Owner(_ context.Context, name string) (common.Address, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.owners[name], nil
}

// chain writes one map of the world by compare-and-set, every call one
// multicall transaction of all its updates (Chain). It counts calls and
// transactions; a hook decides an update's fate, hang blocks every call
// until its context ends.
type chain struct {
	w       *world
	l2      bool
	chainID uint64
	gasEach uint64

	mu      sync.Mutex
	calls   int
	txs     int
	resyncs int
	hook    func(u ens.Update) (ens.UpdateResult, bool)
	hang    bool
	entered chan struct{} // closed when a call hangs
}

func newChain(w *world, l2 bool) *chain {
	c := &chain{w: w, l2: l2, chainID: 1337, gasEach: 30_001, entered: make(chan struct{})}
	if l2 {
		c.chainID = 1338
	}
	return c
}

var txPrice = big.NewInt(3_000_000_000)

func (c *chain) WriteBatches(ctx context.Context, ups []ens.Update, each func(ens.UpdateResult)) error {
	c.mu.Lock()
	c.calls++
	hang, hook := c.hang, c.hook
	c.mu.Unlock()
	if hang {
		close(c.entered)
		<-ctx.Done()
		for i, u := range ups {
			each(ens.UpdateResult{Index: i, Update: u, Outcome: ens.Retry, Err: ctx.Err()})
		}
		return ctx.Err()
	}
	c.w.mu.Lock()
	m := c.w.l1
	if c.l2 {
		m = c.w.l2
	}
	var sent []ens.UpdateResult
	for i, u := range ups {
		r := ens.UpdateResult{Index: i, Update: u, ChainID: c.chainID}
		if hook != nil {
			if hr, ok := hook(u); ok {
				hr.Index, hr.Update, hr.ChainID = i, u, c.chainID
				c.w.mu.Unlock()
				each(hr)
				c.w.mu.Lock()
				continue
			}
		}
		switch cur := m[u.Name]; {
		case cur == u.Value:
			r.Outcome = ens.Unchanged
		case cur != u.Expected:
			r.Outcome, r.Actual, r.Err = ens.Conflict, cur, &ens.ConflictError{Name: u.Name, Expected: u.Expected, Actual: cur}
		default:
			m[u.Name] = u.Value
			r.Outcome = ens.Published
			sent = append(sent, r)
			continue
		}
		c.w.mu.Unlock()
		each(r)
		c.w.mu.Lock()
	}
	c.w.mu.Unlock()
	if len(sent) == 0 {
		return nil
	}
	c.mu.Lock()
	c.txs++
	tx := common.BigToHash(big.NewInt(int64(c.chainID*1000 + uint64(c.txs))))
	block := uint64(100 + c.txs)
	c.mu.Unlock()
	used := c.gasEach*uint64(len(sent)) + 1 // one unit of remainder to split
	for _, r := range sent {
		r.TxHash, r.BlockNumber, r.BatchSize, r.TxGasUsed, r.EffectiveGasPrice = tx, block, len(sent), used, txPrice
		each(r)
	}
	return nil
}

func (c *chain) ResyncNonce() {
	c.mu.Lock()
	c.resyncs++
	c.mu.Unlock()
}

func (c *chain) counts() (calls, txs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls, c.txs
}

func (c *chain) setHook(f func(u ens.Update) (ens.UpdateResult, bool)) {
	c.mu.Lock()
	c.hook = f
	c.mu.Unlock()
}

// fees is Accounts: every fee paid, by agent.
type fees struct {
	mu   sync.Mutex
	paid map[string][]Fee
}

func (f *fees) Paid(agent string, fee Fee) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.paid == nil {
		f.paid = map[string][]Fee{}
	}
	f.paid[agent] = append(f.paid[agent], fee)
}

func (f *fees) gas(agent string) (gas uint64, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, x := range f.paid[agent] {
		gas += x.Gas
	}
	return gas, len(f.paid[agent])
}

// observed is an Observer that counts.
type observed struct {
	mu       sync.Mutex
	outcomes map[string]int // agent/outcome
	checks   map[string]int
	failures map[string]int // agent/stage
	rewinds  int
}

func newObserved() *observed {
	return &observed{outcomes: map[string]int{}, checks: map[string]int{}, failures: map[string]int{}}
}

func (o *observed) Outcome(a string, out Outcome)   { o.inc(o.outcomes, a+"/"+string(out)) }
func (o *observed) Checked(a string, out Outcome)   { o.inc(o.checks, a+"/"+string(out)) }
func (o *observed) Published(string, time.Duration) {}
func (o *observed) Failed(a, stage string)          { o.inc(o.failures, a+"/"+stage) }
func (o *observed) Rewound() {
	o.mu.Lock()
	o.rewinds++
	o.mu.Unlock()
}

func (o *observed) inc(m map[string]int, k string) {
	o.mu.Lock()
	m[k]++
	o.mu.Unlock()
}

func (o *observed) n(m map[string]int, k string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return m[k]
}

// self is the operator's address in these tests.
var self = common.HexToAddress("0x00000000000000000000000000000000000000a1")

// rig is one world with its chains and a clock, and heads on it.
type rig struct {
	t       *testing.T
	w       *world
	l1, l2  *chain
	clk     *clock
	fees    *fees
	obs     *observed
	chains  map[string]Chain
	timeout time.Duration // visibility timeout of the heads on the L2
}

func newRig(t *testing.T) *rig {
	w := newWorld()
	r := &rig{t: t, w: w, l1: newChain(w, false), l2: newChain(w, true), clk: newClock(), fees: &fees{}, obs: newObserved(),
		timeout: time.Hour}
	r.chains = map[string]Chain{"": r.l1, "l2": r.l2}
	return r
}

// agent is one head of the rig with its store and lineage.
type agent struct {
	h   *Head
	st  *memStore
	lin *lineageOf
	// snaps counts the snapshots verified, for fresh values.
	snaps int
}

// head makes the head of agent id, its record at name, on the L2 when
// onL2, with pointer_interval every.
func (r *rig) head(id, name string, onL2 bool, every time.Duration) *agent {
	r.t.Helper()
	cfg := Config{Agent: id, Name: name, Self: self, Interval: every, VisibilityTimeout: r.timeout, ConfirmPoll: 100 * time.Millisecond}
	deps := Deps{Reader: viaL1{r.w}, Owners: r.w, Accounts: r.fees, Now: r.clk.now}
	if onL2 {
		cfg.Target, deps.AtTarget, deps.Owners = "l2", onTarget{r.w}, nil
		r.w.mu.Lock()
		r.w.onL2[name] = true
		r.w.mu.Unlock()
	}
	r.w.mu.Lock()
	r.w.owners[name] = self
	r.w.mu.Unlock()
	a := &agent{h: NewHead(cfg, deps), st: &memStore{}, lin: &lineageOf{}}
	if err := a.h.Bind(a.st, a.lin, nil); err != nil {
		r.t.Fatal(err)
	}
	return a
}

// publisher schedules the heads on the rig's chains and clock.
func (r *rig) publisher(check time.Duration, heads ...*agent) *Publisher {
	hs := make([]*Head, len(heads))
	for i, a := range heads {
		hs[i] = a.h
	}
	return NewPublisher(PublisherConfig{Chains: r.chains, Probe: viaL1{r.w}, CheckEvery: check, Observer: r.obs, Now: r.clk.now}, hs)
}

// snapshot verifies a new snapshot of a and returns its value.
func (a *agent) snapshot(t *testing.T) string {
	t.Helper()
	a.snaps++
	v := a.h.cfg.Agent + "-blob-" + string(rune('A'+a.snaps-1))
	a.lin.add(v)
	if err := a.h.Verified(state.Snapshot{BlobID: v, BundleHash: "0x" + v, CreatedAt: time.Unix(int64(1700000000+a.snaps), 0)}); err != nil {
		t.Fatal(err)
	}
	return v
}

// publishOnce publishes a's pending pointer once through the rig's chains.
func (r *rig) publishOnce(a *agent) Result {
	r.t.Helper()
	res, ok := a.h.PublishOnce(r.t.Context(), r.chains)
	if !ok {
		r.t.Fatal("nothing pending")
	}
	return res
}

var errDown = fmt.Errorf("node down: %w", ens.ErrUnavailable)
