package agent

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
)

// Owners tells who owns a name in the ENS registry.
type Owners interface {
	Owner(ctx context.Context, name string) (common.Address, error)
}

// Handover is what a buyer's configuration says about an agent handed
// over (internal/handover): the seller's head to restore and its bundle
// hash. The handover file is only the seller's claim; the chain decides
// (see checkHandover).
type Handover struct {
	Head       string
	BundleHash hash.Digest
	KeyID      string // the seller's key id, for the log
}

// ErrNotTransferred means a handed-over agent's name is not (yet) owned by
// this operator's signer.
var ErrNotTransferred = errors.New("name not transferred to you")

// TransferredOutcome is what SyncOnce does for an agent handed over.
const TransferredOutcome Outcome = "transferred"

// checkHandover is the buyer's side of a handover, before the first
// restore: the name must be ours on the registry and its record must name
// the handover's head. Nothing is written when it fails.
func (a *Agent) checkHandover(ctx context.Context, blob string) error {
	h := a.cfg.Handover
	if a.deps.Owners == nil || a.cfg.ENSName == "" {
		return fmt.Errorf("%w: a handed-over agent needs its ENS name and a chain", ErrNotTransferred)
	}
	owner, err := a.deps.Owners.Owner(ctx, a.cfg.ENSName)
	if err != nil {
		return fmt.Errorf("read the owner of %s: %w", a.cfg.ENSName, err)
	}
	if a.cfg.Self == (common.Address{}) {
		return fmt.Errorf("%w: cannot tell whether %s (owned by %s) is yours: chain.signer is not loaded", ErrNotTransferred, a.cfg.ENSName, owner.Hex())
	}
	if owner != a.cfg.Self {
		return fmt.Errorf("%w: %s is owned by %s, not by this operator's signer %s (has the seller run 'hermesd pointer transfer'?)",
			ErrNotTransferred, a.cfg.ENSName, owner.Hex(), a.cfg.Self.Hex())
	}
	if blob == "" {
		return fmt.Errorf("%w: %s has no agent-snapshot record; the handover names %s", snapshot.ErrBlobNotFound, a.cfg.ENSName, h.Head)
	}
	if !headref.Same(blob, h.Head) {
		return fmt.Errorf("the record of %s names %s, not the handover's head %s: ask the seller for a new handover", a.cfg.ENSName, blob, h.Head)
	}
	return nil
}

// afterHandoverRestore checks the restored brain against the handover's
// bundle hash; a mismatch removes what the restore wrote (the directory
// was empty).
func (a *Agent) afterHandoverRestore(r snapshot.Restored) error {
	h := a.cfg.Handover
	if r.BundleHash == h.BundleHash {
		a.log.Info("handed-over agent restored; its next snapshot is a re-key under this operator's key",
			"head", h.Head, "bundle_hash", r.BundleHash, "seller_key_id", h.KeyID)
		return nil
	}
	os.RemoveAll(a.cfg.BrainDir)
	return fmt.Errorf("%w: the handover's head restores to bundle hash %s, the handover says %s", snapshot.ErrHashMismatch, r.BundleHash, h.BundleHash)
}

// rekeyDue reports whether the last snapshot is the handover's head,
// written under the seller's key: the next snapshot must be taken even if
// nothing changed (the re-key).
func (a *Agent) rekeyDue(last *state.Snapshot) bool {
	return a.cfg.Handover != nil && last != nil && headref.Same(last.BlobID, a.cfg.Handover.Head)
}

// handoverPending reports whether this operator has not restored or
// written a snapshot of the agent yet: the handover's checks apply.
func (a *Agent) handoverPending() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.st.Last == nil && a.st.Published == ""
}
