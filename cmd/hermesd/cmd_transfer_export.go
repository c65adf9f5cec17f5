package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/handover"
	"github.com/hermesd/hermesd/internal/pointer"
	"github.com/hermesd/hermesd/internal/snapshot"
)

const transferExportHelp = `Hand AGENT to a buyer (the seller's side): take a final snapshot, verify it
by restoring it to a scratch directory, publish it and read the record
back, then write the handover to FILE (mode 0600; an existing file is never
overwritten), age-encrypted to the buyer's recipient (--to, from the
buyer's 'hermesd transfer request'). The handover holds this agent's own
key only, never encryption.key: the operator's other agents stay
unreadable.

The agent is then marked transferred in the state directory: hermesd no
longer snapshots or publishes it (status and /readyz say so). Next, move
the name with 'hermesd pointer transfer NAME --to BUYER_ADDRESS --yes' and
send FILE to the buyer. Stop the daemon first: export works on the state
directory. Needs format v3 and an ENS name.`

// transferExport is what export prints with --json.
type transferExport struct {
	Agent      string `json:"agent"`
	ENSName    string `json:"ensName"`
	Head       string `json:"head"`
	BundleHash string `json:"bundleHash"`
	KeyID      string `json:"keyId"`
	Handover   string `json:"handover"`
	Seller     string `json:"seller"`
	Snapshot   bool   `json:"snapshot"` // a new snapshot was taken
}

func runTransferExport(ctx context.Context, env *cmdEnv, args []string) (err error) {
	fset := newFlagSet(env, "transfer export", "transfer export AGENT --to age1… -o FILE [-config FILE] [--json]", transferExportHelp)
	cfgPath := configFlag(fset)
	to := fset.String("to", "", "the buyer's age `RECIPIENT` (age1…; required)")
	outPath := fset.String("o", "", "write the handover to `FILE` (required)")
	asJSON := fset.Bool("json", false, "print what was handed over (never the key) as one JSON object")
	pos, err := parseInterspersed(fset, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 1:
		return usageErrorf("transfer export: want one AGENT, got %d arguments", len(pos))
	case *outPath == "":
		return usageErrorf("transfer export: -o FILE is required")
	}
	if _, err := handover.ParseRecipient(*to); err != nil {
		return usageErrorf("transfer export: --to: %v", err)
	}
	cfg, ac, log, err := loadAgentConfig(env, *cfgPath, pos[0], "")
	if err != nil {
		return err
	}
	switch {
	case cfg.Encryption.Format != string(snapshot.FormatV3):
		return usageErrorf("transfer export: agents are handed over in format v3 only (encryption.format is %q)", cfg.Encryption.Format)
	case ac.ENSName == "":
		return usageErrorf("transfer export: agent %s has no ens_name: only a published agent can be handed over", ac.ID)
	}
	if _, err := os.Lstat(*outPath); err == nil {
		return usageErrorf("transfer export: %s exists; it is never overwritten", *outPath)
	}
	if err := requireSigners(cfg, "transfer export", ac); err != nil {
		return err
	}
	svc, err := compose.Build(ctx, cfg, log, compose.Options{})
	if err != nil {
		return withCode(exitUsage, fmt.Errorf("startup: %w", err))
	}
	defer svc.Close()
	a, err := openAgentState(svc, cfg, ac.ID, "stop the daemon first (the final snapshot must be the last one)")
	if err != nil {
		return fmt.Errorf("transfer export: %w", err)
	}
	defer func() {
		if cerr := a.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("transfer export: %w", cerr)
		}
	}()
	if t := a.Transferred(); t != nil {
		return usageErrorf("transfer export: agent %s was already transferred: %s", ac.ID, t.Reason)
	}
	if err := a.Prepare(ctx); err != nil {
		return fmt.Errorf("transfer export: %w", err)
	}
	res, err := a.SyncOnce(ctx)
	if err != nil {
		return fmt.Errorf("transfer export: final snapshot: %w", err)
	}
	out := transferExport{Agent: ac.ID, ENSName: ac.ENSName, Snapshot: res.Outcome == agent.Snapshotted, Seller: svc.Self.Hex()}
	if err := publishFinal(ctx, svc, a.Agent); err != nil {
		return fmt.Errorf("transfer export: %w", err)
	}
	st := a.Status()
	if st.Last == nil {
		return fmt.Errorf("transfer export: agent %s has no snapshot", ac.ID)
	}
	out.Head, out.BundleHash = st.Last.BlobID, st.Last.BundleHash
	v, err := svc.Chain.Read(ctx, ac.ENSName)
	if err != nil {
		return fmt.Errorf("transfer export: read back %s: %w", ac.ENSName, err)
	}
	if v != out.Head {
		return fmt.Errorf("transfer export: %s names %s, not the final snapshot %s", ac.ENSName, v, out.Head)
	}

	// The buyer restores the head through the same path: so does this
	// check, into a scratch directory.
	pipe := svc.Pipeline(ac, a.dir.SpoolDir(), nil)
	scratch, err := os.MkdirTemp(a.dir.SpoolDir(), "export-verify-")
	if err != nil {
		return fmt.Errorf("transfer export: %w", err)
	}
	defer os.RemoveAll(scratch)
	r, err := pipe.Restore(ctx, out.Head, filepath.Join(scratch, "brain"))
	if err != nil {
		return fmt.Errorf("transfer export: verify the final snapshot: %w", err)
	}
	if r.BundleHash.String() != out.BundleHash {
		return withCode(exitMismatch, fmt.Errorf("transfer export: the final snapshot restores to %s, not %s", r.BundleHash, out.BundleHash))
	}
	os.RemoveAll(scratch)

	h := handover.Handover{Agent: ac.ID, Identity: ac.Identity(), ENSName: ac.ENSName, TokenID: ac.TokenID,
		Head: out.Head, BundleHash: r.BundleHash, Key: *pipe.AgentKey, Created: time.Now().UTC(), Seller: svc.Self}
	out.KeyID = h.KeyID()
	if err := writeHandover(*outPath, h, *to); err != nil {
		return fmt.Errorf("transfer export: %w", err)
	}
	out.Handover, _ = filepath.Abs(*outPath)
	if err := a.Head().MarkTransferred(out.Head, "handed over with 'hermesd transfer export' (handover "+out.Handover+")"); err != nil {
		return fmt.Errorf("transfer export: the handover is written, but the agent is not marked transferred: %w", err)
	}
	if *asJSON {
		return newJSONEncoder(env.stdout).Encode(out)
	}
	fmt.Fprintf(env.stdout, "handed over %s (%s)\n  head         %s\n  bundle hash  %s\n  key id       %s\n  handover     %s (mode 0600)\n",
		ac.ID, ac.ENSName, out.Head, out.BundleHash, out.KeyID, out.Handover)
	fmt.Fprintf(env.stderr, "this operator no longer snapshots %s. Next: 'hermesd pointer transfer %s --to BUYER_ADDRESS --yes', then send %s to the buyer\n",
		ac.ID, ac.ENSName, out.Handover)
	return nil
}

// publishFinal publishes the agent's pending pointer, if any, as the
// daemon does (a rollback found while writing is published over).
func publishFinal(ctx context.Context, svc *compose.Services, a *agent.Agent) error {
	r, ok := pointer.Publish(ctx, svc.Chains(), a.Head(), pointer.PublishOptions{})
	switch {
	case !ok:
		return nil
	case r.Outcome == pointer.Published && r.Err != nil:
		return fmt.Errorf("published %s, but the agent state was not saved: %w", r.Update.Value, r.Err)
	case r.Outcome == pointer.Published:
		return nil
	case r.Outcome == pointer.Rollback:
		return errors.New("publish the final snapshot: the record keeps going back")
	case r.Err == nil:
		return fmt.Errorf("publish the final snapshot: %s", r.Outcome)
	}
	return fmt.Errorf("publish the final snapshot (%s): %w", r.Outcome, r.Err)
}

// writeHandover writes the sealed handover to a new file of mode 0600.
func writeHandover(path string, h handover.Handover, recipient string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return withCode(exitUsage, fmt.Errorf("%s exists; it is never overwritten", path))
		}
		return err
	}
	err = handover.Seal(f, h, recipient)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("write handover %s: %w", path, err)
	}
	return nil
}
