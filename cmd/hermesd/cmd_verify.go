package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/walrus"
)

func runVerify(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "verify", "verify [-config FILE] [--at ENTRY] [--read-data] [--json] AGENT",
		`Check that an agent's snapshot is intact and restorable, without writing
anything to the brain.

For a v3 snapshot: the head's commit, every pack it needs (present, the size
and index the commit records), every tree, and the bundle hash and totals
recomputed from the trees; every chunk a file needs must be in a live pack
with sizes that add up. With --read-data every chunk is downloaded too,
decrypted, its id checked, and every file's SHA-256 (like restic check
--read-data).

A v1 or v2 snapshot is one blob: it is downloaded, decrypted and extracted
into a temporary directory, and its files must hash to its lock's bundle
hash (--read-data changes nothing).

--at picks the snapshot as 'hermesd restore' does (default: the latest).
Exit 0: intact; 3: verification failed; 6: authentication failed (wrong
key, another agent's snapshot, tampered bytes); 4: a blob is missing or
expired.`)
	cfgPath := configFlag(fs)
	at := fs.String("at", "", "verify a snapshot of the history: N (0 = latest), a blob id, or 0x + a bundle hash prefix")
	readData := fs.Bool("read-data", false, "v3: download and verify every chunk and every file's SHA-256")
	jsonOut := fs.Bool("json", false, "print JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("verify needs exactly one AGENT")
	}
	h, err := openHistory(ctx, env, *cfgPath, pos[0])
	if err != nil {
		return err
	}
	defer h.Close()
	e, err := h.resolve(ctx, *at)
	if err != nil {
		return err
	}
	out := verifyOutput{Agent: h.agent.ID, BlobID: e.BlobID}
	f, err := h.pipe.BlobFormat(ctx, e.BlobID)
	if err != nil {
		return err
	}
	out.Format = string(f)
	if f == snapshot.FormatV3 {
		r, err := h.pipe.OpenV3(ctx, e.BlobID)
		if err != nil {
			return err
		}
		rep, err := r.Check(ctx, *readData)
		if err != nil {
			return err
		}
		c := r.Commit()
		out.BundleHash, out.Files, out.Bytes = c.BundleHash.String(), rep.Files, rep.Bytes
		out.Packs, out.Trees, out.Chunks, out.ReadData = rep.Packs, rep.Trees, rep.Chunks, rep.ReadData
		out.Downloaded, out.Ranges = rep.Downloaded, rep.Ranges
		out.EndEpoch = c.MinEndEpoch()
	} else {
		tmp, err := os.MkdirTemp("", "hermesd-verify-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		res, err := h.pipe.Restore(ctx, e.BlobID, filepath.Join(tmp, "brain"))
		if err != nil {
			return err
		}
		out.BundleHash, out.Files, out.Bytes = res.BundleHash.String(), res.Files, res.Bytes
		out.ReadData, out.Downloaded, out.Ranges = true, res.Downloaded, res.Ranges
	}
	if *jsonOut {
		return json.NewEncoder(env.stdout).Encode(out)
	}
	fmt.Fprintf(env.stdout, "%s: %s snapshot %s is intact: bundle hash %s, %d files, %s", out.Agent, out.Format,
		sanitize(out.BlobID), out.BundleHash, out.Files, walrus.FormatSize(out.Bytes))
	if out.Format == string(snapshot.FormatV3) {
		fmt.Fprintf(env.stdout, "; %d packs, %d trees, %d chunks", out.Packs, out.Trees, out.Chunks)
		if !out.ReadData {
			fmt.Fprint(env.stdout, " (located, not downloaded: add --read-data)")
		}
	}
	fmt.Fprintf(env.stdout, "; %s read in %d request(s)\n", walrus.FormatSize(out.Downloaded), out.Ranges)
	return nil
}

type verifyOutput struct {
	Agent      string `json:"agent"`
	BlobID     string `json:"blobId"`
	Format     string `json:"format"`
	BundleHash string `json:"bundleHash"`
	Files      int    `json:"files"` // v3: the lock and receipts included
	Bytes      int64  `json:"bytes"`
	Packs      int    `json:"packs,omitempty"`
	Trees      int    `json:"trees,omitempty"`
	Chunks     int    `json:"chunks,omitempty"`
	ReadData   bool   `json:"readData"`
	Downloaded int64  `json:"downloaded"`
	Ranges     int64  `json:"ranges"`
	EndEpoch   uint64 `json:"endEpoch,omitempty"`
}
