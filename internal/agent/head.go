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
	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/pointer"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
)

// stateStore is the agent's state file as its head writes it
// (pointer.Store): under the agent's lock, saved (and retried by Run when
// the save fails) like every other change of the state.
type stateStore struct{ a *Agent }

func (s stateStore) Update(fn func(st *state.AgentState) bool) error {
	s.a.mu.Lock()
	defer s.a.mu.Unlock()
	if !fn(s.a.st) {
		return nil
	}
	return s.a.saveStateLocked()
}

// lineage is the agent's history as the brain's lock records it
// (pointer.Lineage). It reads the lock only, never the agent's state, so
// the head may ask it under the agent's lock.
type lineage struct{ a *Agent }

func (l lineage) lock() (*bundlelock.Lock, error) {
	return bundlelock.Read(filepath.Join(l.a.cfg.BrainDir, bundlelock.FileName))
}

// Knows reports whether id is a snapshot the lock records: the same head
// reference, or its id alone where one of the two carries no digest (a
// record written before heads carried theirs, docs/format-v3.md §14).
func (l lineage) Knows(id string) bool {
	lock, err := l.lock()
	if err != nil || id == "" {
		return false
	}
	if headref.Same(lock.BlobID(), id) {
		return true
	}
	return slices.ContainsFunc(lock.Lineage(), func(e bundlelock.LineageEntry) bool { return headref.Same(e.BlobID, id) })
}

// Newest is the newest snapshot the lock records, when the lock names it
// as the brain's current blob.
func (l lineage) Newest() (state.Snapshot, bool) {
	lock, err := l.lock()
	if err != nil {
		return state.Snapshot{}, false
	}
	es := lock.Lineage()
	if len(es) == 0 || es[0].BlobID == "" || es[0].BlobID != lock.BlobID() {
		return state.Snapshot{}, false
	}
	e := es[0]
	var version int64
	if lock.BundleHash() == e.BundleHash {
		version = lock.Version()
	}
	return state.Snapshot{
		BlobID:     e.BlobID,
		BundleHash: e.BundleHash,
		Version:    version,
		Size:       e.Size,
		EndEpoch:   e.EndEpoch,
		CreatedAt:  time.UnixMilli(e.CreatedAt),
	}, true
}

// Transferred returns the record of the agent's handover, if it was handed
// to a new owner: it is then no longer snapshotted or published here.
func (a *Agent) Transferred() *state.Transferred { return a.head.Transferred() }

// Override resolves a hold by publishing ours (pointer.Head.Override),
// between two snapshots.
func (a *Agent) Override(ctx context.Context) error {
	a.syncMu.Lock()
	defer a.syncMu.Unlock()
	return a.head.Override(ctx)
}

// Adopt resolves a hold by taking the other writer's snapshot: the brain is
// moved aside (to a sibling directory named in the result), the snapshot
// the record names is restored and verified in its place, and publishing
// resumes from it. If the restore fails, the brain is put back.
func (a *Agent) Adopt(ctx context.Context) (aside string, err error) {
	a.syncMu.Lock()
	defer a.syncMu.Unlock()
	if a.head.Hold() == nil {
		return "", pointer.ErrNotHeld
	}
	v, ok, err := a.head.ReadAtTarget(ctx)
	if err != nil {
		return "", err
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
	// The record names the restored snapshot: published, the hold gone.
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
