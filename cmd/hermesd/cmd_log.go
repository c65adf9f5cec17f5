package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/repo"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
	"github.com/hermesd/hermesd/internal/walrus"
)

func runLog(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "log", "log [-config FILE] [--json] [--limit N] AGENT",
		`List an agent's snapshots, newest first, from the one its ENS pointer names
(for an agent without a name, the last one in the local state).

A v3 snapshot is a commit in its head pack: its parent, time, bundle hash,
files, how many files changed since the parent (from the trees alone, no file
content is downloaded), the bytes it added, and whether it is still
restorable (every pack it needs is on Walrus) or expired. The walk follows
each commit's parent; when it reaches a v1/v2 snapshot (an agent that
started before format v3), that blob's lock lists the older lineage. A lock
the agent runtime wrote names only the snapshot before its own
(walrusSnapshotBlobId): that one's lock is read in turn, and so on, so a
brain restored from the reference runtime shows its whole history.

END EPOCH is the Walrus epoch at which a snapshot stops being restorable:
the earliest end of the packs it needs. A v3 commit records the end epochs
of the packs it lists but not of its own head pack, which a newer commit
that still uses it records, and so does this machine's record of its
uploads (the brain's bundle.lock.json lineage, the agent's state); "-"
when nothing records it.

Restore an entry with 'hermesd restore AGENT --at N --dir DIR'; compare two
with 'hermesd diff AGENT A B'.`)
	cfgPath := configFlag(fs)
	jsonOut := fs.Bool("json", false, "print JSON")
	limit := fs.Int("limit", 0, "show at most N entries (0 = all)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("log needs exactly one AGENT")
	}
	if *limit < 0 {
		return usageErrorf("--limit must not be negative")
	}
	h, err := openHistory(ctx, env, *cfgPath, pos[0])
	if err != nil {
		return err
	}
	defer h.Close()
	entries, err := h.pipe.History(ctx, h.head, *limit)
	if err != nil {
		return err
	}
	fillEndEpochs(entries, localEndEpochs(h.cfg.StateDir, h.agent))
	if *jsonOut {
		return json.NewEncoder(env.stdout).Encode(map[string]any{"agent": h.agent.ID, "ensName": h.agent.ENSName, "snapshots": entries})
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "N\tTIME\tFORMAT\tBUNDLE HASH\tFILES\tCHANGED\tADDED\tEND EPOCH\tSTATUS\tBLOB")
	for _, e := range entries {
		files, changed, added, end, format := "-", "-", "-", "-", "-"
		if e.Format == snapshot.FormatV3 {
			files = strconv.FormatInt(e.Files, 10)
		}
		if e.Changed >= 0 {
			changed = strconv.Itoa(e.Changed)
		}
		if e.Added > 0 {
			added = walrus.FormatSize(e.Added)
		}
		if e.EndEpoch > 0 {
			end = strconv.FormatUint(e.EndEpoch, 10)
		}
		if e.Format != "" {
			format = string(e.Format)
		}
		// Everything but N comes from blobs: hostile bytes must not
		// reach the terminal.
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.N, e.Time.Format(time.RFC3339), format,
			sanitize(e.BundleHash), files, changed, added, end, e.Status, sanitize(e.BlobID))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, e := range entries {
		if e.Detail != "" {
			fmt.Fprintf(env.stdout, "%d: %s\n", e.N, sanitize(e.Detail))
		}
	}
	return nil
}

// localEndEpochs are the end epochs this machine recorded for the agent's
// snapshots when it uploaded them: the brain's bundle.lock.json lineage and
// the agent's state (read, not locked). A v3 commit does not record its
// own head pack's end epoch, so these complete what the commits say.
func localEndEpochs(stateDir string, ac *config.Agent) map[string]uint64 {
	known := map[string]uint64{}
	if lock, err := bundlelock.Read(filepath.Join(ac.BrainDir, bundlelock.FileName)); err == nil {
		for _, e := range lock.Lineage() {
			if e.EndEpoch > 0 {
				known[headref.ID(e.BlobID)] = e.EndEpoch
			}
		}
	}
	if st, err := state.LoadAgent(state.AgentPath(stateDir, ac.ID)); err == nil && st.Last != nil && st.Last.EndEpoch > 0 {
		known[headref.ID(st.Last.BlobID)] = st.Last.EndEpoch
	}
	return known
}

// fillEndEpochs sets each entry's end epoch to the earliest of what its
// blobs say and what was recorded locally.
func fillEndEpochs(entries []snapshot.HistoryEntry, known map[string]uint64) {
	for i := range entries {
		if k := known[headref.ID(entries[i].BlobID)]; k > 0 && (entries[i].EndEpoch == 0 || k < entries[i].EndEpoch) {
			entries[i].EndEpoch = k
		}
	}
}

// historyCommand is an agent command that reads the agent's history: its
// read-only services, the agent's pipeline and its newest snapshot.
type historyCommand struct {
	*agentCommand
	pipe *snapshot.Pipeline
	head string
}

// openHistory finds the agent's newest snapshot (exit 4 when it has none)
// and a pipeline to read it with; nothing is written but spool files in a
// temporary directory.
func openHistory(ctx context.Context, env *cmdEnv, cfgPath, id string) (*historyCommand, error) {
	oc, err := openAgent(ctx, env, cfgPath, id, "warn")
	if err != nil {
		return nil, err
	}
	h, err := oc.history(ctx, oc.svc.Pipeline(oc.agent, os.TempDir(), nil))
	if err != nil {
		oc.Close()
		return nil, err
	}
	return h, nil
}

// history reads the history through pipe; closing it closes oc.
func (oc *agentCommand) history(ctx context.Context, pipe *snapshot.Pipeline) (*historyCommand, error) {
	head, _, err := oc.svc.Latest(ctx, oc.agent)
	if errors.Is(err, compose.ErrNoSnapshot) {
		return nil, withCode(exitNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	return &historyCommand{agentCommand: oc, pipe: pipe, head: head}, nil
}

// resolve picks one snapshot of the history: "" or "0" is the newest, N
// the N-th before it (1 = its parent), a blob id that one, and "0x" and at
// least 6 hex digits the one whose bundle hash starts so.
func (h *historyCommand) resolve(ctx context.Context, sel string) (snapshot.HistoryEntry, error) {
	switch {
	case sel == "" || sel == "0":
		return snapshot.HistoryEntry{BlobID: h.head}, nil
	case strings.HasPrefix(sel, "0x"):
		if len(sel) < 8 {
			return snapshot.HistoryEntry{}, usageErrorf("a bundle hash prefix needs at least 6 hex digits after 0x")
		}
		all, err := h.pipe.History(ctx, h.head, 0)
		if err != nil {
			return snapshot.HistoryEntry{}, err
		}
		var found []snapshot.HistoryEntry
		for _, e := range all {
			if strings.HasPrefix(strings.ToLower(e.BundleHash), strings.ToLower(sel)) {
				found = append(found, e)
			}
		}
		switch len(found) {
		case 0:
			return snapshot.HistoryEntry{}, withCode(exitNotFound, fmt.Errorf("no snapshot in the history of %s has a bundle hash starting %s", h.agent.ID, sel))
		case 1:
			return found[0], nil
		}
		// The same state may be snapshotted more than once (renewals):
		// the newest one is as good as any.
		if allSame(found) {
			return found[0], nil
		}
		return snapshot.HistoryEntry{}, usageErrorf("%s matches %d snapshots of different states; give more of the hash", sel, len(found))
	}
	if n, err := strconv.Atoi(sel); err == nil {
		if n < 0 {
			return snapshot.HistoryEntry{}, usageErrorf("--at %d: counts start at 0, the newest snapshot", n)
		}
		es, err := h.pipe.History(ctx, h.head, n+1)
		if err != nil {
			return snapshot.HistoryEntry{}, err
		}
		if len(es) <= n {
			return snapshot.HistoryEntry{}, withCode(exitNotFound, fmt.Errorf("the history of %s has %d snapshot(s) that can be listed; %d is out of range", h.agent.ID, len(es), n))
		}
		return es[n], nil
	}
	if r, err := headref.Parse(sel); err != nil || !repo.ValidBlobID(r.ID) {
		return snapshot.HistoryEntry{}, usageErrorf("%q is neither N, a blob id (or head reference) nor a 0x bundle hash prefix", sel)
	}
	return snapshot.HistoryEntry{BlobID: sel}, nil
}

func allSame(es []snapshot.HistoryEntry) bool {
	for _, e := range es {
		if e.BundleHash != es[0].BundleHash {
			return false
		}
	}
	return true
}
