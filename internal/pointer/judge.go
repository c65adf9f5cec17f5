package pointer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hermesd/hermesd/internal/state"
)

// Result is what one publishing step did for one head: a write (and, for
// a record off L1, the confirmation read that follows it) or a
// confirmation alone.
type Result struct {
	Head    *Head
	Update  Update
	Target  string
	Since   time.Time // when the update became pending
	Outcome Outcome
	// Wrote says a write was tried in this step; Write is its result.
	// Without it the step only confirmed a value written before.
	Wrote bool
	Write Written
	// Seen is what L1 resolution showed of a value written off L1 that
	// it does not show yet.
	Seen string
	// Reads counts the L1 reads of a value written off L1 that did not
	// show it (persisted in state.Written; this one included when it did
	// not either).
	Reads int
	// Waited is how long Publish waited for L1 to show a value written
	// off L1 (PublishOptions.Visible).
	Waited time.Duration
	// Err says why a result is not Published (for logs); for Published it
	// is a failure to save the state, which is kept in memory and saved
	// again.
	Err error
	// confirm: the value was written off L1 and waits for its
	// confirmation read.
	confirm bool
}

// apply judges one write of h's pending pointer and records the outcome
// in the state (docs/design.md §7.3). A value written off L1 is left to
// confirm (res.confirm).
func (h *Head) apply(ctx context.Context, u Update, since time.Time, w Written) Result {
	res := Result{Head: h, Update: u, Target: h.cfg.Target, Since: since, Wrote: true, Write: w, Err: w.Err}
	if w.Fee != nil && h.deps.Accounts != nil {
		h.deps.Accounts.Paid(h.cfg.Agent, *w.Fee)
	}
	serr := h.update(func(st *state.AgentState) bool {
		switch {
		case w.Kind == Wrote, w.Kind == Conflict && w.Actual == u.Value:
			// (A conflict with our own value: an earlier write landed but
			// was not recorded.)
			res.Err = nil
			if h.cfg.Target != "" {
				res.Outcome, res.confirm = h.writtenIn(st, u, w)
				return true
			}
			res.Outcome = Published
			h.publishedIn(st, u.Value)
		case w.Kind == Conflict && (w.Actual == "" || h.own(st, w.Actual)):
			// A reorg, a reset chain or an old pointer put back (or a
			// record that is gone): not another writer. The newest
			// verified snapshot goes over it — unless the record names
			// it already, which a state that missed a save did not know.
			newest := h.settleOwnIn(st, w.Actual)
			if newest == w.Actual {
				res.Outcome, res.Err = Published, nil
				break
			}
			res.Outcome = Rollback
			res.Err = fmt.Errorf("%s names %q, an older snapshot of this agent (rolled back?); publishing the newest (%s) again",
				u.Name, w.Actual, newest)
		case w.Kind == Conflict:
			res.Outcome = Held
			h.holdIn(st, w.Actual, h.foreignReason(w.Actual))
		case w.Kind == NotAuthorized:
			res.Outcome = Unauthorized
			h.holdIn(st, u.Expected, fmt.Sprintf("the signer may no longer write %s (transferred to another owner?): %v; "+
				"snapshots continue, publishing is held", u.Name, w.Err))
		default:
			res.Outcome = Failed
			p := st.Pending
			if p == nil {
				return false
			}
			p.Attempts++
			if w.Err != nil {
				p.LastErr = w.Err.Error()
			}
			if w.Tx.Hash != "" {
				// Sent but not applied (reverted, or not mined in time:
				// it may still be): status names it.
				p.TxHash = w.Tx.Hash
			}
		}
		return true
	})
	if res.Outcome == Published {
		h.touch()
	}
	if res.Outcome == Published || res.Outcome == Rollback {
		res.Err = errors.Join(res.Err, serr)
	}
	if res.Outcome == Unauthorized && h.ownerMoved(ctx) {
		res.Outcome = Transferred
	}
	return res
}

// publishedIn records that the record now holds value, as L1 resolution
// shows it.
func (h *Head) publishedIn(st *state.AgentState, value string) {
	st.Published, st.PublishedAt = value, h.deps.Now()
	p := st.Pending
	switch {
	case p == nil:
	case p.Value == value:
		st.Pending = nil
	default:
		// A newer snapshot arrived meanwhile; it replaces the value just
		// published.
		p.Expected, p.Attempts, p.LastErr, p.Written, p.TxHash = value, 0, "", nil, ""
	}
}

// writtenIn records that u.Value is where the record lives (off L1): the
// pointer is written and waits for L1 resolution to show it, never
// written again. It reports whether there is a value to confirm: none
// when a newer snapshot arrived meanwhile, whose compare-and-set replaces
// the value just written.
func (h *Head) writtenIn(st *state.AgentState, u Update, w Written) (Outcome, bool) {
	p := st.Pending
	if p == nil || p.Value != u.Value {
		if p != nil {
			p.Expected, p.Written = u.Value, nil
		}
		return Lagging, false
	}
	wr := p.Written
	if wr == nil || wr.Value != u.Value || wr.Target != h.cfg.Target {
		wr = &state.Written{Value: u.Value, Target: h.cfg.Target, At: h.deps.Now()}
		p.Written = wr
	}
	if w.Tx.Hash != "" {
		wr.TxHash, wr.Block = w.Tx.Hash, w.Tx.Block
	}
	if w.Tx.ChainID != 0 {
		wr.ChainID = w.Tx.ChainID
	}
	return Lagging, true
}

// settleOwnIn records that the record holds v, a snapshot of the agent's
// lineage (or nothing), and makes the newest verified snapshot pending
// over it unless v is that snapshot. It returns the newest ("" when there
// is none).
//
// The newest is the state's last snapshot, or the brain's lock's when
// that records a newer one: the lock is written only after the upload was
// verified, so when a state save failed (and the process died before the
// save was retried) the lock still knows, and the record may well name
// that snapshot — our own write, not a rollback to publish over.
func (h *Head) settleOwnIn(st *state.AgentState, v string) (newest string) {
	h.catchUpIn(st)
	st.Published, st.PublishedAt = v, h.deps.Now()
	p := st.Pending
	if st.Last != nil {
		newest = st.Last.BlobID
	}
	switch {
	case newest == "":
		// No snapshot known: whatever is pending (nothing, normally)
		// goes over v.
		if p != nil {
			newest = p.Value
			p.Expected = v
		}
	case newest == v:
		st.Pending = nil
	case p != nil && p.Value == newest:
		p.Expected = v
	default:
		since := h.deps.Now()
		if p != nil {
			since = p.Since // the age of the oldest unpublished change
		}
		st.Pending = &state.Pointer{Value: newest, Expected: v, Since: since, Target: h.cfg.Target}
	}
	return newest
}

// visibilityIn judges a pending pointer written where the record lives
// (p.Written) against what L1 resolution showed (seen, or the error of
// reading it).
func (h *Head) visibilityIn(st *state.AgentState, p *state.Pointer, seen string, seenErr error) (Outcome, error) {
	w := p.Written
	w.Reads++
	w.Seen, w.SeenErr = seen, ""
	if seenErr != nil {
		w.SeenErr = seenErr.Error()
	}
	if h.deps.Now().Sub(w.At) < h.cfg.VisibilityTimeout {
		return Lagging, nil
	}
	err := fmt.Errorf("%s: %s, not visible from L1 after %s (visibility_timeout): L1 resolution %s; the pointer stays pending",
		h.cfg.Name, describeWritten(w), h.cfg.VisibilityTimeout, h.describeSeen(st, w))
	p.Attempts++
	p.LastErr = err.Error()
	return NotVisible, err
}

// Confirm reads the value written where the record lives back through L1
// resolution, as a fresh machine would: published when L1 shows it, else
// written still (Lagging, or NotVisible past the visibility timeout). It
// is a read: it never sends a transaction.
func (h *Head) Confirm(ctx context.Context) Result {
	p, ok := h.Pending()
	if !ok || !p.AwaitingVisibility() {
		return Result{Head: h, Target: h.cfg.Target, Outcome: OK}
	}
	res := Result{Head: h, Update: Update{Name: p.Name, Value: p.Value, Expected: p.Expected}, Target: h.cfg.Target, Since: p.Since}
	if h.deps.Reader == nil {
		res.Outcome, res.Err = Failed, errors.New("no chain to read the record through")
		return res
	}
	v, found, err := h.deps.Reader.Read(ctx, h.cfg.Name)
	if err == nil && found {
		res.Seen = v
	}
	serr := h.update(func(st *state.AgentState) bool {
		q := st.Pending
		if q == nil || q.Value != p.Value || q.Written == nil || q.Written.Value != q.Value {
			res.Outcome = Lagging // changed meanwhile: the next step looks again
			return false
		}
		res.Write.Tx.ChainID = q.Written.ChainID
		if err == nil && v == q.Value {
			res.Reads = q.Written.Reads
			res.Outcome = Published
			h.publishedIn(st, v)
			return true
		}
		res.Outcome, res.Err = h.visibilityIn(st, q, res.Seen, err)
		res.Reads = q.Written.Reads
		return true
	})
	if res.Outcome == Published {
		h.touch()
	}
	res.Err = errors.Join(res.Err, serr)
	return res
}
