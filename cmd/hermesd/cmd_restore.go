package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/walrus"
)

func runRestore(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "restore", "restore [-config FILE] [--blob ID | --at ENTRY] [--path PATH] [--dir DIR] [--unverified] [--escrow [--write-key FILE]] [--json] AGENT",
		`Cold-restore an agent's brain from chain plus Walrus, once, as 'hermesd run'
does at start (for init containers): when the brain directory is missing or
holds no files, read the ENS pointer, download, decrypt, extract into a
temporary directory, verify the bundle hash, and move it into place. An
existing brain is left alone (exit 0) without contacting the chain. No
pointer means a fresh start from the seed directory.

A v3 snapshot is read with range reads of only the objects it needs; every
object, every file's SHA-256 and the bundle hash are verified before the
directory is moved into place.

With --dir, the snapshot is restored into DIR instead (which must be empty),
and nothing of the agent's own state changes. --blob picks a blob id;
--at picks a snapshot of the history 'hermesd log' lists: N (0 = the
latest, 1 = its parent), a blob id, or 0x and a bundle hash prefix. --path
restores only that file or directory of a v3 snapshot (verified likewise).
They need --dir, so a running brain is never overwritten.

--unverified installs a v1/v2 snapshot that has no bundle.lock.json, or
whose files do not match it — e.g. one the reference runtime took while its
brain was changing — into --dir, or as the brain itself when the brain
directory is missing or empty (a cold restore the operator asks for). The
blob must still decrypt and authenticate: a blob that fails its AEAD is
never installed. The output says what could not be checked and what the
files hash to. (A v3 snapshot is always verified: its commit is the claim.)

Special bits: a restore gives files and directories their recorded
permission bits, setgid and sticky bits, but not setuid or setgid on files
(a set-id program is a privilege for whoever runs it): each file restored
without them is listed. The brain directory gets the mode the snapshot
records, but an existing directory is never widened (also listed).

--escrow restores a v3 snapshot written with seal.escrow without the key
file: the agent key is recovered from the head pack's key escrow by
seal.threshold key servers, asked as seal.sui_key (which the policy must
admit), and checked against the pack's key id; then the restore verifies
as always. It takes --dir or restores the brain directory when that is
empty, and --blob, not --at. --write-key FILE then saves the recovered
agent key (mode 0600, never over an existing file) for agents[].key.file,
so the daemon can go on writing under the same key.`)
	cfgPath := configFlag(fs)
	blob := fs.String("blob", "", "restore this blob id instead of the one the ENS pointer names")
	at := fs.String("at", "", "restore a snapshot of the history: N (0 = latest), a blob id, or 0x + a bundle hash prefix")
	path := fs.String("path", "", "restore only this file or directory of a v3 snapshot (with --dir)")
	dir := fs.String("dir", "", "restore into this directory instead of the agent's brain directory")
	unverified := fs.Bool("unverified", false, "install a snapshot whose bundle hash cannot be verified (it must still decrypt), and say so")
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	escrow := fs.Bool("escrow", false, "recover the agent key from the head pack's key escrow with only seal.sui_key (no key file)")
	writeKey := fs.String("write-key", "", "with --escrow: save the recovered agent key to this new file (for agents[].key.file)")
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
	if (*blob != "" || *at != "" || *path != "") && *dir == "" {
		return usageErrorf("--blob, --at and --path restore into --dir DIR (stop hermesd and swap directories to roll a live brain back)")
	}
	if *escrow && (*at != "" || *unverified) {
		return usageErrorf("--escrow takes --blob and --dir, not --at or --unverified")
	}
	if *writeKey != "" {
		if !*escrow {
			return usageErrorf("--write-key saves a key recovered with --escrow")
		}
		if _, err := os.Lstat(*writeKey); err == nil {
			return usageErrorf("--write-key %s: the file exists; refusing to overwrite it", *writeKey)
		}
	}
	out := restoreOutput{Agent: pos[0]}
	if *dir != "" {
		if err := checkRestoreDir(*cfgPath, *dir); err != nil {
			return err
		}
	}
	if *dir == "" {
		// An existing brain needs nothing remote: an init container on a
		// healthy brain must succeed while the chain is unreachable.
		_, ac, _, err := loadAgentConfig(env, *cfgPath, pos[0], "")
		if err != nil {
			return err
		}
		if has, err := snapshot.HasFiles(ac.BrainDir); err != nil {
			return err
		} else if has {
			res, err := hash.Dir(ctx, ac.BrainDir, hash.Options{})
			if err != nil {
				return fmt.Errorf("hash %s: %w", ac.BrainDir, err)
			}
			out.Dir, out.Origin, out.BundleHash = ac.BrainDir, "existing", res.Digest.String()
			return printRestore(env, out, *jsonOut)
		}
	}
	if *escrow {
		return restoreEscrow(ctx, env, *cfgPath, pos[0], *blob, *dir, *path, *writeKey, *jsonOut)
	}
	oc, err := openAgent(ctx, env, *cfgPath, pos[0], "")
	if err != nil {
		return err
	}
	defer oc.Close()
	cfg, ac, svc := oc.cfg, oc.agent, oc.svc

	if *dir == "" {
		st, err := svc.PrepareOnce(ctx, ac.ID, agent.PrepareOptions{Unverified: *unverified})
		if err != nil {
			return err
		}
		out.Dir, out.Origin, out.BundleHash = st.BrainDir, st.StartedAs, st.BundleHash
		if st.Last != nil {
			out.BlobID, out.EndEpoch = st.Last.BlobID, st.Last.EndEpoch
		}
		if r := st.Restore; r != nil && st.StartedAs == "restored" {
			out.Links, out.Skipped, out.Stripped, out.Notes, out.Unverified = r.Links, r.Skipped, r.Stripped, r.Notes, r.Unchecked
		}
		return printRestore(env, out, *jsonOut)
	}

	sd, err := compose.OpenState(cfg)
	if err != nil {
		return err
	}
	defer sd.Close()
	pipe := svc.Pipeline(ac, sd.SpoolDir(), nil)
	id := *blob
	if id == "" {
		h, err := oc.history(ctx, pipe)
		if err != nil {
			return err
		}
		e, err := h.resolve(ctx, *at)
		if err != nil {
			return err
		}
		id = e.BlobID
	}
	res, err := pipe.RestoreWith(ctx, id, *dir, snapshot.RestoreOptions{Unverified: *unverified, Path: *path, PublicRoot: cfg.AllowUnsafeDirs})
	if err != nil {
		if errors.Is(err, snapshot.ErrNoLock) || errors.Is(err, snapshot.ErrHashMismatch) {
			return fmt.Errorf("%w (to install it anyway, unverified: add --unverified)", err)
		}
		return err
	}
	out.Dir, out.Origin, out.BlobID = *dir, "restored", id
	out.BundleHash, out.Files, out.Bytes = res.BundleHash.String(), res.Files, res.Bytes
	out.BlobBytes, out.Skipped, out.EndEpoch = res.BlobSize, res.Skipped, res.EndEpoch
	out.Format, out.Path, out.Downloaded, out.Ranges = string(res.Format), *path, res.Downloaded, res.Ranges
	out.DownloadMS, out.UnpackMS = res.Download.Milliseconds(), res.Unpack.Milliseconds()
	out.Unverified, out.Stripped, out.Notes, out.Links = res.Unchecked, res.Stripped, res.Notes, res.Links
	return printRestore(env, out, *jsonOut)
}

// checkRestoreDir refuses a --dir that the configuration would refuse as
// a brain directory: a system directory (fsys.CheckSystemDir: a restore
// as root writes the snapshot's files and modes there) or the user's
// home, unless allow_unsafe_dirs. Nothing is created before.
func checkRestoreDir(cfgPath, dir string) error {
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		return err
	}
	if cfg.AllowUnsafeDirs {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return withCode(exitUsage, fmt.Errorf("--dir %s: %w", dir, err))
	}
	for _, check := range []func(string) error{fsys.CheckSystemDir, fsys.CheckNotHome} {
		if err := check(abs); err != nil {
			return withCode(exitUsage, fmt.Errorf("--dir: %w (set allow_unsafe_dirs: true to allow it)", err))
		}
	}
	return nil
}

type restoreOutput struct {
	Agent      string `json:"agent"`
	Dir        string `json:"dir"`
	Origin     string `json:"origin"` // restored, fresh, existing
	BlobID     string `json:"blobId,omitempty"`
	Format     string `json:"format,omitempty"`
	Path       string `json:"path,omitempty"` // a v3 restore of one file or directory
	BundleHash string `json:"bundleHash,omitempty"`
	Files      int    `json:"files,omitempty"`
	Bytes      int64  `json:"bytes,omitempty"`
	BlobBytes  int64  `json:"blobBytes,omitempty"`
	// EndEpoch is the Walrus epoch the snapshot stays restorable until, as
	// recorded (the agent's upload record, else the commit's packs); 0
	// when nothing records it.
	EndEpoch   uint64   `json:"endEpoch,omitempty"`
	Downloaded int64    `json:"downloaded,omitempty"` // bytes read from Walrus
	Ranges     int64    `json:"ranges,omitempty"`     // range requests (v3)
	DownloadMS int64    `json:"downloadMs,omitempty"`
	UnpackMS   int64    `json:"unpackMs,omitempty"`
	Skipped    []string `json:"skipped,omitempty"`
	// Links counts the files restored as hard links of another name.
	Links int `json:"links,omitempty"`
	// Stripped lists the files restored without their setuid or setgid
	// bits; Notes what else the operator should know.
	Stripped []string `json:"stripped,omitempty"`
	Notes    []string `json:"notes,omitempty"`
	// Unverified lists what an --unverified restore could not check.
	Unverified []string `json:"unverified,omitempty"`
	// Escrow says where the agent key came from with --escrow.
	Escrow *escrowOutput `json:"escrow,omitempty"`
}

func printRestore(env *cmdEnv, o restoreOutput, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(env.stdout).Encode(o)
	}
	switch o.Origin {
	case "restored":
		what := o.Agent
		if o.Path != "" {
			what = fmt.Sprintf("%s of %s", sanitize(o.Path), o.Agent)
		}
		from := "blob"
		if o.Format != "" {
			from = o.Format + " blob"
		}
		fmt.Fprintf(env.stdout, "restored %s into %s from %s %s (bundle hash %s", what, o.Dir, from, sanitize(o.BlobID), o.BundleHash)
		if o.Files > 0 {
			fmt.Fprintf(env.stdout, ", %d files, %d bytes, download %s, unpack %s", o.Files, o.Bytes,
				time.Duration(o.DownloadMS)*time.Millisecond, time.Duration(o.UnpackMS)*time.Millisecond)
		}
		if o.Format == string(snapshot.FormatV3) {
			fmt.Fprintf(env.stdout, ", %s read in %d range requests", walrus.FormatSize(o.Downloaded), o.Ranges)
		}
		if o.EndEpoch > 0 {
			fmt.Fprintf(env.stdout, ", end epoch %d", o.EndEpoch)
		}
		fmt.Fprintln(env.stdout, ")")
	case "fresh":
		fmt.Fprintf(env.stdout, "%s has no snapshot yet; started fresh in %s\n", o.Agent, o.Dir)
	default:
		fmt.Fprintf(env.stdout, "%s: brain already present in %s (bundle hash %s); nothing restored\n", o.Agent, o.Dir, o.BundleHash)
	}
	if e := o.Escrow; e != nil {
		fmt.Fprintf(env.stdout, "  agent key (id %s) recovered from the %d-byte key escrow in %s by key servers %s\n",
			e.KeyID, e.Bytes, time.Duration(e.MS)*time.Millisecond, sanitize(strings.Join(e.Servers, ", ")))
		if e.KeyFile != "" {
			fmt.Fprintf(env.stdout, "  agent key saved to %s (set agents[].key.file to it to go on writing under this key)\n", e.KeyFile)
		}
	}
	if o.Links > 0 {
		fmt.Fprintf(env.stdout, "  %s restored as hard links of another name\n", receiptsCount(o.Links, "file", "files"))
	}
	for _, s := range o.Skipped {
		fmt.Fprintf(env.stdout, "  skipped: %s\n", sanitize(s))
	}
	for _, s := range o.Stripped {
		fmt.Fprintf(env.stdout, "  stripped: %s\n", sanitize(s))
	}
	for _, s := range o.Notes {
		fmt.Fprintf(env.stdout, "  note: %s\n", sanitize(s))
	}
	for _, s := range o.Unverified {
		fmt.Fprintf(env.stdout, "  NOT VERIFIED: %s\n", sanitize(s))
	}
	if len(o.Unverified) > 0 {
		fmt.Fprintf(env.stdout, "  the restored files hash to %s; nothing vouches that this is the state the snapshot claims\n", o.BundleHash)
	}
	return nil
}
