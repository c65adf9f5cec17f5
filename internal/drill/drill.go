package drill

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/pointer"
	"github.com/hermesd/hermesd/internal/repo"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
	"github.com/hermesd/hermesd/internal/walrus"
)

// Mode selects how the drill finds the snapshot to restore.
type Mode string

const (
	// ModeA restores from the key and a blob id only, without ENS.
	ModeA Mode = "a"
	// ModeB is the cold boot: the blob id comes from the agent's ENS
	// agent-snapshot record.
	ModeB Mode = "b"
)

var (
	// ErrMismatch means the restore differs from the live brain (see
	// Report.Mismatches).
	ErrMismatch = errors.New("drill: the restore differs from the live brain")
	// ErrPointer means the ENS record does not name the snapshot the drill
	// verified.
	ErrPointer = errors.New("drill: the ENS pointer does not name the verified snapshot")
	// ErrNoBrain means the brain directory is missing or holds no files:
	// there is nothing to drill.
	ErrNoBrain = errors.New("drill: nothing to drill")
	// ErrRefused means the destructive drill would not wipe the brain.
	ErrRefused = errors.New("drill: refusing to wipe the brain")
	// ErrOptions means Options are invalid.
	ErrOptions = errors.New("drill: invalid options")
	// ErrSetup means the configuration's services (keys, endpoints) could
	// not be set up.
	ErrSetup = errors.New("drill: startup")
	// ErrNoSnapshot means there is no snapshot to drill: mode a without
	// --blob found none recorded in the state directory.
	ErrNoSnapshot = errors.New("drill: no snapshot to drill")
)

// Options configure one drill.
type Options struct {
	Config *config.Config
	Agent  string // agent id
	Mode   Mode   // "" = ModeB
	// Destructive wipes the real brain directory (with a safety net, see
	// the package doc) and restores it in place.
	Destructive bool
	// BlobID restores this blob instead of the snapshot the drill just
	// verified (ModeA only).
	BlobID string
	// Keep keeps the scratch directory (and a failed destructive restore
	// in it) instead of deleting it.
	Keep bool
	// ScratchDir is where the scratch directory is created ("" = the
	// system's temporary directory).
	ScratchDir string
	// Escrow makes the cold path recover the agent key from the head
	// pack's key escrow (seal.escrow) with only the Sui key, instead of
	// the key file.
	Escrow bool
	Log    *slog.Logger // nil = discard

	hooks hooks
}

// hooks let tests act between stages.
type hooks struct {
	afterWipe func() // the brain has been moved aside
}

// Stage is one timed step of the drill.
type Stage struct {
	Name   string        `json:"name"`
	OK     bool          `json:"ok"`
	Took   time.Duration `json:"-"`
	MS     float64       `json:"ms"`
	Detail string        `json:"detail,omitempty"`
	Error  string        `json:"error,omitempty"`
}

// Report is what a drill did and found.
type Report struct {
	Agent       string `json:"agent"`
	ENSName     string `json:"ensName,omitempty"`
	Mode        Mode   `json:"mode"`
	Destructive bool   `json:"destructive"`
	BrainDir    string `json:"brainDir"`
	// ScratchDir is set when the scratch directory was kept.
	ScratchDir string `json:"scratchDir,omitempty"`
	// Snapshot is what the destructive drill's snapshot step did:
	// "snapshotted" or "unchanged" (the last verified snapshot already
	// holds this state).
	Snapshot string `json:"snapshot,omitempty"`
	// Source says where the blob id came from: the ENS record (mode b),
	// the state directory's newest verified snapshot or --blob (mode a).
	Source string `json:"source,omitempty"`
	// Taken is when the restored snapshot was taken (zero: not recorded).
	Taken      time.Time `json:"taken,omitzero"`
	BlobID     string    `json:"blobId,omitempty"`
	BundleHash string    `json:"bundleHash,omitempty"`
	Version    int64     `json:"version,omitempty"`
	TxHash     string    `json:"txHash,omitempty"`
	GasUsed    uint64    `json:"gasUsed,omitempty"`
	// Files and Bytes count the restored files the bundle hash covers;
	// BlobBytes is the encrypted blob's size.
	Files     int   `json:"files"`
	Bytes     int64 `json:"bytes"`
	BlobBytes int64 `json:"blobBytes"`
	// EscrowServers are the key servers that answered when the agent key
	// came from the key escrow (Options.Escrow).
	EscrowServers []string   `json:"escrowServers,omitempty"`
	Stages        []Stage    `json:"stages"`
	Result        string     `json:"result"` // "pass" or "fail"
	Mismatches    []Mismatch `json:"mismatches"`
	// MovedOn are the differences between the live brain and the restore
	// that the brain explains by having changed since the snapshot was
	// taken (not failures); Mismatches are the ones nothing explains.
	MovedOn []Mismatch    `json:"movedOn"`
	Notes   []string      `json:"notes,omitempty"`
	Error   string        `json:"error,omitempty"`
	Took    time.Duration `json:"-"`
	TookMS  float64       `json:"tookMs"`
}

// Passed reports whether the drill passed.
func (r *Report) Passed() bool { return r.Result == "pass" }

func (r *Report) stage(name string, start time.Time, err error, detail string) {
	took := time.Since(start)
	s := Stage{Name: name, OK: err == nil, Took: took, MS: ms(took), Detail: detail}
	if err != nil {
		s.Error = err.Error()
	}
	r.Stages = append(r.Stages, s)
}

// timed adds a stage that succeeded and took took.
func (r *Report) timed(name string, took time.Duration, detail string) {
	r.Stages = append(r.Stages, Stage{Name: name, OK: true, Took: took, MS: ms(took), Detail: detail})
}

func (r *Report) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Run performs one drill. The report is filled as far as the drill got;
// the error says why it failed: wrapping ErrMismatch or ErrPointer for a
// verification failure, cipher errors for a blob that does not decrypt,
// state.ErrLocked when hermesd runs on the same state directory, and so on.
func Run(ctx context.Context, o Options) (rep Report, err error) {
	start := time.Now()
	if o.Config == nil {
		return rep, fmt.Errorf("%w: no configuration", ErrOptions)
	}
	if o.Mode == "" {
		o.Mode = ModeB
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	ac, err := o.Config.Agent(o.Agent)
	if err != nil {
		return rep, fmt.Errorf("%w: %w", ErrOptions, err)
	}
	switch {
	case o.Mode != ModeA && o.Mode != ModeB:
		return rep, fmt.Errorf("%w: mode %q is not a or b", ErrOptions, o.Mode)
	case o.Mode == ModeB && o.BlobID != "":
		return rep, fmt.Errorf("%w: a blob id is for mode a; mode b reads it from the ENS pointer", ErrOptions)
	case o.Mode == ModeB && ac.ENSName == "":
		return rep, fmt.Errorf("%w: agent %s has no ENS name, which mode b (ENS pointer cold boot) needs; use mode a", ErrOptions, ac.ID)
	}
	if o.BlobID != "" {
		if err := walrus.ValidateRef(o.BlobID); err != nil {
			return rep, fmt.Errorf("%w: %w", ErrOptions, err)
		}
	}
	rep = Report{Agent: ac.ID, ENSName: ac.ENSName, Mode: o.Mode, Destructive: o.Destructive, BrainDir: ac.BrainDir}
	defer func() {
		rep.Took = time.Since(start)
		rep.TookMS = ms(rep.Took)
		rep.Result = "pass"
		if err != nil {
			rep.Result, rep.Error = "fail", err.Error()
		}
		if rep.Mismatches == nil {
			rep.Mismatches = []Mismatch{}
		}
		if rep.MovedOn == nil {
			rep.MovedOn = []Mismatch{}
		}
	}()
	d := &drill{o: o, cfg: o.Config, ac: ac, log: o.Log, rep: &rep}
	if o.Destructive {
		err = d.runDestructive(ctx)
	} else {
		err = d.runReadOnly(ctx)
	}
	return rep, err
}

// drill is one run in progress.
type drill struct {
	o   Options
	cfg *config.Config
	ac  *config.Agent
	log *slog.Logger
	rep *Report

	svc  *compose.Services
	a    *agent.Agent
	last state.Snapshot // the verified snapshot of the live brain
	took bool           // the snapshot was taken (and verified) by this drill
}

// checkBrain fails unless the brain has files to drill.
func (d *drill) checkBrain() error {
	has, err := snapshot.HasFiles(d.ac.BrainDir)
	if err != nil {
		return err
	}
	if !has {
		return fmt.Errorf("%w: brain directory %s is missing or holds no files (restore it first: 'hermesd restore %s')",
			ErrNoBrain, d.ac.BrainDir, d.ac.ID)
	}
	return nil
}

// runReadOnly is the drill beside a running daemon, or without one: it
// restores the published head (mode b) or the newest verified snapshot
// the state directory records or --blob (mode a) into a scratch
// directory, checks the restore against the snapshot itself (the
// pipeline's verification, an independent re-hash, v3: its trees), and
// compares it with the live brain, telling what changed since the
// snapshot from what nothing explains. It takes no lock and writes
// nothing outside the scratch directory; mode a needs no chain.
func (d *drill) runReadOnly(ctx context.Context) error {
	if err := d.checkBrain(); err != nil {
		return err
	}
	var err error
	d.svc, err = compose.Build(ctx, d.cfg, d.log, compose.Options{ReadOnly: true, NoKey: d.o.Escrow})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSetup, err)
	}
	defer d.svc.Close()
	dir, cp, done, err := d.openScratch(ctx)
	if err != nil {
		return err
	}
	defer done()
	blob, err := d.head(ctx, cp)
	if err != nil {
		return err
	}
	d.rep.BlobID = blob
	target := filepath.Join(dir, "brain")
	res, err := d.restore(ctx, cp, blob, target)
	if err != nil {
		return err
	}
	d.rep.BundleHash, d.rep.Taken = res.BundleHash.String(), res.Taken
	if res.Lock != nil {
		d.rep.Version = res.Lock.Version()
	}
	h, ok := d.rehash(ctx, target, res)
	if ok && res.Format == snapshot.FormatV3 {
		d.checkTrees(ctx, cp, blob, target, h)
	}

	t := time.Now()
	live, err := scan(ctx, d.ac.BrainDir, false)
	if err != nil {
		d.rep.stage("compare", t, err, "")
		return err
	}
	got, err := scan(ctx, target, false)
	if err != nil {
		d.rep.stage("compare", t, err, "")
		return err
	}
	c, err := compare(live, got, blob, literal(d.ac.BrainDir, target))
	moved, rest := movedOn(c.mismatches, live, res.Taken)
	c.mismatches = rest
	d.rep.MovedOn = moved
	how := "byte for byte"
	if len(moved) > 0 {
		how += fmt.Sprintf("; %d changed since the snapshot (the brain moved on)", len(moved))
		d.rep.note("the live brain moved on since the snapshot (taken %s): %d entr%s changed after it (movedOn); not failures — the restore matches the snapshot",
			res.Taken.UTC().Format(time.RFC3339), len(moved), plural(len(moved), "y", "ies"))
	}
	d.recordCompare(t, c, err, how)
	if err != nil {
		return err
	}
	return d.verdict()
}

// missingSymlinks lists the symlinks of the brain (want: path → target)
// that the v3 snapshot blob does not hold with the same target; ok is
// false when the snapshot is not v3 (its archive says only once
// downloaded: the destructive drill's final check then guards the wipe).
func (d *drill) missingSymlinks(ctx context.Context, blob string, want map[string]string) (missing []string, ok bool, err error) {
	if len(want) == 0 {
		return nil, true, nil
	}
	pipe := d.svc.Pipeline(d.ac, d.svc.Config.StateDir, nil)
	f, err := pipe.BlobFormat(ctx, blob)
	if err != nil || f != snapshot.FormatV3 {
		return nil, false, err
	}
	r, err := pipe.OpenV3(ctx, blob)
	if err != nil {
		return nil, false, err
	}
	have := map[string]string{}
	if err := r.Walk(ctx, func(p string, e *repo.Entry) error {
		if e.Type == repo.EntrySymlink {
			have[p] = e.Link
		}
		return nil
	}); err != nil {
		return nil, false, err
	}
	for p, target := range want {
		if t, ok := have[p]; !ok || t != target {
			missing = append(missing, fmt.Sprintf("symlink %s -> %s", p, target))
		}
	}
	slices.Sort(missing)
	return missing, true, nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// head finds the snapshot a read-only drill restores: mode b reads the
// ENS record through the cold path's own chain client, as a fresh
// machine would; mode a takes --blob, or the newest verified snapshot the
// state directory records (read without its lock: a running daemon keeps
// it). The state's view is noted beside the pointer's.
func (d *drill) head(ctx context.Context, cp *coldPath) (string, error) {
	st, serr := state.LoadAgent(state.AgentPath(d.cfg.StateDir, d.ac.ID))
	if serr != nil {
		st = &state.AgentState{}
		d.rep.note("the state directory could not be read (%v)", serr)
	}
	t := time.Now()
	switch {
	case d.o.Mode == ModeB:
		v, err := cp.pointer.Read(ctx, d.ac.ENSName)
		if err == nil {
			// The record is anyone's text until it is a blob or patch id.
			err = agent.ValidatePointer(v)
		}
		if err != nil {
			d.rep.stage("ens-read", t, err, "")
			return "", fmt.Errorf("read ENS pointer of %s: %w", d.ac.ENSName, err)
		}
		d.rep.stage("ens-read", t, nil, fmt.Sprintf("%s agent-snapshot = %s", d.ac.ENSName, v))
		d.rep.Source = "the ENS record agent-snapshot of " + d.ac.ENSName
		switch l := st.Last; {
		case l == nil || l.BlobID == v:
		case st.Pending != nil && st.Pending.Value == l.BlobID:
			d.rep.note("a newer snapshot (%s) is verified and waits for its pointer since %s; the drill restores the published one, which a fresh machine gets",
				l.BlobID, st.Pending.Since.UTC().Format(time.RFC3339))
		default:
			d.rep.note("the state directory's newest verified snapshot is %s, the pointer names %s", l.BlobID, v)
		}
		return v, nil
	case d.o.BlobID != "":
		d.rep.Source = "--blob"
		return d.o.BlobID, nil
	}
	l := st.Last
	if l == nil {
		err := fmt.Errorf("%w: the state directory %s records no snapshot of %s; give one with --blob ID ('hermesd log %s' lists them)",
			ErrNoSnapshot, d.cfg.StateDir, d.ac.ID, d.ac.ID)
		d.rep.stage("head", t, err, "")
		return "", err
	}
	what := "not published (no ENS name)"
	switch {
	case d.ac.ENSName == "":
	case st.Published == l.BlobID:
		what = "published"
	case st.Pending != nil && st.Pending.Value == l.BlobID:
		what = "pending publication since " + st.Pending.Since.UTC().Format(time.RFC3339)
	default:
		what = "the pointer's last known value is " + orNone(st.Published)
	}
	d.rep.Source = "the state directory's newest verified snapshot (" + what + ")"
	d.rep.stage("head", t, nil, fmt.Sprintf("blob %s from the state directory, read without its lock: %s", l.BlobID, what))
	return l.BlobID, nil
}

// runDestructive is the destructive drill: it needs the state directory
// to itself, since it snapshots and publishes the brain first and then
// wipes and restores it in place.
func (d *drill) runDestructive(ctx context.Context) (err error) {
	if err := d.checkBrain(); err != nil {
		return err
	}
	d.svc, err = compose.Build(ctx, d.cfg, d.log, compose.Options{})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSetup, err)
	}
	defer d.svc.Close()
	// Holding the state lock for the whole drill keeps a daemon from
	// starting (and restoring or snapshotting) while the brain is away.
	sd, err := compose.OpenState(d.cfg)
	if errors.Is(err, state.ErrLocked) {
		return fmt.Errorf("%w: the destructive drill wipes the brain and snapshots and publishes through the agent's state; "+
			"stop hermesd first (a drill without --destructive runs beside it)", err)
	}
	if err != nil {
		return err
	}
	defer sd.Close()
	obs := &observer{}
	d.a, err = d.svc.OpenAgent(sd, d.ac.ID, obs)
	if err != nil {
		return err
	}
	defer d.a.Close()

	if err := d.snapshot(ctx, obs); err != nil {
		return err
	}
	if d.ac.ENSName != "" {
		if err := d.publish(ctx); err != nil {
			return err
		}
	}
	blob := d.last.BlobID
	if d.o.BlobID != "" {
		blob = d.o.BlobID
	}
	d.rep.BlobID = blob
	d.rep.Source = "the snapshot of the brain this drill verified"
	return d.destructive(ctx, blob)
}

// snapshot brings the agent's verified snapshot up to date with the brain,
// exactly as the daemon's loop does.
func (d *drill) snapshot(ctx context.Context, obs *observer) error {
	t := time.Now()
	if err := d.a.Prepare(ctx); err != nil {
		d.rep.stage("hash", t, err, "")
		return fmt.Errorf("prepare agent: %w", err)
	}
	sr, err := d.a.SyncOnce(ctx)
	if err != nil {
		d.rep.stage("snapshot", t, err, "")
		return fmt.Errorf("snapshot: %w", err)
	}
	files, bytes := obs.hashed()
	took := time.Since(t)
	if s := sr.Snapshot; s != nil {
		took -= s.Pack
		if s.Format != snapshot.FormatV3 { // v3's Pack includes its uploads
			took -= s.Upload + s.Verify
		}
	}
	d.rep.Stages = append(d.rep.Stages, Stage{Name: "hash", OK: true, Took: took, MS: ms(took),
		Detail: fmt.Sprintf("%d files, %s, bundle hash %s", files, walrus.FormatSize(bytes), short(sr.Hash.String()))})

	switch sr.Outcome {
	case agent.Snapshotted:
		s := sr.Snapshot
		d.took = true
		d.rep.Snapshot = "snapshotted"
		add := d.rep.timed
		if s.Format == snapshot.FormatV3 {
			// The stages overlap (files are read while packs upload): the
			// pack stage is the whole snapshot, upload and verify the time
			// spent in them.
			add("pack", s.Pack, fmt.Sprintf("lock v%d + receipts; v3: %d of %d files read, %d pack(s), %s uploaded, %d pack(s) re-packed",
				s.Version, s.FilesRead, s.Files, s.Packs, walrus.FormatSize(s.Uploaded), s.Repacked))
			add("upload", s.Upload, fmt.Sprintf("head pack %s (%s); the snapshot needs %d pack(s), the earliest ending with epoch %d",
				s.BlobID, walrus.FormatSize(s.Size), s.LivePacks, s.EndEpoch))
			add("verify", s.Verify, "every pack read back and compared before the head referenced it")
		} else {
			add("pack", s.Pack, fmt.Sprintf("lock v%d + receipts, tar + encrypt: %s blob", s.Version, walrus.FormatSize(s.Size)))
			up := fmt.Sprintf("blob %s, end epoch %d", s.BlobID, s.EndEpoch)
			if s.AlreadyCertified {
				up += " (already certified)"
			}
			add("upload", s.Upload, up)
			add("verify", s.Verify, "read back: size and sha256 match")
		}
	case agent.Unchanged:
		d.rep.Snapshot = "unchanged"
		d.rep.note("the brain has not changed since its last verified snapshot: nothing uploaded")
	default:
		return fmt.Errorf("%w: brain %s is empty (outcome %s)", ErrNoBrain, d.ac.BrainDir, sr.Outcome)
	}
	st := d.a.Status()
	if st.Last == nil {
		return errors.New("drill: no verified snapshot after the snapshot step")
	}
	d.last = *st.Last
	d.rep.BundleHash, d.rep.Version = d.last.BundleHash, d.last.Version
	if d.last.BundleHash != sr.Hash.String() {
		return fmt.Errorf("drill: the last verified snapshot holds %s, the brain hashes to %s", d.last.BundleHash, sr.Hash)
	}
	return nil
}

// publish moves the ENS pointer to the verified snapshot by
// compare-and-set, records it in the agent's state as the daemon's
// publisher does, and reads it back.
func (d *drill) publish(ctx context.Context) (err error) {
	t := time.Now()
	detail := "already names the snapshot: no transaction"
	defer func() {
		if err != nil {
			detail = "" // the report shows the error, not what success would have meant
		}
		d.rep.stage("publish", t, err, detail)
	}()
	if h := d.a.Head().Hold(); h != nil {
		return fmt.Errorf("publishing held: %s", h.Reason)
	}
	// A record on an L2 is written there, then waited for until L1
	// resolution shows it (the daemon's publisher does the same, bounded
	// by the visibility timeout).
	r, ok := pointer.Publish(ctx, d.svc.Chains(), d.a.Head(), pointer.PublishOptions{Visible: true})
	if ok {
		if w := r.Write; w.Tx.Hash != "" {
			d.rep.TxHash, d.rep.GasUsed = w.Tx.Hash, w.Tx.Gas
			detail = fmt.Sprintf("tx %s, gas %d", w.Tx.Hash, w.Tx.Gas)
			if r.Target != "" {
				detail = fmt.Sprintf("ens.records %s (chain %d): tx %s, gas %d", r.Target, w.Tx.ChainID, w.Tx.Hash, w.Tx.Gas)
			}
		}
		switch {
		case r.Outcome == pointer.Published && r.Err != nil:
			return fmt.Errorf("record published pointer: %w", r.Err)
		case r.Outcome != pointer.Published:
			return fmt.Errorf("publish pointer (%s): %w", r.Outcome, r.Err)
		}
		if r.Waited > 0 {
			detail += fmt.Sprintf("; visible from L1 after about %s", r.Waited.Round(time.Millisecond))
		}
	}
	got, err := d.svc.Chain.Read(ctx, d.ac.ENSName)
	if err != nil {
		return fmt.Errorf("read back pointer: %w", err)
	}
	if got != d.last.BlobID {
		return fmt.Errorf("%w: %s names %s, the verified snapshot is %s", ErrPointer, d.ac.ENSName, got, d.last.BlobID)
	}
	detail += "; read back"
	return nil
}

// coldPath is the restore side: nothing in it is shared with the side that
// took the snapshot except the key and the configuration. Its clients are
// built afresh from the configuration, and its pipeline is the one every
// restore uses.
type coldPath struct {
	pipe    *snapshot.Pipeline
	pointer *ens.Client // mode b
}

func (d *drill) newColdPath(ctx context.Context, scratch string) (*coldPath, error) {
	spool := filepath.Join(scratch, "spool")
	if err := os.Mkdir(spool, 0o700); err != nil {
		return nil, err
	}
	wc, err := compose.NewWalrus(d.cfg, false, d.log)
	if err != nil {
		return nil, fmt.Errorf("%w: walrus: %w", ErrSetup, err)
	}
	cold := *d.svc
	if d.o.Escrow {
		// No key of the key file and a fresh key-server client, with no
		// key cached by the snapshot side: the cold path holds only the
		// Sui identity.
		cold = *d.svc.WithoutKeys()
		if cold.Seal, err = compose.Sealing(d.cfg, d.log); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSetup, err)
		}
	}
	cold.Walrus, cold.Chain = wc, nil
	cp := &coldPath{pipe: cold.Pipeline(d.ac, spool, nil)}
	if d.o.Mode == ModeB {
		if cp.pointer, err = compose.NewChain(ctx, d.cfg, d.log); err != nil {
			return nil, fmt.Errorf("chain: %w", err)
		}
	}
	return cp, nil
}

func (cp *coldPath) close() {
	if cp.pointer != nil {
		cp.pointer.Close()
	}
}

// restore runs the cold path into target: (ENS read →) download → decrypt →
// extract → verify → rename into place.
func (d *drill) restore(ctx context.Context, cp *coldPath, blob, target string) (snapshot.Restored, error) {
	if d.o.Mode == ModeB && d.o.Destructive {
		// The cold boot of the verified snapshot: the record must name it
		// (the read-only drill read the record to find its blob).
		t := time.Now()
		v, err := cp.pointer.Read(ctx, d.ac.ENSName)
		if err == nil && v != blob {
			err = fmt.Errorf("%w: %s names %s, the verified snapshot is %s", ErrPointer, d.ac.ENSName, v, blob)
		}
		d.rep.stage("ens-read", t, err, fmt.Sprintf("%s agent-snapshot = %s", d.ac.ENSName, v))
		if err != nil {
			return snapshot.Restored{}, fmt.Errorf("read ENS pointer: %w", err)
		}
	}
	if d.o.Escrow {
		t := time.Now()
		rec, err := cp.pipe.RecoverAgentKey(ctx, blob)
		d.rep.stage("escrow", t, err, fmt.Sprintf("agent key (id %s) recovered from the head pack's %d-byte key escrow with only the Sui key; key servers that answered: %s",
			rec.KeyID, rec.EscrowBytes, strings.Join(rec.Servers, ", ")))
		if err != nil {
			return snapshot.Restored{}, fmt.Errorf("recover the agent key from the escrow of %s: %w", blob, err)
		}
		d.rep.EscrowServers = rec.Servers
	}
	res, err := cp.pipe.RestoreWith(ctx, blob, target, snapshot.RestoreOptions{PublicRoot: d.cfg.AllowUnsafeDirs})
	var se *snapshot.StageError
	if errors.As(err, &se) && se.Stage == "download" {
		d.rep.Stages = append(d.rep.Stages, Stage{Name: "download", Error: err.Error()})
		return res, fmt.Errorf("restore blob %s: %w", blob, err)
	}
	if res.Format == snapshot.FormatV3 {
		d.rep.timed("download", res.Download, fmt.Sprintf("v3 head pack (%s): commit and the indexes of the packs it needs", walrus.FormatSize(res.BlobSize)))
	} else {
		d.rep.timed("download", res.Download, fmt.Sprintf("%s from %s, %d attempt(s)", walrus.FormatSize(res.BlobSize), res.Source, res.Attempts))
	}
	if err != nil {
		d.rep.Stages = append(d.rep.Stages, Stage{Name: "unpack", Took: res.Unpack, MS: ms(res.Unpack), Error: err.Error()})
		return res, fmt.Errorf("restore blob %s: %w", blob, err)
	}
	if res.Format == snapshot.FormatV3 {
		d.rep.timed("unpack", res.Unpack, fmt.Sprintf("%d files, %s: %s read in %d range requests; every object id, file SHA-256 and the bundle hash verified",
			res.Files, walrus.FormatSize(res.Bytes), walrus.FormatSize(res.Downloaded), res.Ranges))
	} else {
		d.rep.timed("unpack", res.Unpack, fmt.Sprintf("%d files, %s; they hash to the restored lock's bundleHash", res.Files, walrus.FormatSize(res.Bytes)))
	}
	d.rep.BlobBytes = res.BlobSize
	d.rep.Files, d.rep.Bytes = res.Files, res.Bytes
	for _, s := range res.Skipped {
		d.rep.note("the archive entry %s was skipped", s)
	}
	for _, s := range res.Stripped {
		d.rep.note("restored without a special bit: %s", s)
	}
	for _, s := range res.Notes {
		d.rep.note("%s", s)
	}
	return res, nil
}

func (d *drill) newScratch() (string, error) {
	s, err := os.MkdirTemp(d.o.ScratchDir, "hermesd-drill-"+d.ac.ID+"-")
	if err != nil {
		return "", fmt.Errorf("create scratch directory: %w", err)
	}
	return s, nil
}

// openScratch creates the scratch directory and the cold path that
// restores into it; done closes the cold path and drops the directory.
func (d *drill) openScratch(ctx context.Context) (dir string, cp *coldPath, done func(), err error) {
	if dir, err = d.newScratch(); err != nil {
		return "", nil, nil, err
	}
	if cp, err = d.newColdPath(ctx, dir); err != nil {
		d.dropScratch(dir)
		return "", nil, nil, err
	}
	return dir, cp, func() { cp.close(); d.dropScratch(dir) }, nil
}

func (d *drill) dropScratch(s string) {
	if d.o.Keep {
		d.rep.ScratchDir = s
		return
	}
	if err := removeTree(s); err != nil {
		d.rep.note("could not remove the scratch directory %s: %v", s, err)
	}
}

// recordCompare adds the compare stage and its findings to the report.
func (d *drill) recordCompare(t time.Time, c comparison, err error, how string) {
	d.rep.Mismatches = append(d.rep.Mismatches, c.mismatches...)
	d.rep.Notes = append(d.rep.Notes, c.notes...)
	if err == nil && len(c.mismatches) > 0 {
		err = fmt.Errorf("%d differences", len(c.mismatches))
	}
	d.rep.stage("compare", t, err, fmt.Sprintf("%d files (%s), %d directories and %d symlinks identical, modes and targets included; %d differences",
		c.files, how, c.dirs, c.symlinks, len(c.mismatches)))
}

// rehash hashes the restored tree with hash.Dir, independently of the
// extractor's manifest, and checks it against the snapshot's claim (its
// commit or restored lock) and, in the destructive drill, the live
// brain's hash. It reports whether the tree hashed to the claim.
func (d *drill) rehash(ctx context.Context, dir string, res snapshot.Restored) (hash.Result, bool) {
	t := time.Now()
	h, err := hash.Dir(ctx, dir, hash.Options{})
	if err != nil {
		d.rep.stage("rehash", t, err, "")
		d.rep.Mismatches = append(d.rep.Mismatches, Mismatch{Path: ".", Kind: "hash", Got: err.Error()})
		return h, false
	}
	got := h.Digest.String()
	var bad error
	if got != res.BundleHash.String() {
		d.rep.Mismatches = append(d.rep.Mismatches, Mismatch{Path: bundlelock.FileName, Kind: "hash", Want: res.BundleHash.String(), Got: got})
		bad = errors.New("differs from the snapshot's bundle hash")
	}
	detail := fmt.Sprintf("%s = the snapshot's bundle hash (%d files)", short(got), h.Count)
	if d.last.BundleHash != "" {
		if got != d.last.BundleHash {
			d.rep.Mismatches = append(d.rep.Mismatches, Mismatch{Path: ".", Kind: "hash", Want: d.last.BundleHash, Got: got})
			bad = errors.New("differs from the live brain")
		}
		detail = fmt.Sprintf("%s = restored lock = live brain (%d files)", short(got), h.Count)
	}
	if bad != nil {
		detail = fmt.Sprintf("%s %v", short(got), bad)
	}
	d.rep.stage("rehash", t, bad, detail)
	return h, bad == nil
}

// checkTrees compares the restored tree with the v3 snapshot's own trees,
// read again from its head: the same paths, and every file's size,
// SHA-256 (from the re-hash) and mode, every directory's mode, every hard
// link a link to the file it names, every symlink a symlink with the
// recorded target, and the brain directory's mode — what
// the bundle hash does not cover checked against the snapshot itself, not
// against the extractor's word. Modes are compared as a restore gives
// them (fsys.Restorable: setuid and setgid are never set on files; the
// restore lists each, and so does this report), and a brain directory
// kept narrower than the snapshot's (an existing one is never widened,
// nor made writable by everyone) is a note, not a difference.
func (d *drill) checkTrees(ctx context.Context, cp *coldPath, blob, dir string, h hash.Result) {
	t := time.Now()
	r, err := cp.pipe.OpenV3(ctx, blob)
	if err != nil {
		d.rep.stage("trees", t, err, "")
		d.rep.Mismatches = append(d.rep.Mismatches, Mismatch{Path: ".", Kind: "trees", Got: err.Error()})
		return
	}
	hashed := make(map[string]hash.File, len(h.Files))
	for _, f := range h.Files {
		hashed[f.Path] = f
	}
	files, dirs, links, symlinks, before := 0, 0, 0, 0, len(d.rep.Mismatches)
	bad := func(p, kind, want, got string) {
		d.rep.Mismatches = append(d.rep.Mismatches, Mismatch{Path: p, Kind: kind, Want: want, Got: got})
	}
	mode := func(p string, want, got fs.FileMode) {
		if got != want {
			bad(p, "mode", modeString(want)+" (snapshot)", modeString(got))
		}
	}
	// The restored file behind each path met (a link's target comes
	// before it in the walk), and the mode its file entry records.
	met := map[string]hash.File{}
	modes := map[string]fs.FileMode{}
	err = r.Walk(ctx, func(p string, e *repo.Entry) error {
		switch e.Type {
		case repo.EntryDir:
			dirs++
			st, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(p)))
			if err != nil || !st.IsDir() {
				bad(p, "trees", "directory", "missing")
				break
			}
			want, _ := fsys.Restorable(e.Mode, true)
			if !d.cfg.AllowUnsafeDirs {
				want &^= 0o002 // as the restore made it (and noted)
			}
			mode(p, want, st.Mode()&fsys.Meta)
		case repo.EntrySymlink:
			symlinks++
			got, err := os.Readlink(filepath.Join(dir, filepath.FromSlash(p)))
			if st, serr := os.Lstat(filepath.Join(dir, filepath.FromSlash(p))); err != nil || serr != nil || st.Mode()&fs.ModeSymlink == 0 {
				bad(p, "trees", "symlink -> "+e.Link, "missing")
			} else if got != e.Link {
				bad(p, "symlink", "-> "+e.Link+" (snapshot)", "-> "+got)
			}
		case repo.EntryFile:
			files++
			f, ok := hashed[p]
			delete(hashed, p)
			recorded := e.Mode
			if e.IsLink() {
				links++
				recorded = modes[e.Link]
			}
			switch {
			case !ok:
				bad(p, "trees", "file", "missing")
				return nil
			case f.Size != e.Size || f.SHA256 != e.SHA256:
				bad(p, "content", fmt.Sprintf("sha256 %x (snapshot)", e.SHA256[:8]), fmt.Sprintf("sha256 %x", f.SHA256[:8]))
				return nil
			}
			want, _ := fsys.Restorable(recorded, false)
			mode(p, want, f.Stat.Mode&fsys.Meta)
			met[p] = f
			if !e.IsLink() {
				modes[p] = e.Mode
				break
			}
			// A link restored as a link is the same file under two
			// names (where the walk knows inodes).
			if tf, ok := met[e.Link]; ok && fsys.Inodes && (tf.Stat.Dev != f.Stat.Dev || tf.Stat.Ino != f.Stat.Ino) {
				bad(p, "link", "hard link of "+e.Link+" (snapshot)", "a file of its own")
			}
		}
		return nil
	})
	for p := range hashed {
		bad(p, "trees", "none", "file not in the snapshot")
	}
	root := ""
	if want, _, ok := r.Commit().RootMeta(); ok {
		root = " and the brain directory (mode)"
		if st, serr := os.Lstat(dir); serr == nil {
			switch got := st.Mode() & fsys.Meta; {
			case got == want:
			case got&^want == 0:
				d.rep.note("the brain directory was restored at mode %s, narrower than the snapshot's %s (see the restore's note)", modeString(got), modeString(want))
			default:
				mode(".", want, got)
			}
		}
	}
	n := len(d.rep.Mismatches) - before
	if err == nil && n > 0 {
		err = fmt.Errorf("%d difference(s) from the snapshot's trees", n)
	}
	d.rep.stage("trees", t, err, fmt.Sprintf("%d files (size, sha256, mode; %d hard links, as links), %d directories (mode), %d symlinks (target)%s as the snapshot's trees list them",
		files, links, dirs, symlinks, root))
}

// verdict turns the mismatches found into the drill's error.
func (d *drill) verdict() error {
	if n := len(d.rep.Mismatches); n > 0 {
		return fmt.Errorf("%w: %d difference(s), first %s", ErrMismatch, n, d.rep.Mismatches[0])
	}
	return nil
}

// destructive wipes the brain (moving it aside), restores it in place
// through the cold path, compares it with the manifest taken before the
// wipe, and deletes the moved-aside original only if everything matched.
func (d *drill) destructive(ctx context.Context, blob string) (err error) {
	brain := d.ac.BrainDir
	pre, err := d.gate(ctx, blob)
	if err != nil {
		return err
	}
	dir, cp, done, err := d.openScratch(ctx)
	if err != nil {
		return err
	}
	defer done()

	t := time.Now()
	side, err := moveAside(brain)
	d.rep.stage("wipe", t, err, "brain moved aside to "+sideCopy(side)+" (put back if anything fails)")
	if err != nil {
		return fmt.Errorf("wipe: %w", err)
	}
	d.log.Warn("drill: brain wiped (moved aside until the restore is proved identical)", "agent", d.ac.ID, "dir", brain, "aside", side.copy)
	defer func() {
		if err == nil {
			return
		}
		failed := ""
		if d.o.Keep {
			failed = filepath.Join(dir, "failed-restore")
		}
		if perr := side.putBack(failed); perr != nil {
			err = errors.Join(err, fmt.Errorf("drill: CANNOT PUT THE BRAIN BACK; the original is at %s: %w", side.copy, perr))
			return
		}
		d.rep.note("the drill failed after the wipe; the original brain was put back in place")
		d.log.Warn("drill: failed; original brain put back", "agent", d.ac.ID, "dir", brain)
	}()
	if d.o.hooks.afterWipe != nil {
		d.o.hooks.afterWipe()
	}

	res, err := d.restore(ctx, cp, blob, brain)
	if err != nil {
		return err
	}
	t = time.Now()
	got, err := scan(ctx, brain, true)
	if err != nil {
		d.rep.stage("compare", t, err, "")
		return err
	}
	c, err := compare(pre, got, blob, nil)
	d.recordCompare(t, c, err, "sha256 against the manifest taken before the wipe")
	if err != nil {
		return err
	}
	d.rehash(ctx, brain, res)
	if err := d.verdict(); err != nil {
		return err
	}

	// The restore is proved; give the brain back exactly what it had: the
	// lock's upload record, receipts that arrived after the snapshot, and
	// the directory's own mode.
	t = time.Now()
	err = d.finish(ctx, side, pre, got)
	detail := "brain byte-identical to before the wipe; moved-aside copy deleted"
	if err != nil {
		detail = ""
	}
	d.rep.stage("putback", t, err, detail)
	return err
}

func sideCopy(s *aside) string {
	if s == nil {
		return ""
	}
	return s.copy
}

// gate checks what the destructive drill requires before it wipes
// anything, and takes the manifest it compares against.
func (d *drill) gate(ctx context.Context, blob string) (*manifest, error) {
	t := time.Now()
	pre, detail, err := d.checkGate(ctx, blob)
	d.rep.stage("manifest", t, err, detail)
	if err != nil {
		return nil, err
	}
	return pre, nil
}

func (d *drill) checkGate(ctx context.Context, blob string) (*manifest, string, error) {
	if st, err := os.Lstat(d.ac.BrainDir); err != nil {
		return nil, "", err
	} else if !st.IsDir() {
		// Renaming a link would move the link, not the brain.
		return nil, "", fmt.Errorf("%w: %s is not a directory (a symlink?); point brain_dir at the directory itself", ErrRefused, d.ac.BrainDir)
	}
	if blob != d.last.BlobID {
		return nil, "", fmt.Errorf("%w: it restores only the snapshot the drill verified (%s), not %s", ErrRefused, d.last.BlobID, blob)
	}
	verified := "uploaded and read back by this drill"
	if !d.took {
		if sum, err := hex.DecodeString(d.last.SHA256); err == nil && len(sum) == 32 {
			if err := compose.Store(d.svc.Walrus).Check(ctx, blob, d.last.Size, [32]byte(sum)); err != nil {
				return nil, "", fmt.Errorf("%w: blob %s does not read back intact: %w", ErrRefused, blob, err)
			}
			verified = "read back: size and sha256 match the upload"
		} else {
			// A snapshot restored here rather than taken here has no
			// recorded digest; it must at least claim this state.
			claim, err := d.claimedHash(ctx, blob)
			if err != nil {
				return nil, "", fmt.Errorf("%w: read blob %s: %w", ErrRefused, blob, err)
			}
			if claim != d.last.BundleHash {
				return nil, "", fmt.Errorf("%w: blob %s holds %s, the brain is %s", ErrRefused, blob, claim, d.last.BundleHash)
			}
			verified = "no recorded digest (restored, not taken, here): it claims this bundle hash"
		}
	}
	pre, err := scan(ctx, d.ac.BrainDir, true)
	if err != nil {
		return nil, "", err
	}
	if u := pre.unsupported(); len(u) > 0 {
		return nil, "", fmt.Errorf("%w: it holds entries snapshots do not carry and the wipe would lose: %v", ErrRefused, u)
	}
	if miss, _, err := d.missingSymlinks(ctx, blob, pre.symlinks()); err != nil {
		return nil, "", fmt.Errorf("%w: read the trees of %s: %w", ErrRefused, blob, err)
	} else if len(miss) > 0 {
		return nil, "", fmt.Errorf("%w: the snapshot does not hold these symlinks of the brain, which the wipe would lose "+
			"(a symlink alone changes no bundle hash, so no snapshot was taken since it was made; one is once the brain's files change): %v", ErrRefused, miss)
	}
	if h := pre.bundleHash().String(); h != d.last.BundleHash {
		return nil, "", fmt.Errorf("%w: the brain changed since the snapshot (%s, snapshot %s); run the drill again", ErrRefused, h, d.last.BundleHash)
	}
	files, dirs := pre.counts()
	return pre, fmt.Sprintf("%d files and %d directories recorded (sha256, mode, size); blob %s", files, dirs, verified), nil
}

// claimedHash is the bundle hash a snapshot claims: a v3 head's commit
// (every pack it needs read, indexes verified), a v1/v2 blob's lock.
func (d *drill) claimedHash(ctx context.Context, blob string) (string, error) {
	pipe := d.svc.Pipeline(d.ac, d.svc.Config.StateDir, nil)
	f, err := pipe.BlobFormat(ctx, blob)
	if err != nil {
		return "", err
	}
	if f == snapshot.FormatV3 {
		r, err := pipe.OpenV3(ctx, blob)
		if err != nil {
			return "", err
		}
		return r.Commit().BundleHash.String(), nil
	}
	lock, err := pipe.ReadLock(ctx, blob)
	if err != nil {
		return "", err
	}
	return lock.BundleHash(), nil
}

// finish copies back the two files that legitimately differ, gives back
// what a restore does not (the root's mode, special bits a restore strips
// or an older snapshot does not record, hard links an older snapshot
// stored as files of their own: compare found each noteworthy, not
// wrong), checks that the brain is now identical to the manifest, and
// deletes the moved-aside original.
func (d *drill) finish(ctx context.Context, side *aside, pre, got *manifest) error {
	for _, rel := range []string{bundlelock.FileName, snapshot.ReceiptsFile} {
		w, ok := pre.entries[rel]
		if !ok || got.entries[rel] == w {
			continue
		}
		if err := side.copyBack(rel); err != nil {
			return fmt.Errorf("copy back %s: %w", rel, err)
		}
	}
	for _, rel := range pre.paths() {
		w, g := pre.entries[rel], got.entries[rel]
		full := filepath.Join(d.ac.BrainDir, filepath.FromSlash(rel))
		if w.kind == kindFile && w.target != g.target && w.target != "" && rel != bundlelock.FileName && rel != snapshot.ReceiptsFile {
			// The same content (compare checked it), one file again.
			if err := relink(filepath.Join(d.ac.BrainDir, filepath.FromSlash(w.target)), full); err != nil {
				return fmt.Errorf("make %s a hard link of %s again: %w", rel, w.target, err)
			}
			d.rep.note("%s: made a hard link of %s again, as it was before the wipe", rel, w.target)
		}
		if w.mode != g.mode && w.mode.Perm() == g.mode.Perm() {
			if err := os.Chmod(full, w.mode); err != nil {
				return err
			}
			d.rep.note("%s: its special bits put back as they were before the wipe (%s; restored %s)", rel, modeString(w.mode), modeString(g.mode))
		}
		if w.kind == kindDir && g.kind == kindDir && w.mode&0o002 != 0 && g.mode == w.mode&^0o002 {
			if err := os.Chmod(full, w.mode); err != nil {
				return err
			}
			d.rep.note("%s: writable by everyone again, as it was before the wipe (%s; the restore made it %s)", rel, modeString(w.mode), modeString(g.mode))
		}
	}
	if err := os.Chmod(d.ac.BrainDir, pre.rootMode); err != nil {
		return err
	}
	final, err := scan(ctx, d.ac.BrainDir, true)
	if err != nil {
		return err
	}
	if ms := exact(pre, final); len(ms) > 0 {
		d.rep.Mismatches = append(d.rep.Mismatches, ms...)
		return d.verdict()
	}
	if err := side.discard(); err != nil {
		d.rep.note("could not delete the moved-aside copy %s: %v", side.container, err)
	}
	return nil
}

// observer records the hashing the agent reports.
type observer struct {
	mu    sync.Mutex
	files int
	bytes int64
}

func (o *observer) hashed() (int, int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.files, o.bytes
}

func (o *observer) Hashed(_ string, files int, bytes int64, _ time.Duration) {
	o.mu.Lock()
	o.files, o.bytes = files, bytes
	o.mu.Unlock()
}

func (*observer) Phase(string, agent.Phase)                  {}
func (*observer) Snapshot(string, snapshot.Result)           {}
func (*observer) Unchanged(string)                           {}
func (*observer) Failed(string, string, error)               {}
func (*observer) Restore(string, string, *snapshot.Restored) {}

// short abbreviates a hash for the human report.
func short(h string) string {
	if len(h) > 14 {
		return h[:10] + "…" + h[len(h)-4:]
	}
	return h
}

// relink replaces name by a hard link of target: linked beside it under
// a new name, then renamed over it, so name is never missing.
func relink(target, name string) error {
	var r [8]byte
	rand.Read(r[:])
	tmp := name + ".drill-" + hex.EncodeToString(r[:])
	if err := os.Link(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
