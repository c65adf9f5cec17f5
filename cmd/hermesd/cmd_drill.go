package main

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/hermesd/hermesd/internal/drill"
)

func runDrill(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "drill", "drill [-config FILE] [--mode b|a] [--blob ID] [--destructive] [--escrow] [--keep] [--scratch DIR] [--json] AGENT",
		`Amnesia drill: prove that AGENT's brain comes back from chain plus Walrus
alone, byte for byte and mode for mode.

 1. Snapshot: hash the brain; if it changed since its last verified snapshot,
    snapshot it (pack, upload, read back and verify) and publish the ENS
    pointer by compare-and-set, exactly as the daemon does, recording it in
    the agent's state. The drill needs the state directory to itself: stop
    hermesd first (a running hermesd makes it exit 5).
 2. Cold restore, with fresh Walrus and chain clients and a new spool, into
    a scratch directory: mode b (default) reads the blob id from the ENS
    record agent-snapshot (the cold boot); mode a uses only the key and the
    blob id (the one just verified, or --blob). Both download, decrypt,
    extract and verify the bundle hash.
 3. Compare every file and directory with the live brain: contents byte for
    byte, modes, sizes, the set of paths. bundle.lock.json must equal the
    live lock except for the upload record the live lock gained after the
    upload; every restored line of receipts.ndjson must be in the live file
    (receipts may arrive after a snapshot). Symlinks are not part of
    snapshots and are only listed.
 4. Re-hash the restore; it must equal the restored lock's bundleHash and
    the live brain's. The scratch directory is deleted unless --keep.

--destructive wipes the real brain directory instead and restores it in
place through the same path. It refuses unless the snapshot of the current
state is verified (and, with an ENS name, published) first. The wipe has a
safety net: the brain is renamed to a sibling directory .NAME.drill-XXXX/,
the restore is compared with a manifest (path, sha256, mode, size) taken
before the wipe, and the moved-aside original is deleted only when all of
it matched; on any failure it is renamed back into place. Should the drill
be killed mid-way, the original is in that sibling directory.

--escrow restores with the agent key recovered from the head pack's key
escrow (seal.escrow) by threshold key servers, with only seal.sui_key: no
key file on the cold path. The report names the key servers that answered.

Exit status: 0 pass; 3 any mismatch, or a blob that does not read back
intact; 6 the blob does not decrypt (wrong key, tampered blob); 4 no brain,
pointer or blob; 5 hermesd holds the state directory; 7 the name's
offchain (CCIP-read) lookup is refused.`)
	cfgPath := configFlag(fs)
	mode := fs.String("mode", "b", "b: cold boot from the ENS pointer; a: key + blob id only, no ENS")
	blob := fs.String("blob", "", "mode a: restore this blob id instead of the snapshot the drill just verified")
	destructive := fs.Bool("destructive", false, "wipe the real brain directory and restore it in place (moved aside first, put back on any failure)")
	keep := fs.Bool("keep", false, "keep the scratch directory (the restored copy, or a failed destructive restore)")
	scratch := fs.String("scratch", "", "create the scratch directory in `DIR` (default: the system's temporary directory)")
	jsonOut := fs.Bool("json", false, "print the report as one JSON object")
	escrow := fs.Bool("escrow", false, "recover the agent key from the head pack's key escrow (Sui key only) instead of the key file")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("drill needs exactly one AGENT")
	}
	m := drill.Mode(*mode)
	switch {
	case m != drill.ModeA && m != drill.ModeB:
		return usageErrorf("--mode is a or b, not %q", *mode)
	case *blob != "" && m != drill.ModeA:
		return usageErrorf("--blob needs --mode a (mode b reads the blob id from the ENS pointer)")
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if _, err := cfg.Agent(pos[0]); err != nil {
		return withCode(exitUsage, err)
	}
	log, err := newLogger(env.stderr, cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		return withCode(exitUsage, err)
	}
	rep, err := drill.Run(ctx, drill.Options{
		Config:      cfg,
		Agent:       pos[0],
		Mode:        m,
		Destructive: *destructive,
		BlobID:      *blob,
		Keep:        *keep,
		ScratchDir:  *scratch,
		Escrow:      *escrow,
		Log:         log,
	})
	if rep.Agent != "" { // the drill started: report what it did
		var perr error
		if *jsonOut {
			perr = json.NewEncoder(env.stdout).Encode(rep)
		} else {
			perr = rep.WriteText(env.stdout)
		}
		if err == nil {
			err = perr
		}
	}
	return drillExitError(err)
}

// drillExitError attaches the exit code to a drill failure; what the drill
// does not classify itself (a locked state directory, a blob that does not
// decrypt, ...) is left to classify.
func drillExitError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, drill.ErrOptions), errors.Is(err, drill.ErrSetup):
		return withCode(exitUsage, err)
	case errors.Is(err, drill.ErrMismatch), errors.Is(err, drill.ErrPointer):
		return withCode(exitMismatch, err)
	case errors.Is(err, drill.ErrNoBrain):
		return withCode(exitNotFound, err)
	}
	return err
}
