package pointer

import (
	"context"
	"errors"
	"fmt"

	"github.com/hermesd/hermesd/internal/state"
)

// checkNext is what a read-back still has to find out after its first
// judgement, outside the Store's lock (it reads the chain).
type checkNext int

const (
	checkDone    checkNext = iota
	checkHeld              // held: has the name changed owner?
	checkForeign           // a value not of the lineage: another owner, or another writer
	checkOwn               // a value of the lineage other than the one published
)

// Check reads the record back and repairs what it can: our own write that
// was not recorded is recorded; a record that went back to an older
// snapshot of this agent (a rollback) gets the newest verified snapshot
// pending again; a record foreign to the lineage holds publishing. The
// publisher calls it every check interval and after the chain comes back.
func (h *Head) Check(ctx context.Context) (Outcome, error) {
	if h.cfg.Name == "" || h.deps.Reader == nil {
		return OK, nil
	}
	if h.Transferred() != nil {
		return Transferred, nil
	}
	// The record may have moved since the route was checked: the next
	// write checks it again.
	h.recheckRoute()
	v, ok, err := h.deps.Reader.Read(ctx, h.cfg.Name)
	if err != nil {
		return Failed, fmt.Errorf("read ENS pointer of %s: %w", h.cfg.Name, err)
	}
	if !ok {
		v = ""
	}
	h.touch()
	var (
		j         judgement
		first     bool
		published string
	)
	serr := h.update(func(st *state.AgentState) bool {
		first = st.Published == "" && st.PublishedAt.IsZero()
		published = st.Published
		j = h.judgeRead(st, v)
		return j.changed
	})
	switch j.next {
	case checkHeld:
		return h.checkHeld(ctx)
	case checkForeign:
		return h.checkForeign(ctx, v)
	case checkOwn:
		return h.checkOwn(ctx, v, first, published)
	}
	return j.out, errors.Join(j.err, serr)
}

// judgement is a read-back's first verdict.
type judgement struct {
	out     Outcome
	err     error
	next    checkNext
	changed bool // the state was changed (to be saved)
}

// judgeRead judges what the read-back found, v, against the state, and
// records what needs no more reading.
func (h *Head) judgeRead(st *state.AgentState, v string) judgement {
	p := st.Pending
	switch {
	case st.Hold != nil:
		return judgement{next: checkHeld}
	case p != nil && v == p.Value:
		h.publishedIn(st, v)
		return judgement{out: Published, changed: true}
	case p != nil && p.Written != nil && p.Written.Value == p.Value:
		// Written where the record lives, not visible from L1 yet: the
		// gateway lags. Whatever L1 shows meanwhile is neither a rollback
		// nor another writer (docs/design.md §7.2).
		out, err := h.visibilityIn(st, p, v, nil)
		return judgement{out: out, err: err, changed: true}
	case v == st.Published && (v != "" || !st.PublishedAt.IsZero()):
		return judgement{out: OK}
	case p != nil && v != "" && v == p.Expected:
		// The record holds what the pending pointer will replace: in
		// view now, nothing to repair.
		st.Published, st.PublishedAt = v, h.deps.Now()
		return judgement{out: OK, changed: true}
	case v == "" && st.Published == "":
		// Never published, nothing on chain: the first write creates it.
		st.PublishedAt = h.deps.Now()
		return judgement{out: OK, changed: true}
	case v != "" && !h.own(st, v):
		return judgement{next: checkForeign}
	}
	return judgement{next: checkOwn}
}

func (h *Head) checkHeld(ctx context.Context) (Outcome, error) {
	if h.ownerMoved(ctx) {
		return Transferred, nil
	}
	hold := h.Hold()
	if hold == nil {
		return OK, nil
	}
	return Held, errors.New(hold.Reason)
}

func (h *Head) checkForeign(ctx context.Context, v string) (Outcome, error) {
	if h.ownerMoved(ctx) {
		return Transferred, nil
	}
	var reason string
	h.update(func(st *state.AgentState) bool {
		h.holdIn(st, v, h.foreignReason(v))
		reason = st.Hold.Reason
		return true
	})
	return Held, errors.New(reason)
}

// checkOwn handles a record naming a snapshot of ours other than the one
// last published, or none while we published one, or a state that does not
// know what was published (a new state directory): the newest verified
// snapshot goes over it unless it is that snapshot.
func (h *Head) checkOwn(ctx context.Context, v string, first bool, published string) (Outcome, error) {
	if !first && published != "" && h.deps.AtTarget != nil {
		// The record lives on another chain: when it still holds what we
		// published, L1 shows an older value because the gateway lags
		// behind it, not because the record went back.
		where, ok, rerr := h.deps.AtTarget.Read(ctx, h.cfg.Name)
		still := false
		h.view(func(st *state.AgentState) { still = st.Published == published })
		if rerr == nil && ok && where == published && still {
			h.log.Debug("L1 resolution lags behind the record where it lives", "l1_shows", v, "record", where)
			return Lagging, nil
		}
	}
	var newest string
	serr := h.update(func(st *state.AgentState) bool {
		newest = h.settleOwnIn(st, v)
		return true
	})
	if newest == v || newest == "" {
		return OK, serr
	}
	h.notify()
	if first {
		return OK, serr
	}
	return Rollback, errors.Join(fmt.Errorf("%s names %q, an older snapshot of this agent (rolled back?); the newest (%s) is pending again",
		h.cfg.Name, v, newest), serr)
}
