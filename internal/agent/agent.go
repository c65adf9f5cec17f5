// Package agent runs one brain: restore it if it is missing, watch it,
// and snapshot it when its bundle hash moves. Each verified snapshot goes
// to the agent's pointer.Head, which owns where it is recorded and
// published (internal/pointer); the agent keeps the state file the head
// persists in (its Store) and says which snapshots are its own (its
// Lineage).
//
// The loop (Run) is a thin scheduler over synchronous steps (a sync, the
// last sync of a stop, a state save, a new watch), which tests call
// directly, as drills and the CLI call SyncOnce. The decisions live in
// this package and are unit tested with fakes of the interfaces it
// declares (Pipeline, Pointer): restore or start fresh, what to snapshot
// and when, backoff.
package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/atomicfile"
	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/pointer"
	"github.com/hermesd/hermesd/internal/receipts"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
)

// Pipeline takes and restores the snapshots of this agent's brain.
type Pipeline interface {
	Take(ctx context.Context, in snapshot.Input) (snapshot.Result, error)
	RestoreWith(ctx context.Context, blobID, target string, opts snapshot.RestoreOptions) (snapshot.Restored, error)
	// Renewal says whether the last snapshot must be renewed although the
	// brain did not change (v3: its packs near their end epoch), and when
	// that will next be the case. It reads local files only.
	Renewal(now time.Time) snapshot.Renewal
	// HashesWhileTaking reports whether Take accepts a zero Input.Want
	// (snapshot.Pipeline.HashesWhileTaking).
	HashesWhileTaking() bool
}

// Pointer reads an agent's ENS agent-snapshot record through L1
// resolution, as a restore does; ok is false when the name has no record.
type Pointer interface {
	Read(ctx context.Context, name string) (value string, ok bool, err error)
}

// Observer receives what the agent does, for metrics. Every method must be
// cheap and non-blocking.
type Observer interface {
	Phase(agent string, p Phase)
	Hashed(agent string, files int, bytes int64, took time.Duration)
	Snapshot(agent string, r snapshot.Result)
	Unchanged(agent string)
	Failed(agent, stage string, err error)
	Restore(agent, result string, r *snapshot.Restored)
}

// Accounts is told what an agent's snapshots cost (the cost ledger). It
// must not block for long.
type Accounts interface {
	Snapshotted(agent string, r snapshot.Result)
}

// Phase is where an agent is in its life.
type Phase string

const (
	PhaseStarting  Phase = "starting"
	PhaseRestoring Phase = "restoring"
	PhaseReady     Phase = "ready"  // restored, fresh or existing, and watched
	PhaseFailed    Phase = "failed" // could not be restored; directory untouched
	PhaseStopped   Phase = "stopped"
)

// Config is one agent's settings.
type Config struct {
	ID       string
	BrainDir string
	SeedDir  string
	ENSName  string // normalized; "" = never published
	Quiet    time.Duration
	MaxLag   time.Duration
	// MinInterval is the minimum time between two uploads (0 = none).
	MinInterval time.Duration
	// RefreshAfter is the age at which the last v1/v2 snapshot is
	// uploaded again even if nothing changed, before its blob expires
	// (0 = never; v3 renews through Pipeline.Renewal instead).
	RefreshAfter time.Duration
	// ImportPolicy and Trusted govern receipts re-imported on restore and
	// received from the runtime.
	ImportPolicy receipts.Policy
	Trusted      []common.Address
	// ReceiptRoute says which receipts are the agent's own (its token):
	// others in a restored receipts.ndjson are quarantined with the
	// reason, never imported (nil: all are).
	ReceiptRoute *receipts.Route
	// AllowSymlinks accepts a brain or seed directory that is or passes
	// through a symbolic link (config allow_symlinks).
	AllowSymlinks bool
	// AllowUnsafeDirs accepts a brain or seed directory that is a system
	// directory, the user's home, or writable by everyone (config
	// allow_unsafe_dirs).
	AllowUnsafeDirs bool
	// Self is this operator's chain address (zero when read-only): a
	// name owned by another address was transferred.
	Self common.Address
	// KeyID is the public id of the key its snapshots are written under
	// (status shows it; never the key).
	KeyID string
	// Handover, for an agent bought from another operator, is the head
	// its first restore must find on chain.
	Handover *Handover
	// Records is the ens.records id of the contract that holds the
	// agent's record ("" = its name's own resolver on L1), for status.
	Records string
	// UnsavedLimit is how long a change may stay unsaved before the agent
	// is not healthy, whatever the cause (a store that hangs, a directory
	// that fails): what the configuration promises, snapshot_interval +
	// max_lag, plus the batch window and UnsavedMargin for the snapshot
	// itself. 0: no limit.
	UnsavedLimit time.Duration
}

// UnsavedMargin is what UnsavedLimit allows a snapshot itself (hashing,
// uploading, reading back) beyond what the configuration promises.
const UnsavedMargin = 30 * time.Second

// checkPaths refuses a brain (or seed) directory that is a system
// directory or the user's home, that anyone may add files to (they would
// enter its snapshots), or that is reached through a symbolic link, unless
// the configuration allows it: a link swapped under a running daemon would
// make it snapshot and upload another tree, and write its lock there. It
// runs before every restore and snapshot, so a directory that changes
// under a running daemon is caught too.
func (a *Agent) checkPaths() error {
	for _, d := range []struct {
		role, path string
		system     func(string) error
	}{{"brain", a.cfg.BrainDir, fsys.CheckSystemDir}, {"seed", a.cfg.SeedDir, fsys.CheckSystemSource}} {
		if d.path == "" {
			continue
		}
		if !a.cfg.AllowUnsafeDirs {
			for _, check := range []func(string) error{d.system, fsys.CheckNotHome, fsys.CheckNotPublic} {
				if err := check(d.path); err != nil {
					return fmt.Errorf("unsafe %s directory: %w (set allow_unsafe_dirs: true to allow it)", d.role, err)
				}
			}
		}
		if !a.cfg.AllowSymlinks {
			if err := fsys.CheckNoSymlink(d.path); err != nil {
				return fmt.Errorf("%w (set allow_symlinks: true if this link is yours)", err)
			}
		}
	}
	return nil
}

// Deps are the services an agent uses, whether its loop runs (Run) or a
// command syncs or restores it once. What the process running the loop
// shares among its agents (the watch hub, the sync slots, the end of an
// outage) is Run's Env instead.
type Deps struct {
	// State is the locked state directory: the agent's state file, hash
	// cache and receipt log live in its directory there.
	State *state.Dir
	// Pipeline takes and restores the agent's snapshots.
	Pipeline Pipeline
	// Receipts is the agent's receipt log, folded into every snapshot and
	// refilled on restore (the agent closes it).
	Receipts *receipts.Log
	// Pointer reads the agent's record for restores; nil when the agent
	// has no ENS name.
	Pointer Pointer
	// Owners reads the registry owner of the agent's name (a handed-over
	// agent's first restore); nil without a chain.
	Owners Owners
	// Head owns the agent's head and where it is published (nil: one
	// that keeps it in the state directory only). The agent binds its
	// state to it.
	Head *pointer.Head
	// Observer sees what the agent does (the daemon's metrics; nil: none).
	Observer Observer
	// Accounts, when set, records what the agent's snapshots cost (the
	// head records what its transactions cost).
	Accounts Accounts
	// WriteGate, when set, is asked before every save of the agent's
	// state (a fleet node that may not write now): a refused save is
	// kept in memory and saved again, like a failed one.
	WriteGate func() error
	// Log is the process's logger (nil: none); lines carry the agent id.
	Log *slog.Logger
	// Now is the clock of the agent's decisions (nil: time.Now), so that
	// tests can move it.
	Now func() time.Time
}

// Agent is one supervised brain.
type Agent struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	dir  string // state directory of this agent
	head *pointer.Head

	cache  *hash.Cache
	freeze *freezer // only the sync goroutine (under syncMu) uses it

	syncMu sync.Mutex // one snapshot in flight
	// rewatch tells Run that the brain directory was replaced (Adopt):
	// its watch follows the old directory, now set aside.
	rewatch chan struct{}
	// saveFailed tells Run that a state save failed: Run owns retrying
	// it (with backoff) until it succeeds.
	saveFailed chan struct{}
	// final carries Final's request for a last sync to Run; runExit
	// (under mu; nil before the first Run) is closed when Run returns.
	final   chan finalRequest
	runExit chan struct{}

	mu         sync.Mutex
	st         *state.AgentState
	dirty      bool // st differs from the state file (a save failed)
	phase      Phase
	reason     string
	startedAs  string // what the last Prepare did: restored, fresh or existing
	lastHash   hash.Digest
	lastHashAt time.Time
	lastErr    string
	tooLarge   hash.Digest // a state known not to fit the store's limit
	// hashFirst: a first snapshot taken as the hash failed once; the next
	// ones hash first, so that a brain too large for the store fails fast
	// (tooLarge) instead of being read whole on every retry.
	hashFirst bool
	// unsavedSince is when the brain was first seen to differ from its
	// last verified snapshot (zero when in sync): the staleness to alert on.
	unsavedSince time.Time
}

// New opens an agent's state. It touches nothing in the brain directory;
// Prepare does.
func New(cfg Config, deps Deps) (*Agent, error) {
	if deps.Observer == nil {
		deps.Observer = nopObserver{}
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	log := deps.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("agent", cfg.ID)
	dir, err := deps.State.AgentDir(cfg.ID)
	if err != nil {
		return nil, err
	}
	st, err := state.LoadAgent(dir)
	if err != nil {
		return nil, err
	}
	a := &Agent{
		cfg:   cfg,
		deps:  deps,
		log:   log,
		dir:   dir,
		cache: hash.NewCache(cfg.BrainDir, hash.Options{}),
		st:    st,
		phase: PhaseStarting,

		rewatch:    make(chan struct{}, 1),
		saveFailed: make(chan struct{}, 1),
		final:      make(chan finalRequest),
	}
	a.freeze = newFreezer(a)
	a.head = deps.Head
	if a.head == nil {
		a.head = pointer.NewHead(pointer.Config{Agent: cfg.ID}, pointer.Deps{Log: deps.Log, Now: deps.Now})
	}
	if err := a.head.Bind(stateStore{a}, lineage{a}, a.Ready); err != nil {
		return nil, err
	}
	a.loadCache()
	return a, nil
}

// Head is the agent's head: where its snapshots are recorded and
// published, and every decision about it.
func (a *Agent) Head() *pointer.Head { return a.head }

// ID is the agent's id.
func (a *Agent) ID() string { return a.cfg.ID }

// Config returns the agent's settings.
func (a *Agent) Config() Config { return a.cfg }

// Receipts is the agent's receipt log.
func (a *Agent) Receipts() *receipts.Log { return a.deps.Receipts }

// Close saves what is unsaved (the state, the hash cache) and closes the
// receipt log.
func (a *Agent) Close() error {
	a.setPhase(PhaseStopped, "")
	a.saveCache()
	err := a.SaveState()
	if a.deps.Receipts != nil {
		if cerr := a.deps.Receipts.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

func (a *Agent) setPhase(p Phase, reason string) {
	a.mu.Lock()
	a.phase, a.reason = p, reason
	a.mu.Unlock()
	a.deps.Observer.Phase(a.cfg.ID, p)
}

// Status is a point-in-time view of an agent.
type Status struct {
	ID         string          `json:"id"`
	ENSName    string          `json:"ensName,omitempty"`
	BrainDir   string          `json:"brainDir"`
	Phase      Phase           `json:"phase"`
	Reason     string          `json:"reason,omitempty"`
	Origin     string          `json:"origin,omitempty"`    // how the brain first came to be
	StartedAs  string          `json:"startedAs,omitempty"` // what this start did: restored, fresh, existing
	BundleHash string          `json:"bundleHash,omitempty"`
	HashedAt   time.Time       `json:"hashedAt,omitzero"`
	Last       *state.Snapshot `json:"last,omitempty"`
	Published  string          `json:"published,omitempty"`
	Pending    *state.Pointer  `json:"pending,omitempty"`
	// Hold says why publishing is held until an operator decides.
	Hold      *state.Hold `json:"hold,omitempty"`
	LastError string      `json:"lastError,omitempty"`
	// Unsaved reports agent state that could not be written to the state
	// directory yet (it is retried).
	Unsaved bool `json:"unsaved,omitempty"`
	// UnsavedSince is when the brain first differed from its last verified
	// snapshot, or a sync that failed before recording a snapshot began
	// (the brain is then not known to be stored); zero when every change
	// is safely stored.
	UnsavedSince time.Time `json:"unsavedSince,omitzero"`
	// UnsavedOverdue says, when a change has stayed unsaved longer than
	// the configuration promises (Config.UnsavedLimit), for how long: the
	// agent is not healthy then, whatever the cause.
	UnsavedOverdue string `json:"unsavedOverdue,omitempty"`
	Receipts       int    `json:"receipts"`
	// Transferred: the agent was handed to a new owner; it is no longer
	// snapshotted or published here.
	Transferred *state.Transferred `json:"transferred,omitempty"`
	// KeyID is the public id of the key the agent's snapshots are written
	// under (format v3).
	KeyID string `json:"keyId,omitempty"`
	// Records is the ens.records id where the agent's record lives ("":
	// its name's own L1 resolver).
	Records string `json:"records,omitempty"`
	// PointerNote says, while the pending pointer was written where the
	// record lives but L1 resolution does not show it yet, where and when
	// it was written and what L1 shows ("written on L2, not yet visible
	// from L1").
	PointerNote string `json:"pointerNote,omitempty"`
	// PointerMisrouted says, when the agent's name resolves from another
	// place than its configured records (the record was moved), what to
	// do: nothing is written until then.
	PointerMisrouted string `json:"pointerMisrouted,omitempty"`
	// PointerCheckedAt is when the pointer was last read back from the
	// chain or written there (zero: not since this process started).
	PointerCheckedAt time.Time `json:"pointerCheckedAt,omitzero"`
	// PointerUnverified says, when the pointer has not been read back for
	// longer than chain.check_interval (the chain unreachable, say), since
	// when: what Published says is not known to be what the chain holds.
	// The daemon fills it in.
	PointerUnverified string `json:"pointerUnverified,omitempty"`
	// Restore is what the last restore of the brain reported beyond its
	// success: what it stripped, skipped or could not verify (kept in the
	// state, bounded: state.Restored).
	Restore *RestoreReport `json:"restore,omitempty"`
}

// RestoreReport is what a restore said beyond its success.
type RestoreReport struct {
	BlobID   string `json:"blobId"`
	Verified bool   `json:"verified"`
	// Links counts the files restored as hard links of another name.
	Links     int      `json:"links,omitempty"`
	Stripped  []string `json:"stripped,omitempty"`  // files restored without their setuid/setgid bits
	Skipped   []string `json:"skipped,omitempty"`   // archive entries not restored (symlinks, devices)
	Notes     []string `json:"notes,omitempty"`     // e.g. the brain directory's mode kept narrower
	Unchecked []string `json:"unchecked,omitempty"` // what an unverified restore could not check
	// Warnings say what did not bind the restored bytes to their
	// reference (a head named without its digest that nothing else
	// binds).
	Warnings []string `json:"warnings,omitempty"`
	// At is when the restore was; Omitted counts lines of the lists above
	// that the state did not keep (state.MaxRestoredLines).
	At      time.Time `json:"at,omitzero"`
	Omitted int       `json:"omitted,omitempty"`
}

// savedRestore is what a restore reported, as the state keeps it.
func savedRestore(r snapshot.Restored, at time.Time) *state.Restored {
	s := &state.Restored{BlobID: r.BlobID, At: at, Verified: r.Verified, Links: r.Links,
		Stripped: slices.Clone(r.Stripped), Skipped: slices.Clone(r.Skipped), Notes: slices.Clone(r.Notes), Unchecked: slices.Clone(r.Unchecked), Warnings: slices.Clone(r.Warnings)}
	s.Bound()
	return s
}

// RestoreReportOf is the report of a restore the state kept (nil: none).
func RestoreReportOf(s *state.Restored) *RestoreReport {
	if s == nil {
		return nil
	}
	return &RestoreReport{BlobID: s.BlobID, Verified: s.Verified, Links: s.Links, Stripped: s.Stripped,
		Skipped: s.Skipped, Notes: s.Notes, Unchecked: s.Unchecked, Warnings: s.Warnings, At: s.At, Omitted: s.Omitted}
}

// Status reports the agent's state.
func (a *Agent) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.st.Clone()
	s := Status{
		ID:           a.cfg.ID,
		ENSName:      a.cfg.ENSName,
		BrainDir:     a.cfg.BrainDir,
		Phase:        a.phase,
		Reason:       a.reason,
		Origin:       st.Origin,
		StartedAs:    a.startedAs,
		Last:         st.Last,
		Published:    st.Published,
		Pending:      st.Pending,
		Hold:         st.Hold,
		LastError:    a.lastErr,
		Unsaved:      a.dirty,
		UnsavedSince: a.unsavedSince,
		Transferred:  st.Transferred,
		KeyID:        a.cfg.KeyID,
		Records:      a.cfg.Records,
		Restore:      RestoreReportOf(st.Restored),

		PointerCheckedAt: a.head.CheckedAt(),
		PointerNote:      a.head.Note(st),
		PointerMisrouted: a.head.Misrouted(),
	}
	if lim := a.cfg.UnsavedLimit; lim > 0 && !a.unsavedSince.IsZero() {
		if age := a.deps.Now().Sub(a.unsavedSince); age > lim {
			s.UnsavedOverdue = fmt.Sprintf("a change unsaved for %s, longer than the %s the configuration promises "+
				"(snapshot_interval + max_lag + batch_window + %s)", age.Round(time.Second), lim, UnsavedMargin)
		}
	}
	if a.deps.Receipts != nil {
		s.Receipts = a.deps.Receipts.Len()
	}
	if a.lastHash != (hash.Digest{}) {
		s.BundleHash, s.HashedAt = a.lastHash.String(), a.lastHashAt
	}
	return s
}

// Ready reports whether the brain is in place and watched.
func (a *Agent) Ready() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.phase == PhaseReady
}

// saveStateLocked writes the agent state; the caller holds a.mu. A failed
// save leaves the state dirty and tells Run, which retries it with
// backoff (so does every sync first, and every later change, since each
// save writes the whole state).
func (a *Agent) saveStateLocked() error {
	var err error
	if a.deps.WriteGate != nil {
		err = a.deps.WriteGate()
	}
	if err == nil {
		err = state.SaveAgent(a.dir, a.st)
	}
	if err != nil {
		if !a.dirty {
			a.log.Error("cannot save the agent state; it is kept in memory and saved again", "error", err)
		}
		a.dirty = true
		select {
		case a.saveFailed <- struct{}{}:
		default:
		}
		return fmt.Errorf("save agent state: %w", err)
	}
	if a.dirty {
		a.log.Info("agent state saved again")
	}
	a.dirty = false
	return nil
}

// SaveState writes the agent state if an earlier save failed.
func (a *Agent) SaveState() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.dirty {
		return nil
	}
	return a.saveStateLocked()
}

// Dirty reports state that is not saved yet.
func (a *Agent) Dirty() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dirty
}

const cacheFile = "hash.cache"

func (a *Agent) loadCache() {
	f, err := os.Open(filepath.Join(a.dir, cacheFile))
	if err != nil {
		return
	}
	defer f.Close()
	if err := a.cache.Load(f); err != nil {
		a.log.Debug("hash cache not usable; starting cold", "error", err)
		a.cache = hash.NewCache(a.cfg.BrainDir, hash.Options{})
	}
}

// saveCache persists the hash cache. It is an optimisation, re-validated
// on load: a failure costs a cold re-hash at the next start, nothing more.
func (a *Agent) saveCache() {
	f, err := atomicfile.Create(filepath.Join(a.dir, cacheFile), 0o600)
	if err != nil {
		a.log.Debug("cannot save hash cache", "error", err)
		return
	}
	defer f.Abort()
	if err := a.cache.Save(f); err != nil {
		a.log.Debug("cannot save hash cache", "error", err)
		return
	}
	if err := f.Commit(); err != nil {
		a.log.Debug("cannot save hash cache", "error", err)
	}
}

// isOwnFile reports paths hermesd itself writes in the brain directory.
func isOwnFile(rel string) bool {
	switch {
	case rel == bundlelock.FileName, rel == snapshot.ReceiptsFile:
		return true
	case strings.HasPrefix(rel, atomicfile.TempPrefix(bundlelock.FileName)),
		strings.HasPrefix(rel, atomicfile.TempPrefix(snapshot.ReceiptsFile)):
		return true // the instant of an atomic replacement
	}
	return false
}

// busy reports a SQLite write in progress at the top of the brain: a
// rollback journal exists, or a WAL file was written within the quiet
// period. Databases that are frozen for every pass need no waiting; only
// when one is read live does a write in progress hold batches back.
func (a *Agent) busy() bool {
	if !a.freeze.liveDatabases() {
		return false
	}
	entries, err := os.ReadDir(a.cfg.BrainDir)
	if err != nil {
		return false
	}
	now := a.deps.Now()
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, "-journal"):
			if info, err := e.Info(); err == nil && info.Size() > 0 {
				return true
			}
		case strings.HasSuffix(name, "-wal"):
			if info, err := e.Info(); err == nil && now.Sub(info.ModTime()) < a.cfg.Quiet {
				return true
			}
		}
	}
	return false
}

type nopObserver struct{}

func (nopObserver) Phase(string, Phase)                        {}
func (nopObserver) Hashed(string, int, int64, time.Duration)   {}
func (nopObserver) Snapshot(string, snapshot.Result)           {}
func (nopObserver) Unchanged(string)                           {}
func (nopObserver) Failed(string, string, error)               {}
func (nopObserver) Restore(string, string, *snapshot.Restored) {}

// Failing reports whether the agent's last sync failed.
func (a *Agent) Failing() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lastErr != ""
}
