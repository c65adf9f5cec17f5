package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/state"
)

func runLog(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "log", "log [-config FILE] [--json] [--limit N] AGENT",
		`List an agent's snapshots, newest first: the one its ENS pointer names and
the lineage recorded inside it (blob id, bundle hash, time, size, end epoch).
Only the newest blob is read, and only up to its bundle.lock.json; older blobs
are never downloaded. Restore an entry with 'hermesd restore --at N --dir DIR'.`)
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
	oc, err := openAgent(ctx, env, *cfgPath, pos[0], "warn")
	if err != nil {
		return err
	}
	defer oc.Close()
	cfg, ac, svc := oc.cfg, oc.agent, oc.svc
	latest, _, err := svc.Latest(ctx, ac)
	if errors.Is(err, compose.ErrNoSnapshot) {
		return withCode(exitNotFound, err)
	}
	if err != nil {
		return err
	}
	lock, err := svc.Pipeline(ac, os.TempDir(), nil).ReadLock(ctx, latest)
	if err != nil {
		return fmt.Errorf("read %s: %w", latest, err)
	}
	type entry struct {
		N          int       `json:"n"`
		BlobID     string    `json:"blobId"`
		BundleHash string    `json:"bundleHash"`
		CreatedAt  time.Time `json:"createdAt"`
		Size       int64     `json:"size,omitempty"`
		EndEpoch   uint64    `json:"endEpoch,omitempty"`
	}
	head := entry{BlobID: latest, BundleHash: lock.BundleHash(), CreatedAt: time.UnixMilli(lock.LastUpdated()).UTC()}
	if st, err := state.LoadAgent(state.AgentPath(cfg.StateDir, ac.ID)); err == nil && st.Last != nil && st.Last.BlobID == latest {
		head.Size, head.EndEpoch = st.Last.Size, st.Last.EndEpoch
	}
	entries := []entry{head}
	for i, e := range lock.Lineage() {
		entries = append(entries, entry{N: i + 1, BlobID: e.BlobID, BundleHash: e.BundleHash,
			CreatedAt: time.UnixMilli(e.CreatedAt).UTC(), Size: e.Size, EndEpoch: e.EndEpoch})
	}
	if *limit > 0 && len(entries) > *limit {
		entries = entries[:*limit]
	}
	if *jsonOut {
		return json.NewEncoder(env.stdout).Encode(map[string]any{"agent": ac.ID, "ensName": ac.ENSName, "snapshots": entries})
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "N\tBLOB\tBUNDLE HASH\tCREATED\tSIZE\tEND EPOCH")
	for _, e := range entries {
		size, end := "?", "?"
		if e.Size > 0 {
			size = fmt.Sprint(e.Size)
		}
		if e.EndEpoch > 0 {
			end = fmt.Sprint(e.EndEpoch)
		}
		// Every field but N comes from the blob: hostile bytes must not
		// reach the terminal.
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", e.N, sanitize(e.BlobID), sanitize(e.BundleHash), e.CreatedAt.Format(time.RFC3339), size, end)
	}
	return tw.Flush()
}
