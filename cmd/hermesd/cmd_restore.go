package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/daemon"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
)

func runRestore(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "restore", "restore [-config FILE] [--blob ID | --at ENTRY] [--dir DIR] [--json] AGENT",
		`Cold-restore an agent's brain from chain plus Walrus, once, as 'hermesd run'
does at start (for init containers): when the brain directory is missing or
holds no files, read the ENS pointer, download, decrypt, extract into a
temporary directory, verify the bundle hash, and move it into place. An
existing brain is left alone (exit 0). No pointer means a fresh start from the
seed directory.

With --dir, the snapshot is restored into DIR instead (which must be empty),
and nothing of the agent's own state changes. --blob picks a blob id;
--at picks an earlier snapshot from the lineage of the latest one: a number
(1 = the parent of the latest), a blob id, or a bundle hash prefix. Both
need --dir, so a running brain is never overwritten.`)
	cfgPath := configFlag(fs)
	blob := fs.String("blob", "", "restore this blob id instead of the one the ENS pointer names")
	at := fs.String("at", "", "restore an entry of the lineage: N, a blob id, or a bundle hash prefix")
	dir := fs.String("dir", "", "restore into this directory instead of the agent's brain directory")
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("restore needs exactly one AGENT")
	}
	if *blob != "" && *at != "" {
		return usageErrorf("--blob and --at are exclusive")
	}
	if (*blob != "" || *at != "") && *dir == "" {
		return usageErrorf("--blob and --at restore into --dir DIR (stop hermesd and swap directories to roll a live brain back)")
	}
	oc, err := openAgent(ctx, env, *cfgPath, pos[0], "")
	if err != nil {
		return err
	}
	defer oc.Close()
	cfg, ac, log, svc := oc.cfg, oc.agent, oc.log, oc.svc

	out := restoreOutput{Agent: ac.ID}
	if *dir == "" {
		st, err := daemon.PrepareOnce(ctx, cfg, svc, ac.ID, log)
		if err != nil {
			return err
		}
		out.Dir, out.Origin, out.BundleHash = st.BrainDir, st.StartedAs, st.BundleHash
		if st.Last != nil {
			out.BlobID = st.Last.BlobID
		}
		return printRestore(env, out, *jsonOut)
	}

	id := *blob
	if id == "" {
		latest, err := latestBlob(ctx, cfg, ac, svc)
		if err != nil {
			return err
		}
		id = latest
		if *at != "" {
			lock, err := snapshot.ReadLock(ctx, svc.Walrus, latest, svc.Key, ac.Identity())
			if err != nil {
				return fmt.Errorf("read lineage of %s: %w", latest, err)
			}
			e, err := pickLineage(lock.Lineage(), *at)
			if err != nil {
				return withCode(exitNotFound, err)
			}
			id = e.BlobID
		}
	}
	sd, err := state.Open(cfg.StateDir)
	if err != nil {
		return err
	}
	defer sd.Close()
	var others []string
	for _, o := range cfg.Agents {
		if o.ID != ac.ID {
			others = append(others, o.Identity())
		}
	}
	r := &snapshot.Restorer{
		Store:    svc.Walrus,
		SpoolDir: sd.SpoolDir(),
		Key:      svc.Key,
		Identity: ac.Identity(),
		Others:   others,
		Log:      log,
	}
	res, err := r.Restore(ctx, id, *dir)
	if err != nil {
		return err
	}
	out.Dir, out.Origin, out.BlobID = *dir, "restored", id
	out.BundleHash, out.Files, out.Bytes = res.BundleHash.String(), res.Files, res.Bytes
	out.BlobBytes, out.Skipped = res.BlobSize, res.Skipped
	out.DownloadMS, out.UnpackMS = res.Download.Milliseconds(), res.Unpack.Milliseconds()
	return printRestore(env, out, *jsonOut)
}

// latestBlob is the agent's newest snapshot: the ENS pointer, or for an
// agent without a name the last snapshot in the local state.
func latestBlob(ctx context.Context, cfg *config.Config, ac *config.Agent, svc daemon.Services) (string, error) {
	if ac.ENSName != "" && svc.ENS != nil {
		v, err := svc.ENS.Read(ctx, ac.ENSName)
		if errors.Is(err, ens.ErrNoPointer) {
			return "", withCode(exitNotFound, fmt.Errorf("%s has no agent-snapshot record", ac.ENSName))
		}
		return v, err
	}
	st, err := state.LoadAgent(state.AgentPath(cfg.StateDir, ac.ID))
	if err != nil {
		return "", err
	}
	if st.Last == nil {
		return "", withCode(exitNotFound, fmt.Errorf("agent %s has no ENS name and no snapshot in %s", ac.ID, cfg.StateDir))
	}
	return st.Last.BlobID, nil
}

// pickLineage finds an entry by position (1 = newest earlier snapshot),
// blob id, or bundle hash prefix.
func pickLineage(es []bundlelock.LineageEntry, sel string) (bundlelock.LineageEntry, error) {
	if n, err := strconv.Atoi(sel); err == nil {
		if n < 1 || n > len(es) {
			return bundlelock.LineageEntry{}, fmt.Errorf("lineage has %d entries; --at %d is out of range", len(es), n)
		}
		return es[n-1], nil
	}
	var found []bundlelock.LineageEntry
	for _, e := range es {
		if e.BlobID == sel {
			return e, nil
		}
		if len(sel) >= 6 && strings.HasPrefix(strings.ToLower(e.BundleHash), strings.ToLower(sel)) {
			found = append(found, e)
		}
	}
	switch len(found) {
	case 0:
		return bundlelock.LineageEntry{}, fmt.Errorf("no lineage entry matches %q", sel)
	case 1:
		return found[0], nil
	}
	return bundlelock.LineageEntry{}, fmt.Errorf("%q matches %d lineage entries; give more of the hash or the blob id", sel, len(found))
}

type restoreOutput struct {
	Agent      string   `json:"agent"`
	Dir        string   `json:"dir"`
	Origin     string   `json:"origin"` // restored, fresh, existing
	BlobID     string   `json:"blobId,omitempty"`
	BundleHash string   `json:"bundleHash,omitempty"`
	Files      int      `json:"files,omitempty"`
	Bytes      int64    `json:"bytes,omitempty"`
	BlobBytes  int64    `json:"blobBytes,omitempty"`
	DownloadMS int64    `json:"downloadMs,omitempty"`
	UnpackMS   int64    `json:"unpackMs,omitempty"`
	Skipped    []string `json:"skipped,omitempty"`
}

func printRestore(env *cmdEnv, o restoreOutput, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(env.stdout).Encode(o)
	}
	switch o.Origin {
	case "restored":
		fmt.Fprintf(env.stdout, "restored %s into %s from blob %s (bundle hash %s", o.Agent, o.Dir, o.BlobID, o.BundleHash)
		if o.Files > 0 {
			fmt.Fprintf(env.stdout, ", %d files, %d bytes, download %s, unpack %s", o.Files, o.Bytes,
				time.Duration(o.DownloadMS)*time.Millisecond, time.Duration(o.UnpackMS)*time.Millisecond)
		}
		fmt.Fprintln(env.stdout, ")")
	case "fresh":
		fmt.Fprintf(env.stdout, "%s has no snapshot yet; started fresh in %s\n", o.Agent, o.Dir)
	default:
		fmt.Fprintf(env.stdout, "%s: brain already present in %s (bundle hash %s); nothing restored\n", o.Agent, o.Dir, o.BundleHash)
	}
	for _, s := range o.Skipped {
		fmt.Fprintf(env.stdout, "  skipped: %s\n", s)
	}
	return nil
}
