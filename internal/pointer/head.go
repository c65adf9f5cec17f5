package pointer

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/state"
)

// Store is the state file a head persists in: the agent's state.json,
// whose owner (the agent) also keeps its own fields there. Update runs fn
// on the state under the owner's lock; when fn reports a change the state
// is saved, and Update returns the save's error (a failed save is kept in
// memory and retried by the owner). fn must not call back into the Store.
type Store interface {
	Update(fn func(st *state.AgentState) (changed bool)) error
}

// Lineage says which values are the agent's own, as the brain's lock
// records them. Its methods are called inside Store.Update: they must not
// take the Store's lock.
type Lineage interface {
	// Knows reports whether value names a snapshot of the agent's lineage.
	Knows(value string) bool
	// Newest is the newest verified snapshot the lock records (false when
	// it records none): a snapshot whose state save was lost.
	Newest() (state.Snapshot, bool)
}

// Reader reads an agent's record; ok is false when the name has none.
type Reader interface {
	Read(ctx context.Context, name string) (value string, ok bool, err error)
}

// Owners tells who owns a name in the ENS registry.
type Owners interface {
	Owner(ctx context.Context, name string) (common.Address, error)
}

// Accounts is told every paid transaction (the cost ledger, which the
// metrics read): the one account of what pointers cost. It must not block
// for long.
type Accounts interface {
	Paid(agent string, fee Fee)
}

// Fee is one update's share of a mined transaction: of n updates, the gas
// used split equally with the remainder one unit each to the first, so
// that the shares add up to the receipt's gas used.
type Fee struct {
	ChainID uint64
	Gas     uint64
	// GasPrice is the transaction's effective gas price (nil: not known).
	GasPrice *big.Int
	// Share is this update's part of the transaction (1/n).
	Share float64
}

// Config is one agent's head.
type Config struct {
	Agent string
	// Name is the agent's normalized ENS name; "" keeps the head in the
	// state directory only.
	Name string
	// Target is where the record lives ("" = the name's own L1 resolver).
	Target string
	// Self is this operator's chain address (zero when not loaded): a
	// name owned by another address was transferred.
	Self common.Address
	// Interval is the least time between two writes (pointer_interval).
	Interval time.Duration
	// VisibilityTimeout bounds how long a value written off L1 may take to
	// show through L1 resolution before it is an error.
	VisibilityTimeout time.Duration
	// ConfirmPoll is how soon a value written off L1 is first confirmed
	// again (the target chain's poll interval); later ones back off.
	ConfirmPoll time.Duration
}

// Deps are what a head reads and reports to; every field may be nil.
type Deps struct {
	// Reader resolves the name on L1, as a fresh machine does.
	Reader Reader
	// AtTarget reads the record where it lives, when that is not on L1:
	// what a hold is resolved against and what tells a lagging gateway
	// from a rollback. nil: Reader.
	AtTarget Reader
	// Owners reads the registry owner of the name (transfers); nil where
	// the L1 owner says nothing about who writes the record.
	Owners Owners
	// Router says where L1 resolution reaches the name from; nil: the
	// route is not checked before a write.
	Router   Router
	Accounts Accounts
	// Fleet, in a fleet, keeps the agent's fleet head: written on every
	// verified snapshot (SyncFleet retries a failed write).
	Fleet Fleet
	// Gate, when set, says whether the head may write its places now
	// (the node owns the agent and is not fenced): a record write it
	// refuses is not sent.
	Gate func() error
	Log  *slog.Logger
	Now  func() time.Time
}

// Head is one agent's head and its places. Create it with NewHead and
// Bind it to the agent's state before use.
type Head struct {
	cfg     Config
	deps    Deps
	log     *slog.Logger
	store   Store
	lineage Lineage
	readyFn func() bool
	wake    atomic.Pointer[func()] // the publisher's lane

	mu        sync.Mutex
	checkedAt time.Time // the record last read back or written
	routeOK   bool      // the route was checked and agrees (routed)
	misroute  string    // what the last route check found, when it disagreed

	fleet fleetPlace
}

// NewHead returns agent cfg.Agent's head.
func NewHead(cfg Config, deps Deps) *Head {
	if deps.Now == nil {
		deps.Now = time.Now
	}
	log := deps.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Head{cfg: cfg, deps: deps, log: log.With("agent", cfg.Agent)}
}

// Bind attaches the agent's state, its lineage, and what says whether
// the agent is in service (its record is read back only then; nil:
// always). A pending pointer recorded for another
// target (ens.records changed) is written where the record lives now: what
// that contract holds is unknown until the compare-and-set reads it; a
// value of the lineage there (or none) is taken over, anything else holds.
func (h *Head) Bind(s Store, l Lineage, ready func() bool) error {
	h.store, h.lineage, h.readyFn = s, l, ready
	return h.store.Update(func(st *state.AgentState) bool {
		p := st.Pending
		if p == nil || p.Target == h.cfg.Target {
			return false
		}
		h.log.Warn("the agent's record moved; the pending pointer is written where it lives now",
			"from", targetName(p.Target), "to", targetName(h.cfg.Target))
		p.Target, p.Written = h.cfg.Target, nil
		return true
	})
}

// Config returns the head's settings.
func (h *Head) Config() Config { return h.cfg }

// Agent is the agent's id.
func (h *Head) Agent() string { return h.cfg.Agent }

// ready reports whether the agent is in service.
func (h *Head) ready() bool { return h.readyFn == nil || h.readyFn() }

// update runs fn on the state (see Store).
func (h *Head) update(fn func(st *state.AgentState) bool) error { return h.store.Update(fn) }

// view runs fn on the state without saving it.
func (h *Head) view(fn func(st *state.AgentState)) {
	h.store.Update(func(st *state.AgentState) bool {
		fn(st)
		return false
	})
}

// OnPending sets who is woken when the head has a pointer to publish or
// confirm (the publisher's lane sets itself; one at a time).
func (h *Head) OnPending(f func()) { h.wake.Store(&f) }

// notify wakes the publisher's lane of this head, if one runs.
func (h *Head) notify() {
	if f := h.wake.Load(); f != nil {
		(*f)()
	}
}

// touch records that the record was just read back or written.
func (h *Head) touch() {
	h.mu.Lock()
	h.checkedAt = h.deps.Now()
	h.mu.Unlock()
}

// CheckedAt is when the record was last read back from the chain or
// written there (zero: not since this process started).
func (h *Head) CheckedAt() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.checkedAt
}

// Pending is a verified snapshot waiting to be published.
type Pending struct {
	Agent, Name, Value, Expected string
	Since                        time.Time
	Attempts                     int
	// Target is where the record is written; Written, when set, says
	// Value is there already and waits to be visible through L1.
	Target  string
	Written *state.Written
}

// AwaitingVisibility reports whether the pointer was written where the
// record lives and only waits to be visible through L1 resolution: it is
// confirmed, never written again.
func (p Pending) AwaitingVisibility() bool { return p.Written != nil && p.Written.Value == p.Value }

// Pending returns the pointer the agent wants published, if any: none for
// an agent without a name, held or transferred.
func (h *Head) Pending() (Pending, bool) {
	var pp Pending
	ok := false
	h.view(func(st *state.AgentState) {
		p := st.Pending
		if p == nil || h.cfg.Name == "" || st.Hold != nil || st.Transferred != nil {
			return
		}
		ok = true
		pp = Pending{Agent: h.cfg.Agent, Name: h.cfg.Name, Value: p.Value, Expected: p.Expected, Since: p.Since,
			Attempts: p.Attempts, Target: h.cfg.Target}
		if p.Written != nil {
			w := *p.Written
			pp.Written = &w
		}
	})
	return pp, ok
}

// Hold returns why publishing is held, if it is.
func (h *Head) Hold() *state.Hold {
	var out *state.Hold
	h.view(func(st *state.AgentState) {
		if st.Hold != nil {
			c := *st.Hold
			out = &c
		}
	})
	return out
}

// Transferred returns the record of the agent's handover to a new owner,
// if it was handed over.
func (h *Head) Transferred() *state.Transferred {
	var out *state.Transferred
	h.view(func(st *state.AgentState) {
		if st.Transferred != nil {
			c := *st.Transferred
			out = &c
		}
	})
	return out
}

// own reports whether v is a snapshot of the agent's lineage: one the
// state names or the brain's lock records (headref.Same: a value without
// its head's digest, written before heads carried theirs, is the head of
// that id).
func (h *Head) own(st *state.AgentState, v string) bool {
	if v == "" {
		return false
	}
	if (st.Last != nil && headref.Same(st.Last.BlobID, v)) || (st.Pending != nil && headref.Same(st.Pending.Value, v)) || headref.Same(st.Published, v) {
		return true
	}
	return h.lineage != nil && h.lineage.Knows(v)
}

// atTarget reads the record where it lives.
func (h *Head) atTarget() Reader {
	if h.deps.AtTarget != nil {
		return h.deps.AtTarget
	}
	return h.deps.Reader
}

// targetName names a target for a message.
func targetName(target string) string {
	if target == "" {
		return "the name's L1 resolver"
	}
	return "ens.records " + target
}

// Note describes, for status, a pointer written where the record lives
// that L1 resolution does not show yet ("" when there is none). st is
// read as given (a copy, or under the Store's lock).
func (h *Head) Note(st *state.AgentState) string {
	p := st.Pending
	if p == nil || p.Written == nil || p.Written.Value != p.Value {
		return ""
	}
	w := p.Written
	wait := h.deps.Now().Sub(w.At).Round(time.Second)
	note := fmt.Sprintf("%s %s ago, not yet visible from L1", describeWritten(w), wait)
	if w.Seen != "" || w.SeenErr != "" {
		note += " (L1 resolution " + h.describeSeen(st, w) + ")"
	}
	if wait >= h.cfg.VisibilityTimeout {
		return note + fmt.Sprintf("; past visibility_timeout %s", h.cfg.VisibilityTimeout)
	}
	return note + fmt.Sprintf("; waiting up to %s", h.cfg.VisibilityTimeout)
}

// describeWritten says where and how a value was written.
func describeWritten(w *state.Written) string {
	s := fmt.Sprintf("written on chain %d", w.ChainID)
	if w.Target != "" {
		s = fmt.Sprintf("written to ens.records %s (chain %d)", w.Target, w.ChainID)
	}
	if w.TxHash != "" {
		s += fmt.Sprintf(" in tx %s (block %d)", w.TxHash, w.Block)
	}
	return s
}

// describeSeen says what L1 resolution showed of a written pointer.
func (h *Head) describeSeen(st *state.AgentState, w *state.Written) string {
	switch {
	case w.SeenErr != "":
		return "could not be read: " + w.SeenErr
	case w.Seen == "":
		return "shows no record"
	case h.own(st, w.Seen):
		return fmt.Sprintf("still shows %s, an older snapshot of this agent (the gateway lags)", w.Seen)
	}
	return fmt.Sprintf("shows %s, which is not a snapshot of this agent: does the name's L1 resolver reach ens.records %s?", w.Seen, w.Target)
}
