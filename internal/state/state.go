// Package state manages hermesd's state directory: the process lock that
// keeps a second hermesd away, and each agent's small JSON state file (the
// last verified snapshot, the value last published to ENS and the pointer
// still waiting to be published).
//
// Layout:
//
//	<state>/hermesd.lock             flock held by the running process
//	<state>/agents/<id>/state.json   AgentState
//	<state>/agents/<id>/receipts.log receipt log (package receipts)
//	<state>/agents/<id>/hash.cache   incremental hash cache
//	<state>/agents/<id>/cost.json    what the agent spent (package ledger)
//	<state>/spool/                   snapshots being encrypted or downloaded
//
// The brain directory never holds hermesd state besides bundle.lock.json and
// receipts.ndjson, which are part of the snapshot format.
package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hermesd/hermesd/internal/atomicfile"
	"github.com/hermesd/hermesd/internal/fsys"
)

// ErrLocked means another process holds the state directory.
var ErrLocked = errors.New("state directory is in use by another hermesd process")

// ErrUnsafe matches a state directory others could tamper with: writable
// by its group or by everyone, owned by another user, or reached through a
// symbolic link the configuration does not allow; or a system directory
// (fsys.CheckSystemDir) the configuration does not allow.
var ErrUnsafe = errors.New("unsafe state directory")

// Dir is an opened, locked state directory.
type Dir struct {
	path string
	lock *os.File
}

// Options adjust Open.
type Options struct {
	// AllowSymlinks accepts a path that is or passes through a symbolic
	// link (config allow_symlinks).
	AllowSymlinks bool
	// AllowUnsafeDirs accepts a system directory (config
	// allow_unsafe_dirs).
	AllowUnsafeDirs bool
}

// Open creates the state directory if needed, checks that nobody else can
// write to it, and takes its lock without waiting. A held lock fails with
// an error matching ErrLocked that names the holder's pid when known.
func Open(path string, opts Options) (*Dir, error) {
	if !opts.AllowUnsafeDirs {
		if err := fsys.CheckSystemDir(path); err != nil {
			return nil, fmt.Errorf("%w: %w (set allow_unsafe_dirs: true to allow it)", ErrUnsafe, err)
		}
	}
	if !opts.AllowSymlinks {
		if err := fsys.CheckNoSymlink(path); err != nil {
			return nil, fmt.Errorf("%w: %w (set allow_symlinks: true to allow it)", ErrUnsafe, err)
		}
	}
	for _, d := range []string{path, filepath.Join(path, "agents"), filepath.Join(path, "spool")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create state dir: %w", err)
		}
		if err := checkPrivate(d); err != nil {
			return nil, err
		}
	}
	lp := filepath.Join(path, "hermesd.lock")
	f, err := openNoFollow(lp, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	if err := lockFile(f); err != nil {
		holder := readPID(f)
		f.Close()
		if errors.Is(err, ErrLocked) {
			if holder != "" {
				return nil, fmt.Errorf("%w (%s, pid %s)", ErrLocked, path, holder)
			}
			return nil, fmt.Errorf("%w (%s)", ErrLocked, path)
		}
		return nil, fmt.Errorf("lock %s: %w", lp, err)
	}
	// Record our pid for the error message of the next process. The lock,
	// not this content, is what excludes it.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	clearSpool(filepath.Join(path, "spool"))
	return &Dir{path: path, lock: f}, nil
}

// clearSpool removes the files a previous holder of the lock left in the
// spool: spool files are only used under the lock, so any found now belong
// to a process that died mid-snapshot or mid-restore (kill -9, power loss),
// and each is as big as a snapshot.
func clearSpool(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.Type().IsRegular() {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

func readPID(f *os.File) string {
	b, err := io.ReadAll(io.LimitReader(f, 32))
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(b))
	if _, err := strconv.Atoi(s); err != nil {
		return ""
	}
	return s
}

// Close releases the lock.
func (d *Dir) Close() error {
	if d.lock == nil {
		return nil
	}
	err := errors.Join(unlockFile(d.lock), d.lock.Close())
	d.lock = nil
	return err
}

// Path is the state directory.
func (d *Dir) Path() string { return d.path }

// AgentDir is the directory of one agent's state; it is created on demand.
func (d *Dir) AgentDir(id string) (string, error) {
	p := AgentPath(d.path, id)
	if err := os.MkdirAll(p, 0o700); err != nil {
		return "", fmt.Errorf("create agent state dir: %w", err)
	}
	return p, nil
}

// AgentPath is where agent id keeps its state under stateDir.
func AgentPath(stateDir, id string) string {
	return filepath.Join(stateDir, "agents", id)
}

// SpoolDir holds temporary snapshot files.
func (d *Dir) SpoolDir() string { return SpoolDir(d.path) }

// SpoolDir is the spool of the state directory at path.
func SpoolDir(path string) string { return filepath.Join(path, "spool") }

// Snapshot describes one uploaded and verified snapshot.
type Snapshot struct {
	BlobID     string    `json:"blobId"`
	BundleHash string    `json:"bundleHash"`
	Version    int64     `json:"version"`
	Size       int64     `json:"size"`
	SHA256     string    `json:"sha256"` // of the encrypted blob
	EndEpoch   uint64    `json:"endEpoch"`
	CreatedAt  time.Time `json:"createdAt"`
	// Links fingerprints the symlinks the snapshot was taken with
	// (hash.Links.Digest, hex; "" for none): the bundle hash leaves them
	// out, so a change to a symlink alone is seen by this.
	Links string `json:"links,omitempty"`
}

// Pointer is an ENS write hermesd has made or still has to make.
type Pointer struct {
	Value string `json:"value"`
	// Expected is the record value the write replaces (compare-and-set).
	Expected string    `json:"expected"`
	Since    time.Time `json:"since"`
	TxHash   string    `json:"txHash,omitempty"`
	Attempts int       `json:"attempts,omitempty"`
	LastErr  string    `json:"lastError,omitempty"`
	// Target is the ens.records id of the contract the pointer is
	// written to; "" is the name's own resolver on L1.
	Target string `json:"target,omitempty"`
	// Written says that Value was written where the record lives (on
	// Target's chain) but L1 resolution did not show it yet: it is
	// waited for, not written again.
	Written *Written `json:"written,omitempty"`
}

// Written is a pointer write that landed on another chain than L1 and is
// not visible through L1 resolution yet (docs/design.md §7.2).
type Written struct {
	Value   string `json:"value"`
	Target  string `json:"target"`
	ChainID uint64 `json:"chainId"`
	// TxHash and Block are the write's; empty when the value was found
	// there already (written before a crash, say).
	TxHash string `json:"txHash,omitempty"`
	Block  uint64 `json:"block,omitempty"`
	// At is when the value was first known to be there: how long it has
	// not been visible is counted from it.
	At time.Time `json:"at"`
	// Seen is what L1 resolution showed at the last look ("" for no
	// record, or when it could not be read: SeenErr).
	Seen    string `json:"seen,omitempty"`
	SeenErr string `json:"seenError,omitempty"`
	// Reads counts the L1 resolutions that did not show it yet.
	Reads int `json:"reads,omitempty"`
}

// Hold records why publishing an agent's pointer stopped until an operator
// decides: the record names a snapshot that is not of this agent's lineage
// (another writer), or the signer may no longer write the name.
type Hold struct {
	// Value is what the record held when the hold began.
	Value  string    `json:"value"`
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
}

// Transferred records that the agent was handed to a new owner
// (internal/handover): this operator no longer snapshots or publishes it.
// It is final; removing the agent from the configuration is what is left
// to do.
type Transferred struct {
	// Head is the last snapshot handed over ("" when the daemon only
	// found out from the registry).
	Head   string    `json:"head,omitempty"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

// Restored is what the last restore of the brain reported beyond its
// success (files restored without their set-id bits, entries skipped,
// notes, what an unverified restore could not check), kept so that
// status shows it after a one-shot restore too. It is bounded:
// MaxRestoredLines per list, each at most MaxRestoredLine bytes; Omitted
// counts the lines not kept.
type Restored struct {
	BlobID    string    `json:"blobId"`
	At        time.Time `json:"at"`
	Verified  bool      `json:"verified"`
	Links     int       `json:"links,omitempty"`
	Stripped  []string  `json:"stripped,omitempty"`
	Skipped   []string  `json:"skipped,omitempty"`
	Notes     []string  `json:"notes,omitempty"`
	Unchecked []string  `json:"unchecked,omitempty"`
	Warnings  []string  `json:"warnings,omitempty"`
	Omitted   int       `json:"omitted,omitempty"`
}

// Bounds of Restored: a state file stays small whatever a snapshot holds.
const (
	MaxRestoredLines = 32
	MaxRestoredLine  = 512
)

// Bound cuts r to its bounds, counting what it leaves out.
func (r *Restored) Bound() {
	for _, l := range []*[]string{&r.Stripped, &r.Skipped, &r.Notes, &r.Unchecked, &r.Warnings} {
		if n := len(*l); n > MaxRestoredLines {
			r.Omitted += n - MaxRestoredLines
			*l = (*l)[:MaxRestoredLines]
		}
		for i, s := range *l {
			if len(s) > MaxRestoredLine {
				cut := MaxRestoredLine
				for cut > 0 && !utf8.RuneStart(s[cut]) {
					cut--
				}
				(*l)[i] = s[:cut] + "…"
			}
		}
	}
}

// AgentState is what hermesd remembers about an agent between runs.
type AgentState struct {
	// Last is the newest snapshot that was uploaded and read back intact.
	Last *Snapshot `json:"last,omitempty"`
	// Published is the agent-snapshot value hermesd last saw confirmed on
	// chain (by its own write or by a read during restore).
	Published string `json:"published,omitempty"`
	// PublishedAt is when Published was confirmed.
	PublishedAt time.Time `json:"publishedAt,omitzero"`
	// Pending is a verified snapshot whose pointer is not on chain yet.
	Pending *Pointer `json:"pending,omitempty"`
	// Hold, when set, stops publishing until an operator resolves it
	// (hermesd pointer adopt|override); a restart keeps it.
	Hold *Hold `json:"hold,omitempty"`
	// Origin says how the brain came to be: "restored", "fresh" or
	// "existing" (found on disk at the first start).
	Origin string `json:"origin,omitempty"`
	// Transferred, when set, stops snapshots and publishing for good.
	Transferred *Transferred `json:"transferred,omitempty"`
	// Restored is what the last restore of the brain reported.
	Restored *Restored `json:"restored,omitempty"`
}

// Clone returns a deep copy.
func (s *AgentState) Clone() *AgentState {
	c := *s
	if s.Last != nil {
		l := *s.Last
		c.Last = &l
	}
	if s.Pending != nil {
		p := *s.Pending
		if p.Written != nil {
			w := *p.Written
			p.Written = &w
		}
		c.Pending = &p
	}
	if s.Hold != nil {
		h := *s.Hold
		c.Hold = &h
	}
	if s.Transferred != nil {
		t := *s.Transferred
		c.Transferred = &t
	}
	if s.Restored != nil {
		r := *s.Restored
		r.Stripped, r.Skipped = slices.Clone(r.Stripped), slices.Clone(r.Skipped)
		r.Notes, r.Unchecked = slices.Clone(r.Notes), slices.Clone(r.Unchecked)
		c.Restored = &r
	}
	return &c
}

const stateFile = "state.json"

// maxStateSize bounds an agent's state file (it is a few hundred bytes).
const maxStateSize = 1 << 20

// LoadAgent reads an agent's state; a missing file is an empty state.
func LoadAgent(agentDir string) (*AgentState, error) {
	f, err := openNoFollow(filepath.Join(agentDir, stateFile), os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return &AgentState{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read agent state: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStateSize+1))
	if err != nil {
		return nil, fmt.Errorf("read agent state: %w", err)
	}
	if len(b) > maxStateSize {
		return nil, fmt.Errorf("agent state %s is larger than %d bytes", filepath.Join(agentDir, stateFile), maxStateSize)
	}
	var s AgentState
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("agent state %s is corrupt: %w", filepath.Join(agentDir, stateFile), err)
	}
	return &s, nil
}

// SaveAgent atomically writes an agent's state.
func SaveAgent(agentDir string, s *AgentState) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode agent state: %w", err)
	}
	return atomicfile.WriteFile(filepath.Join(agentDir, stateFile), append(b, '\n'), 0o600)
}
