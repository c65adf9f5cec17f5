// Package agent runs one brain: restore it if it is missing, watch it,
// snapshot it when its bundle hash moves, and hand verified snapshots to
// the pointer publisher.
//
// The loop (Run) is a thin scheduler over SyncOnce, which tests, drills and
// the CLI call directly. Failures are retried with capped exponential
// backoff; errors are logged at most every 30 seconds, and recovery once.
package agent

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/receipts"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
)

// PointerReader reads an agent's ENS agent-snapshot record. A missing
// record is an error matching ErrNoPointer (the ens package's sentinel is
// passed in Deps so this package does not depend on it).
type PointerReader interface {
	Read(ctx context.Context, name string) (string, error)
}

// Notifier wakes whoever publishes pending pointers.
type Notifier interface{ Notify() }

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
	Identity string // bound into v2 envelopes
	TokenID  *uint64
	Quiet    time.Duration
	MaxLag   time.Duration
	// MinInterval is the minimum time between two uploads (0 = none).
	MinInterval time.Duration
	// RefreshAfter is the age at which the last snapshot is uploaded
	// again even if nothing changed, before its blob expires (0 = never).
	RefreshAfter time.Duration
	Epochs       int
	// ImportPolicy and Trusted govern receipts re-imported on restore and
	// received from the runtime.
	ImportPolicy receipts.Policy
	Trusted      []common.Address
}

// Deps are the shared services an agent uses.
type Deps struct {
	State        *state.Dir
	Store        snapshot.BlobStore
	Pointer      PointerReader // nil when the agent has no ENS name
	ErrNoPointer error         // what Pointer returns for "no record"
	Envelope     snapshot.Envelope
	Others       []string          // identities of the other agents
	Signer       *ecdsa.PrivateKey // signs transition receipts; optional
	Publisher    Notifier
	Observer     Observer
	Log          *slog.Logger
	Now          func() time.Time
}

// Agent is one supervised brain.
type Agent struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	dir  string // state directory of this agent

	receipts *receipts.Log
	cache    *hash.Cache
	snap     *snapshot.Snapshotter
	restorer *snapshot.Restorer

	syncMu sync.Mutex // one snapshot in flight

	mu         sync.Mutex
	st         *state.AgentState
	phase      Phase
	reason     string
	conflict   string // why publishing is held, if it is
	startedAs  string // what the last Prepare did: restored, fresh or existing
	lastHash   hash.Digest
	lastHashAt time.Time
	lastErr    string
	// unsavedSince is when the brain was first seen to differ from its
	// last verified snapshot (zero when in sync): the staleness to alert on.
	unsavedSince time.Time
}

// New opens an agent's state and receipt log. It touches nothing in the
// brain directory; Prepare does.
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
	// The log is a rebuildable cache: damaged records are moved to its
	// quarantine file (and logged) rather than keeping the brain
	// unprotected.
	rl, err := receipts.OpenLog(receipts.LogPath(deps.State.Path(), cfg.ID), receipts.Options{Logger: log, Repair: true})
	if err != nil {
		return nil, fmt.Errorf("open receipt log: %w", err)
	}
	a := &Agent{
		cfg:      cfg,
		deps:     deps,
		log:      log,
		dir:      dir,
		receipts: rl,
		cache:    hash.NewCache(cfg.BrainDir, hash.Options{}),
		st:       st,
		phase:    PhaseStarting,
	}
	a.snap = &snapshot.Snapshotter{
		AgentID:  cfg.ID,
		TokenID:  cfg.TokenID,
		BrainDir: cfg.BrainDir,
		SpoolDir: deps.State.SpoolDir(),
		Envelope: deps.Envelope,
		Store:    deps.Store,
		Epochs:   cfg.Epochs,
		Receipts: rl,
		Signer:   deps.Signer,
		Now:      deps.Now,
		Log:      log,
	}
	a.restorer = &snapshot.Restorer{
		Store:    deps.Store,
		SpoolDir: deps.State.SpoolDir(),
		Key:      deps.Envelope.Key,
		Identity: deps.Envelope.Identity,
		Others:   deps.Others,
		Log:      log,
	}
	a.loadCache()
	return a, nil
}

// ID is the agent's id.
func (a *Agent) ID() string { return a.cfg.ID }

// Config returns the agent's settings.
func (a *Agent) Config() Config { return a.cfg }

// Receipts is the agent's receipt log.
func (a *Agent) Receipts() *receipts.Log { return a.receipts }

// Close saves the hash cache and closes the receipt log.
func (a *Agent) Close() error {
	a.setPhase(PhaseStopped, "")
	a.saveCache()
	return a.receipts.Close()
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
	Conflict   string          `json:"conflict,omitempty"`
	LastError  string          `json:"lastError,omitempty"`
	// UnsavedSince is when the brain first differed from its last verified
	// snapshot; zero when every change is safely stored.
	UnsavedSince time.Time         `json:"unsavedSince,omitzero"`
	Receipts     int               `json:"receipts"`
	Extra        map[string]string `json:"-"`
}

// Status reports the agent's state.
func (a *Agent) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := Status{
		ID:           a.cfg.ID,
		ENSName:      a.cfg.ENSName,
		BrainDir:     a.cfg.BrainDir,
		Phase:        a.phase,
		Reason:       a.reason,
		Origin:       a.st.Origin,
		StartedAs:    a.startedAs,
		Published:    a.st.Published,
		Conflict:     a.conflict,
		LastError:    a.lastErr,
		UnsavedSince: a.unsavedSince,
		Receipts:     a.receipts.Len(),
	}
	if a.lastHash != (hash.Digest{}) {
		s.BundleHash, s.HashedAt = a.lastHash.String(), a.lastHashAt
	}
	if a.st.Last != nil {
		l := *a.st.Last
		s.Last = &l
	}
	if a.st.Pending != nil {
		p := *a.st.Pending
		s.Pending = &p
	}
	return s
}

// Ready reports whether the brain is in place and watched.
func (a *Agent) Ready() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.phase == PhaseReady
}

// saveState writes the agent state; the caller holds a.mu.
func (a *Agent) saveStateLocked() error {
	return state.SaveAgent(a.dir, a.st)
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

func (a *Agent) saveCache() {
	p := filepath.Join(a.dir, cacheFile)
	tmp := p + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	err = a.cache.Save(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		a.log.Debug("cannot save hash cache", "error", err)
		return
	}
	// The cache is an optimisation, re-validated on load: a rename without
	// fsync is enough.
	os.Rename(tmp, p)
}

// isOwnFile reports paths hermesd itself writes in the brain directory.
func isOwnFile(rel string) bool {
	switch {
	case rel == bundlelock.FileName, rel == snapshot.ReceiptsFile:
		return true
	case strings.HasPrefix(rel, "."+bundlelock.FileName+"."), strings.HasPrefix(rel, "."+snapshot.ReceiptsFile+"."):
		return true // temporary files of atomic replacement
	}
	return false
}

// busy reports a SQLite write in progress at the top of the brain: a
// rollback journal exists, or a WAL file was written within the quiet
// period.
func (a *Agent) busy() bool {
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

// knownBlob reports whether id is a snapshot this agent made or restored.
func (a *Agent) knownBlob(id string) bool {
	if a.st.Last != nil && a.st.Last.BlobID == id {
		return true
	}
	if a.st.Pending != nil && a.st.Pending.Value == id {
		return true
	}
	lock, err := bundlelock.Read(filepath.Join(a.cfg.BrainDir, bundlelock.FileName))
	if err != nil {
		return false
	}
	if lock.BlobID() == id {
		return true
	}
	return slices.ContainsFunc(lock.Lineage(), func(e bundlelock.LineageEntry) bool { return e.BlobID == id })
}

type nopObserver struct{}

func (nopObserver) Phase(string, Phase)                        {}
func (nopObserver) Hashed(string, int, int64, time.Duration)   {}
func (nopObserver) Snapshot(string, snapshot.Result)           {}
func (nopObserver) Unchanged(string)                           {}
func (nopObserver) Failed(string, string, error)               {}
func (nopObserver) Restore(string, string, *snapshot.Restored) {}

var errStopped = errors.New("agent stopped")
