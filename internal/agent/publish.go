package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
)

// PointerUpdate is one compare-and-set of an agent-snapshot record.
type PointerUpdate struct {
	Name     string // normalized ENS name
	Value    string // the blob id to publish
	Expected string // what the record must hold now ("" = no record)
}

// WriteKind classifies what happened to one update.
type WriteKind int

const (
	// Written: the record holds Value now (Unchanged: it already did).
	Written WriteKind = iota
	// Conflicted: the record held WriteResult.Actual, not Expected;
	// nothing was sent for this name.
	Conflicted
	// Unauthorized: the signer may not write the name (it was moved to
	// another owner, or the resolver's approval was withdrawn).
	Unauthorized
	// Failed: anything else (the chain unreachable, a fee cap, a
	// timeout); worth retrying later.
	Failed
)

// WriteResult is the outcome of one update.
type WriteResult struct {
	Kind      WriteKind
	Actual    string // Conflicted: the record's value
	TxHash    string
	GasUsed   uint64 // this update's share of its transaction
	Unchanged bool   // Written without a transaction
	Err       error  // every kind but Written
}

// PointerWriter publishes records by compare-and-set. WritePointers
// returns one result per update, in order; it splits the updates into
// transactions as the chain's limits require, the first ones first.
type PointerWriter interface {
	WritePointers(ctx context.Context, ups []PointerUpdate) []WriteResult
}

// PendingPointer is a verified snapshot waiting to be published.
type PendingPointer struct {
	Agent    string
	Name     string
	Value    string
	Expected string
	Since    time.Time
	Attempts int
}

// Pending returns the pointer this agent wants published, if any. An agent
// whose publishing is held returns none.
func (a *Agent) Pending() (PendingPointer, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.st.Pending
	if p == nil || a.cfg.ENSName == "" || a.st.Hold != nil || a.st.Transferred != nil {
		return PendingPointer{}, false
	}
	return PendingPointer{
		Agent:    a.cfg.ID,
		Name:     a.cfg.ENSName,
		Value:    p.Value,
		Expected: p.Expected,
		Since:    p.Since,
		Attempts: p.Attempts,
	}, true
}

// PendingSince reports since when the oldest unpublished snapshot has
// waited (zero when nothing is pending).
func (a *Agent) PendingSince() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.st.Pending == nil {
		return time.Time{}
	}
	return a.st.Pending.Since
}

// Hold returns why publishing is held, if it is.
func (a *Agent) Hold() *state.Hold {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.st.Hold == nil {
		return nil
	}
	h := *a.st.Hold
	return &h
}

// Outcome of publishing (or checking) one agent's pointer.
type PublishOutcome string

const (
	OutcomePublished    PublishOutcome = "published"    // the record names the newest snapshot
	OutcomeRollback     PublishOutcome = "rollback"     // the record named an older snapshot of ours; republish
	OutcomeHeld         PublishOutcome = "held"         // another writer: held until an operator decides
	OutcomeUnauthorized PublishOutcome = "unauthorized" // the signer may not write the name: held
	OutcomeFailed       PublishOutcome = "failed"       // retry later
	OutcomeOK           PublishOutcome = "ok"           // CheckPointer: nothing to do
)

// PublishResult is what PublishOnce did for one agent.
type PublishResult struct {
	Agent   *Agent
	Update  PointerUpdate
	Since   time.Time // when the update became pending
	Outcome PublishOutcome
	Write   WriteResult
	// Err says why a result is not OutcomePublished (for logs); for
	// OutcomePublished it is a failure to save the state, which is kept
	// in memory and saved again.
	Err error
}

// PublishOnce publishes the pending pointers of agents through w (their
// order is the order of urgency) and records each outcome in its agent's
// state. The daemon's publisher and the drill both publish through it.
func PublishOnce(ctx context.Context, w PointerWriter, agents []*Agent) []PublishResult {
	var (
		ups  []PointerUpdate
		due  []*Agent
		ppts []PendingPointer
	)
	for _, a := range agents {
		p, ok := a.Pending()
		if !ok {
			continue
		}
		ups = append(ups, PointerUpdate{Name: p.Name, Value: p.Value, Expected: p.Expected})
		due = append(due, a)
		ppts = append(ppts, p)
	}
	if len(ups) == 0 {
		return nil
	}
	results := w.WritePointers(ctx, ups)
	out := make([]PublishResult, len(due))
	for i, a := range due {
		r := WriteResult{Kind: Failed, Err: errors.New("no result from the pointer writer")}
		if i < len(results) {
			r = results[i]
		}
		out[i] = a.recordWrite(ups[i], ppts[i].Since, r)
		if out[i].Outcome == OutcomeUnauthorized && a.checkOwner(ctx) {
			out[i].Outcome = OutcomeTransferred
		}
	}
	return out
}

// recordWrite turns one write result into the agent's new state.
func (a *Agent) recordWrite(u PointerUpdate, since time.Time, r WriteResult) PublishResult {
	res := PublishResult{Agent: a, Update: u, Since: since, Write: r, Err: r.Err}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case r.Kind == Written, r.Kind == Conflicted && r.Actual == u.Value:
		// (A conflict with our own value: an earlier write landed but was
		// not recorded — the publisher recognises its own blob.)
		res.Outcome, res.Err = OutcomePublished, a.publishedLocked(u.Value, r.TxHash)
	case r.Kind == Conflicted && (r.Actual == "" || a.ownBlobLocked(r.Actual)):
		// A reorg, a reset chain or an old pointer put back (or a record
		// that is gone): not another writer. The newest verified snapshot
		// goes over it — unless the record already names it, which a
		// state that missed a save did not know.
		newest, err := a.settleOwnLocked(r.Actual)
		if newest == r.Actual {
			res.Outcome, res.Err = OutcomePublished, err
			break
		}
		res.Outcome = OutcomeRollback
		res.Err = errors.Join(fmt.Errorf("%s names %q, an older snapshot of this agent (rolled back?); publishing the newest (%s) again",
			u.Name, r.Actual, newest), err)
	case r.Kind == Conflicted:
		res.Outcome = OutcomeHeld
		a.holdLocked(r.Actual, fmt.Sprintf("%s names %s, which is not a snapshot of this agent: another writer? "+
			"resolve with 'hermesd pointer adopt %s' (take its snapshot, set the local brain aside) or "+
			"'hermesd pointer override %s' (publish ours)", u.Name, r.Actual, a.cfg.ID, a.cfg.ID))
	case r.Kind == Unauthorized:
		res.Outcome = OutcomeUnauthorized
		a.holdLocked(u.Expected, fmt.Sprintf("the signer may no longer write %s (transferred to another owner?): %v; "+
			"snapshots continue, publishing is held", u.Name, r.Err))
	default:
		res.Outcome = OutcomeFailed
		if a.st.Pending != nil {
			a.st.Pending.Attempts++
			if r.Err != nil {
				a.st.Pending.LastErr = r.Err.Error()
			}
			a.saveStateLocked()
		}
	}
	return res
}

// publishedLocked records that the chain now holds value.
func (a *Agent) publishedLocked(value, txHash string) error {
	a.st.Published = value
	a.st.PublishedAt = a.deps.Now()
	if p := a.st.Pending; p != nil {
		if p.Value == value {
			a.st.Pending = nil
		} else {
			// A newer snapshot arrived meanwhile; it replaces the value
			// just published.
			p.Expected, p.Attempts, p.LastErr = value, 0, ""
		}
	}
	_ = txHash
	return a.saveStateLocked()
}

func (a *Agent) holdLocked(value, reason string) {
	if a.st.Hold == nil || a.st.Hold.Value != value {
		a.st.Hold = &state.Hold{Value: value, Reason: reason, Since: a.deps.Now()}
	}
	a.saveStateLocked()
}

// CheckPointer reads the agent's record and repairs what it can: our own
// write that was not recorded is recorded; a record that went back to an
// older snapshot of this agent (a rollback) gets the newest verified
// snapshot pending again; a record foreign to the lineage holds publishing.
// The daemon calls it periodically and after the chain comes back.
func (a *Agent) CheckPointer(ctx context.Context) (PublishOutcome, error) {
	if a.cfg.ENSName == "" || a.deps.Pointer == nil {
		return OutcomeOK, nil
	}
	if a.Transferred() != nil {
		return OutcomeTransferred, nil
	}
	v, ok, err := a.deps.Pointer.Read(ctx, a.cfg.ENSName)
	if err != nil {
		return OutcomeFailed, fmt.Errorf("read ENS pointer of %s: %w", a.cfg.ENSName, err)
	}
	if !ok {
		v = ""
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.st.Pending
	switch {
	case a.st.Hold != nil:
		a.mu.Unlock()
		transferred := a.checkOwner(ctx)
		a.mu.Lock()
		if transferred {
			return OutcomeTransferred, nil
		}
		if a.st.Hold == nil {
			return OutcomeOK, nil
		}
		return OutcomeHeld, errors.New(a.st.Hold.Reason)
	case p != nil && v == p.Value:
		return OutcomePublished, a.publishedLocked(v, "")
	case v == a.st.Published && (v != "" || !a.st.PublishedAt.IsZero()):
		return OutcomeOK, nil
	case v == "" && a.st.Published == "":
		// Never published, nothing on chain: the first write creates it.
		a.st.PublishedAt = a.deps.Now()
		return OutcomeOK, a.saveStateLocked()
	case v != "" && !a.ownBlobLocked(v):
		a.mu.Unlock()
		transferred := a.checkOwner(ctx)
		a.mu.Lock()
		if transferred {
			return OutcomeTransferred, nil
		}
		a.holdLocked(v, fmt.Sprintf("%s names %s, which is not a snapshot of this agent: another writer? "+
			"resolve with 'hermesd pointer adopt %s' (take its snapshot, set the local brain aside) or "+
			"'hermesd pointer override %s' (publish ours)", a.cfg.ENSName, v, a.cfg.ID, a.cfg.ID))
		return OutcomeHeld, errors.New(a.st.Hold.Reason)
	}
	// The record names a snapshot of ours other than the one we last
	// published, or none while we published one, or we do not know what
	// we published (a new state directory): the newest verified snapshot
	// goes over it unless it is that snapshot.
	first := a.st.Published == "" && a.st.PublishedAt.IsZero()
	newest, err := a.settleOwnLocked(v)
	if newest == v || newest == "" {
		return OutcomeOK, err
	}
	if a.deps.Publisher != nil {
		defer a.deps.Publisher.Notify()
	}
	if first {
		return OutcomeOK, err
	}
	return OutcomeRollback, errors.Join(fmt.Errorf("%s names %q, an older snapshot of this agent (rolled back?); the newest (%s) is pending again", a.cfg.ENSName, v, newest), err)
}

// settleOwnLocked records that the record holds v, a snapshot of this
// agent's lineage (or nothing), and makes the newest verified snapshot
// pending over it unless v is that snapshot. It returns the newest ("" when
// there is none) and the error of saving the state.
//
// The newest is the state's last snapshot, or the brain's lock when that
// records a newer one: Take writes the lock only after the upload was
// verified, so when a state save failed (and the process died before the
// save was retried) the lock still knows, and the record may well name
// that snapshot — our own write, not a rollback to publish over.
func (a *Agent) settleOwnLocked(v string) (newest string, err error) {
	a.catchUpLocked()
	a.st.Published, a.st.PublishedAt = v, a.deps.Now()
	p := a.st.Pending
	if a.st.Last != nil {
		newest = a.st.Last.BlobID
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
		a.st.Pending = nil
	case p != nil && p.Value == newest:
		p.Expected = v
	default:
		since := a.deps.Now()
		if p != nil {
			since = p.Since // the age of the oldest unpublished change
		}
		a.st.Pending = &state.Pointer{Value: newest, Expected: v, Since: since}
	}
	return newest, a.saveStateLocked()
}

// catchUpLocked moves the state's last snapshot forward to the newest one
// the brain's lock records, when the state's is an older entry of the same
// lineage (or the state knows none). It reports whether it did.
func (a *Agent) catchUpLocked() bool {
	lock, err := bundlelock.Read(filepath.Join(a.cfg.BrainDir, bundlelock.FileName))
	if err != nil {
		return false
	}
	es := lock.Lineage()
	if len(es) == 0 || es[0].BlobID == "" || es[0].BlobID != lock.BlobID() {
		return false
	}
	e := es[0]
	if l := a.st.Last; l != nil {
		if l.BlobID == e.BlobID || !slices.ContainsFunc(es[1:], func(o bundlelock.LineageEntry) bool { return o.BlobID == l.BlobID }) {
			return false
		}
	}
	var version int64
	if lock.BundleHash() == e.BundleHash {
		version = lock.Version()
	}
	a.log.Warn("the agent state missed a snapshot the brain's lock records; catching up", "blob", e.BlobID, "bundle_hash", e.BundleHash)
	a.st.Last = &state.Snapshot{
		BlobID:     e.BlobID,
		BundleHash: e.BundleHash,
		Version:    version,
		Size:       e.Size,
		EndEpoch:   e.EndEpoch,
		CreatedAt:  time.UnixMilli(e.CreatedAt),
	}
	switch p := a.st.Pending; {
	case p != nil && p.Value != e.BlobID:
		p.Value, p.Attempts, p.LastErr = e.BlobID, 0, ""
	case p == nil && a.cfg.ENSName != "" && e.BlobID != a.st.Published && (a.st.Published != "" || !a.st.PublishedAt.IsZero()):
		// The lost save was the one that would have made this snapshot
		// pending: without it the record would stay on the older one
		// until the brain changed again. (With nothing known of the
		// record, reconcile's read decides.)
		a.st.Pending = &state.Pointer{Value: e.BlobID, Expected: a.st.Published, Since: time.UnixMilli(e.CreatedAt)}
	}
	return true
}

// ErrNotHeld means there is no hold to resolve.
var ErrNotHeld = errors.New("publishing is not held")

// Override resolves a hold by publishing ours: the newest verified snapshot
// becomes pending over whatever the record holds now.
func (a *Agent) Override(ctx context.Context) error {
	a.syncMu.Lock()
	defer a.syncMu.Unlock()
	var current string
	if a.deps.Pointer != nil {
		v, ok, err := a.deps.Pointer.Read(ctx, a.cfg.ENSName)
		if err != nil {
			return fmt.Errorf("read ENS pointer of %s: %w", a.cfg.ENSName, err)
		}
		if ok {
			current = v
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.st.Hold == nil {
		return ErrNotHeld
	}
	if a.st.Last == nil {
		return errors.New("no verified snapshot to publish yet")
	}
	a.st.Hold = nil
	a.st.Published = current
	if a.st.Pending == nil || a.st.Pending.Value != a.st.Last.BlobID {
		a.st.Pending = &state.Pointer{Value: a.st.Last.BlobID, Since: a.deps.Now()}
	}
	a.st.Pending.Expected = current
	a.log.Warn("publishing resumed: ours overrides the other writer's snapshot", "name", a.cfg.ENSName,
		"replacing", current, "with", a.st.Last.BlobID)
	if a.deps.Publisher != nil {
		defer a.deps.Publisher.Notify()
	}
	return a.saveStateLocked()
}

// Adopt resolves a hold by taking the other writer's snapshot: the brain is
// moved aside (to a sibling directory named in the result), the snapshot
// the record names is restored and verified in its place, and publishing
// resumes from it. If the restore fails, the brain is put back.
func (a *Agent) Adopt(ctx context.Context) (aside string, err error) {
	a.syncMu.Lock()
	defer a.syncMu.Unlock()
	if a.Hold() == nil {
		return "", ErrNotHeld
	}
	if a.deps.Pointer == nil {
		return "", errors.New("the agent has no ENS name")
	}
	v, ok, err := a.deps.Pointer.Read(ctx, a.cfg.ENSName)
	if err != nil {
		return "", fmt.Errorf("read ENS pointer of %s: %w", a.cfg.ENSName, err)
	}
	if !ok {
		return "", fmt.Errorf("%s has no agent-snapshot record to adopt", a.cfg.ENSName)
	}
	if _, err := os.Lstat(a.cfg.BrainDir); err == nil {
		if aside, err = a.setAside(); err != nil {
			return "", err
		}
	}
	r, err := a.deps.Pipeline.RestoreWith(ctx, v, a.cfg.BrainDir, snapshot.RestoreOptions{})
	if err != nil {
		if aside != "" {
			os.RemoveAll(a.cfg.BrainDir) // nothing or an empty directory
			if perr := os.Rename(aside, a.cfg.BrainDir); perr != nil {
				return "", errors.Join(fmt.Errorf("restore %s: %w", v, err),
					fmt.Errorf("CANNOT PUT THE BRAIN BACK; it is at %s: %w", aside, perr))
			}
		}
		return "", fmt.Errorf("restore %s: %w", v, err)
	}
	a.noteRestore(r)
	a.mu.Lock()
	a.st.Hold, a.st.Pending = nil, nil
	a.mu.Unlock()
	if err := a.afterRestore(ctx, r, true); err != nil {
		return aside, err
	}
	res, err := a.cache.Rescan(ctx)
	if err != nil {
		return aside, fmt.Errorf("hash adopted brain: %w", err)
	}
	a.noteHash(res)
	select {
	case a.rewatch <- struct{}{}:
	default:
	}
	a.log.Warn("adopted the other writer's snapshot; the previous brain was set aside",
		"name", a.cfg.ENSName, "blob", v, "aside", filepath.Base(aside))
	return aside, nil
}

// maxAsideTries bounds the search for a free set-aside name.
const maxAsideTries = 100

// setAside renames the brain directory to a free sibling name that says
// when it was set aside (two adopts within a second get -2, -3, ...).
func (a *Agent) setAside() (string, error) {
	base := fmt.Sprintf("%s.set-aside-%s", a.cfg.BrainDir, a.deps.Now().UTC().Format("20060102T150405Z"))
	for n := 1; n <= maxAsideTries; n++ {
		aside := base
		if n > 1 {
			aside = fmt.Sprintf("%s-%d", base, n)
		}
		if _, err := os.Lstat(aside); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := os.Rename(a.cfg.BrainDir, aside); err != nil {
			return "", fmt.Errorf("set the brain aside: %w", err)
		}
		return aside, nil
	}
	return "", fmt.Errorf("set the brain aside: %s and %d more names are taken", base, maxAsideTries-1)
}

// SetPublisher sets who is notified of new pending pointers. Call it before
// Run.
func (a *Agent) SetPublisher(n Notifier) { a.deps.Publisher = n }
