package agent

import (
	"errors"
	"time"
)

// PendingPointer is a verified snapshot waiting to be published.
type PendingPointer struct {
	Agent    string
	Name     string // normalized ENS name
	Value    string // blob id
	Expected string // the record's current value, for compare-and-set
	Since    time.Time
	Attempts int
}

// Pending returns the pointer this agent wants published, if any. An agent
// whose publishing is held (a conflict with another writer) returns none.
func (a *Agent) Pending() (PendingPointer, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.st.Pending
	if p == nil || a.cfg.ENSName == "" || a.conflict != "" {
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

// PendingSince reports how long the oldest unpublished snapshot has waited
// (zero when nothing is pending).
func (a *Agent) PendingSince() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.st.Pending == nil {
		return time.Time{}
	}
	return a.st.Pending.Since
}

// Published records that the chain now holds value (for the pending
// pointer p), durably, before anything else relies on it.
func (a *Agent) Published(p PendingPointer, txHash string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.st.Published = p.Value
	a.st.PublishedAt = time.Now()
	if a.st.Pending != nil {
		if a.st.Pending.Value == p.Value {
			a.st.Pending = nil
		} else {
			// A newer snapshot arrived meanwhile; it now replaces the value
			// just published.
			a.st.Pending.Expected = p.Value
			a.st.Pending.Attempts = 0
		}
	}
	return a.saveStateLocked()
}

// PublishFailed records a failed attempt. A conflict (the record holds a
// value this agent did not write) holds publishing until an operator acts.
func (a *Agent) PublishFailed(p PendingPointer, err error, conflict bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if conflict {
		a.conflict = err.Error()
	}
	if a.st.Pending != nil {
		a.st.Pending.Attempts++
		a.st.Pending.LastErr = err.Error()
		if serr := a.saveStateLocked(); serr != nil {
			a.log.Error("cannot save agent state", "error", serr)
		}
	}
}

// Conflict returns why publishing is held, if it is.
func (a *Agent) Conflict() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conflict
}

// ErrHeld means publishing is held for this agent.
var ErrHeld = errors.New("publishing held")

// SetPublisher sets who is notified of new pending pointers. Call it before
// Run.
func (a *Agent) SetPublisher(n Notifier) { a.deps.Publisher = n }
