package agent

import (
	"context"
	"errors"
	"fmt"
	"math/big"
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
	// Target is the ens.records id of the contract that holds the record
	// ("" = the name's own resolver on L1).
	Target string
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
	// NotVisible: the record holds Value where it lives (another chain
	// than L1), written now (TxHash) or before, but L1 resolution — what
	// a fresh machine reads — does not show it yet: it shows Seen, or
	// could not be read (SeenOK false, Err says why). Nothing is to be
	// written again; the value is waited for (docs/design.md §7.2).
	NotVisible
)

// WriteResult is the outcome of one update.
type WriteResult struct {
	Kind      WriteKind
	Actual    string // Conflicted: the record's value
	TxHash    string
	GasUsed   uint64 // this update's share of its transaction
	Unchanged bool   // Written (or NotVisible) without a transaction
	Err       error  // every kind but Written
	// The transaction's receipt, when one was mined: its block, the chain
	// it is on and the price it paid per gas (its cost is GasUsed ×
	// EffectiveGasPrice wei of that chain).
	Block             uint64
	ChainID           uint64
	EffectiveGasPrice *big.Int
	// NotVisible: what L1 resolution showed, when it could be read.
	Seen   string
	SeenOK bool
	// Fee is this update's share of a mined transaction's fee — one that
	// published it, or one that reverted, which is paid for all the same;
	// nil when no transaction of it was mined.
	Fee *TxFee
}

// TxFee is one update's share of a mined transaction.
type TxFee struct {
	ChainID uint64
	// Gas is this update's share of the gas used; GasPrice the
	// transaction's effective gas price (nil: not known).
	Gas      uint64
	GasPrice *big.Int
	// Share is this update's part of the transaction (1/n of n updates).
	Share float64
}

// Accounts is told what an agent spends (the cost ledger): every verified
// snapshot and every paid transaction. Calls must not block for long.
type Accounts interface {
	Snapshotted(agent string, r snapshot.Result)
	Paid(agent string, fee TxFee)
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
	// Target is where the record is written (PointerUpdate.Target);
	// Written, when set, says Value is there already and waits to be
	// visible through L1 resolution.
	Target  string
	Written *state.Written
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
	pp := PendingPointer{
		Agent:    a.cfg.ID,
		Name:     a.cfg.ENSName,
		Value:    p.Value,
		Expected: p.Expected,
		Since:    p.Since,
		Attempts: p.Attempts,
		Target:   a.cfg.Records,
	}
	if p.Written != nil {
		w := *p.Written
		pp.Written = &w
	}
	return pp, true
}

// AwaitingVisibility reports whether the pending pointer was written where
// the record lives and only waits to be visible through L1 resolution:
// such a pointer is confirmed, never written again.
func (p PendingPointer) AwaitingVisibility() bool {
	return p.Written != nil && p.Written.Value == p.Value
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
	// OutcomeLagging: written where the record lives (an L2), not yet
	// visible through L1 resolution, within the visibility timeout: wait.
	OutcomeLagging PublishOutcome = "lagging"
	// OutcomeNotVisible: as OutcomeLagging, past the visibility timeout:
	// an error that keeps the pointer pending (never a hold).
	OutcomeNotVisible PublishOutcome = "not_visible"
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
		ups = append(ups, PointerUpdate{Name: p.Name, Value: p.Value, Expected: p.Expected, Target: p.Target})
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
		if r.Fee != nil && a.deps.Accounts != nil {
			a.deps.Accounts.Paid(a.cfg.ID, *r.Fee)
		}
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
	case r.Kind == NotVisible:
		res.Outcome, res.Err = a.notVisibleLocked(u, r)
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
	a.checkedAt = a.st.PublishedAt
	if p := a.st.Pending; p != nil {
		if p.Value == value {
			a.st.Pending = nil
		} else {
			// A newer snapshot arrived meanwhile; it replaces the value
			// just published.
			p.Expected, p.Attempts, p.LastErr, p.Written = value, 0, "", nil
		}
	}
	_ = txHash
	return a.saveStateLocked()
}

// notVisibleLocked records that u.Value is where the record lives (on
// another chain than L1) but L1 resolution does not show it: the gateway
// between them lags. That is waited for, up to the visibility timeout,
// never taken for a rollback or another writer and never written again;
// past the timeout it is an error that keeps the pointer pending.
func (a *Agent) notVisibleLocked(u PointerUpdate, r WriteResult) (PublishOutcome, error) {
	p := a.st.Pending
	if p == nil || p.Value != u.Value {
		// A newer snapshot arrived meanwhile: its compare-and-set
		// replaces the value just written.
		if p != nil {
			p.Expected, p.Written = u.Value, nil
		}
		return OutcomeLagging, a.saveStateLocked()
	}
	now := a.deps.Now()
	w := p.Written
	if w == nil || w.Value != u.Value || w.Target != u.Target {
		w = &state.Written{Value: u.Value, Target: u.Target, At: now}
		p.Written = w
	}
	if r.TxHash != "" {
		w.TxHash, w.Block = r.TxHash, r.Block
	}
	if r.ChainID != 0 {
		w.ChainID = r.ChainID
	}
	var seenErr error
	if !r.SeenOK {
		seenErr = r.Err
	}
	return a.visibilityLocked(p, r.Seen, seenErr)
}

// visibilityLocked judges a pending pointer written where the record
// lives (p.Written) against what L1 resolution showed (seen, or the error
// of reading it), and saves the state.
func (a *Agent) visibilityLocked(p *state.Pointer, seen string, seenErr error) (PublishOutcome, error) {
	w := p.Written
	w.Seen, w.SeenErr = seen, ""
	if seenErr != nil {
		w.SeenErr = seenErr.Error()
	}
	wait := a.deps.Now().Sub(w.At)
	if wait < a.cfg.VisibilityTimeout {
		return OutcomeLagging, a.saveStateLocked()
	}
	err := fmt.Errorf("%s: %s, not visible from L1 after %s (visibility_timeout): L1 resolution %s; the pointer stays pending",
		a.cfg.ENSName, describeWritten(w), a.cfg.VisibilityTimeout, a.describeSeenLocked(w))
	p.Attempts++
	p.LastErr = err.Error()
	return OutcomeNotVisible, errors.Join(err, a.saveStateLocked())
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

// describeSeenLocked says what L1 resolution showed of a written pointer.
func (a *Agent) describeSeenLocked(w *state.Written) string {
	switch {
	case w.SeenErr != "":
		return "could not be read: " + w.SeenErr
	case w.Seen == "":
		return "shows no record"
	case a.ownBlobLocked(w.Seen):
		return fmt.Sprintf("still shows %s, an older snapshot of this agent (the gateway lags)", w.Seen)
	}
	return fmt.Sprintf("shows %s, which is not a snapshot of this agent: does the name's L1 resolver reach ens.records %s?", w.Seen, w.Target)
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
	a.checkedAt = a.deps.Now()
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
	case p != nil && p.Written != nil && p.Written.Value == p.Value:
		// Written where the record lives, not visible from L1 yet: the
		// gateway lags. Whatever L1 shows meanwhile is neither a
		// rollback nor another writer (docs/design.md §7.2).
		return a.visibilityLocked(p, v, nil)
	case v == a.st.Published && (v != "" || !a.st.PublishedAt.IsZero()):
		return OutcomeOK, nil
	case p != nil && v != "" && v == p.Expected:
		// The record holds what the pending pointer will replace: in
		// view now, nothing to repair.
		a.st.Published, a.st.PublishedAt = v, a.deps.Now()
		return OutcomeOK, a.saveStateLocked()
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
	if !first && a.st.Published != "" && a.deps.Record != nil {
		// The record lives on another chain: when it still holds what we
		// published, L1 shows an older value because the gateway lags
		// behind it, not because the record went back.
		published := a.st.Published
		a.mu.Unlock()
		where, ok, rerr := a.deps.Record.Read(ctx, a.cfg.ENSName)
		a.mu.Lock()
		if rerr == nil && ok && where == published && a.st.Published == published {
			a.log.Debug("L1 resolution lags behind the record where it lives", "l1_shows", v, "record", where)
			return OutcomeLagging, nil
		}
	}
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
	if p := a.recordReader(); p != nil {
		v, ok, err := p.Read(ctx, a.cfg.ENSName)
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
	p := a.recordReader()
	if p == nil {
		return "", errors.New("the agent has no ENS name")
	}
	v, ok, err := p.Read(ctx, a.cfg.ENSName)
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
	r, err := a.deps.Pipeline.RestoreWith(ctx, v, a.cfg.BrainDir, snapshot.RestoreOptions{PublicRoot: a.cfg.AllowUnsafeDirs})
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
	if err := a.afterRestore(ctx, r, v); err != nil {
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

// recordReader reads the record where it lives: Deps.Record for a record
// on another chain than L1, else the agent's Pointer.
func (a *Agent) recordReader() Pointer {
	if a.deps.Record != nil {
		return a.deps.Record
	}
	return a.deps.Pointer
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
