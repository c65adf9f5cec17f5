package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/drill"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/redact"
)

func runDrill(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "drill", "drill [-config FILE] [--mode b|a] [--blob ID] [--destructive] [--escrow] [--keep] [--scratch DIR] [--json] AGENT",
		`Amnesia drill: prove that AGENT's brain comes back from chain plus Walrus
alone, byte for byte and mode for mode.

The drill runs beside a running daemon, or without one: it takes no lock
and changes nothing (the way restic checks a repository while backups run).

 1. Find the snapshot: mode b (default, the cold boot) reads the ENS record
    agent-snapshot, as a fresh machine would; mode a needs no chain: the
    newest verified snapshot the state directory records (read without its
    lock), or --blob ID.
 2. Restore it, with fresh Walrus and chain clients and a spool of its own,
    into a scratch directory: download, decrypt, extract, verify every
    object, file SHA-256 and the bundle hash.
 3. Check it against the snapshot itself: re-hash the tree, which must give
    the snapshot's bundle hash; for v3 compare every file's size, SHA-256
    and mode and every directory's mode with the snapshot's trees.
 4. Compare it with the live brain: contents byte for byte, modes, the set
    of paths. The brain may have moved on since the snapshot: a difference
    whose live file (or, for one gone, its directory) changed after the
    snapshot was taken is listed as such, not a failure; any other fails
    the drill. bundle.lock.json must equal the live lock but for the upload
    record it gained; every restored line of receipts.ndjson must be in the
    live file. Symlinks are not part of snapshots and are only listed.
 The scratch directory is deleted unless --keep.

--destructive wipes the real brain directory instead and restores it in
place through the same path. It changes the brain, so it needs the state
directory to itself (a running daemon makes it exit 5: stop it first) and
first snapshots and publishes the brain as the daemon would. It refuses
unless that snapshot is verified (and, with an ENS name, published). The
wipe has a safety net: the brain is renamed to a sibling directory
.NAME.drill-XXXX/, the restore is compared with a manifest (path, sha256,
mode, size) taken before the wipe, and the moved-aside original is deleted
only when all of it matched; on any failure it is renamed back into place.
Should the drill be killed mid-way, the original is in that sibling
directory.

--escrow restores with the agent key recovered from the head pack's key
escrow (seal.escrow) by threshold key servers, with only seal.sui_key: no
key file on the cold path. The report names the key servers that answered.

Exit status: 0 pass; 3 any difference nothing explains, or a blob that does
not read back intact; 6 the blob does not decrypt (wrong key, tampered
blob); 4 no brain, pointer, snapshot or blob; 5 hermesd holds the state
directory (--destructive); 7 the name's offchain (CCIP-read) lookup is
refused; 1 the chain or Walrus unreachable (one line says how to start
them).`)
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
	ac, err := cfg.Agent(pos[0])
	if err != nil {
		return withCode(exitUsage, err)
	}
	if *destructive {
		// The destructive drill publishes a snapshot of the brain first.
		if err := requireSigners(cfg, "drill --destructive", ac); err != nil {
			return err
		}
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
	err = unreachable(cfg, err)
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
	case errors.Is(err, drill.ErrNoBrain), errors.Is(err, drill.ErrNoSnapshot):
		return withCode(exitNotFound, err)
	}
	return err
}

// hintError is an error said in one line of what to do about it; the
// cause stays matchable (errors.Is) for the exit code.
type hintError struct {
	msg   string
	cause error
}

func (e *hintError) Error() string { return e.msg }
func (e *hintError) Unwrap() error { return e.cause }

// unreachable turns a chain or Walrus that does not answer into one line
// saying where it was looked for and how to start it: for the devnet's
// configuration, the devnet's own commands.
func unreachable(cfg *config.Config, err error) error {
	if err == nil {
		return nil
	}
	dn := devnetDir(cfg)
	switch {
	case errors.Is(err, ens.ErrUnavailable) && !errors.Is(err, ens.ErrGatewayUnavailable):
		hint := "is the node up? (a drill with --mode a needs no chain)"
		if dn != "" {
			hint = fmt.Sprintf("start the devnet with `make devnet` (or `make run`, or bin/hermesd-devnet -dir %s); a drill with --mode a needs no chain", dn)
		}
		return &hintError{fmt.Sprintf("chain unreachable at %s: %s", redact.URL(cfg.Chain.RPC), hint), err}
	case errors.Is(err, syscall.ECONNREFUSED) && len(cfg.Walrus.Aggregators) > 0:
		agg := redact.URL(cfg.Walrus.Aggregators[0])
		hint := "is the aggregator up?"
		if dn != "" {
			hint = fmt.Sprintf("start the devnet with `make devnet` (or `make run`), or serve its blobs alone: bin/hermesd walrus serve --dir %s --listen %s",
				filepath.Join(dn, "walrus"), strings.TrimPrefix(agg, "http://"))
		}
		return &hintError{fmt.Sprintf("walrus unreachable at %s: %s", agg, hint), err}
	}
	return err
}

// devnetDir is the devnet's directory when cfg is the configuration
// hermesd-devnet wrote there, else "".
func devnetDir(cfg *config.Config) string {
	if cfg.Path == "" {
		return ""
	}
	f, err := os.Open(cfg.Path)
	if err != nil {
		return ""
	}
	defer f.Close()
	first, _ := bufio.NewReader(io.LimitReader(f, 256)).ReadString('\n')
	if !strings.HasPrefix(first, devnetConfigHeader) {
		return ""
	}
	return filepath.Dir(cfg.Path)
}

// devnetConfigHeader begins the configuration hermesd-devnet writes.
const devnetConfigHeader = "# hermesd configuration for the local devnet, written by 'hermesd-devnet'."
