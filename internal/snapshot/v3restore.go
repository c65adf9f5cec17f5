package snapshot

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/repo"
)

// OpenV3 reads the v3 head pack head names (a head reference: its id and,
// bound, its commit id, which the head's commit must have) and the
// indexes of the packs it lists, verified: what history, diffs and checks
// read from. A v1 or v2 blob is ErrNotV3 (headref.ErrMismatch for a
// reference bound to a v3 commit).
func (p *Pipeline) OpenV3(ctx context.Context, head string) (*repo.Reader, error) {
	ref, err := parseRef(head)
	if err != nil {
		return nil, err
	}
	f, err := p.BlobFormat(ctx, ref.ID)
	switch {
	case err != nil:
		return nil, err
	case f != FormatV3 && ref.Bound:
		return nil, notV3(ref, f)
	case f != FormatV3:
		return nil, fmt.Errorf("%w: blob %s is %s", ErrNotV3, ref.ID, f)
	}
	return p.openV3(ctx, ref)
}

func (p *Pipeline) openV3(ctx context.Context, ref headref.Ref) (*repo.Reader, error) {
	keys, err := p.keysFor(ctx, ref.ID)
	if err != nil {
		return nil, err
	}
	r, err := p.openRef(ctx, keys, ref)
	if err != nil {
		return nil, p.explainV3(ctx, ref.ID, err)
	}
	return r, nil
}

// forgetter is a store that keeps what it read for further reads (compose
// keeps whole quilt patches for their range reads).
type forgetter interface {
	// Forget drops everything kept.
	Forget()
}

// openRef is repo.OpenRef on the pipeline's store, which forgets what it
// kept when the bytes fail verification (badBytes).
func (p *Pipeline) openRef(ctx context.Context, keys *repo.Keys, ref headref.Ref) (*repo.Reader, error) {
	r, err := repo.OpenRef(ctx, p.Store, keys, ref, p.Read)
	return r, p.badBytes(err)
}

// badBytes has the store forget what it kept of earlier reads when err
// says bytes read failed verification: kept, a lying or corrupt answer
// would answer every retry after the aggregator was right again. It
// returns err.
func (p *Pipeline) badBytes(err error) error {
	if unverified(err) || errors.Is(err, ErrHashMismatch) {
		if f, ok := p.Store.(forgetter); ok {
			f.Forget()
		}
	}
	return err
}

// unverified reports whether err says bytes read from the store failed a
// check of what they must be (damaged, forged, another agent's, another
// head than the reference names), rather than that they could not be read.
func unverified(err error) bool {
	return errors.Is(err, repo.ErrCorrupt) || errors.Is(err, repo.ErrAuth) || errors.Is(err, ErrWrongAgent) ||
		errors.Is(err, headref.ErrMismatch)
}

// explainV3 turns "another key wrote this pack" into "this is agent X's
// snapshot" when X is another configured agent (only the master key can
// tell).
func (p *Pipeline) explainV3(ctx context.Context, blobID string, err error) error {
	if !errors.Is(err, repo.ErrWrongAgent) || p.Key == (cipher.Key{}) {
		return err
	}
	others := p.others()
	if len(others) == 0 {
		return err
	}
	var b bytes.Buffer
	if _, rerr := p.Store.ReadRange(ctx, blobID, 0, repo.HeaderSize, &b); rerr != nil {
		return err
	}
	h, herr := repo.DecodeHeader(b.Bytes())
	if herr != nil {
		return err
	}
	kid := hex.EncodeToString(h.KeyID[:])
	for _, other := range others {
		if AgentKeyFor(p.Key, nil, other).ID() == kid {
			return fmt.Errorf("%w: it is the v3 snapshot of %q, not of %q", ErrWrongAgent, other, p.Identity)
		}
	}
	return err
}

// restoreV3 restores a v3 snapshot: the head's commit and the live packs'
// indexes, then only the objects the commit (or opts.Path) needs, in
// coalesced, concurrent, resumable range reads; every object id, every
// file's SHA-256 and the bundle hash are verified before the temporary
// directory is synced and renamed into place.
//
// A reference bound to a commit id reads only that head (else
// headref.ErrMismatch, before any object is read); a bare one is bound
// first where the head's bytes can be checked (bindV3), else restored
// with a warning.
func (p *Pipeline) restoreV3(ctx context.Context, ref headref.Ref, target string, opts RestoreOptions) (Restored, error) {
	start := p.now()
	ref, warning, err := p.bindV3(ctx, ref)
	if err != nil {
		return Restored{}, err
	}
	r, err := p.openV3(ctx, ref)
	if err != nil {
		stage := "download"
		if unverified(err) {
			stage = "unpack"
		}
		return Restored{}, &StageError{stage, fmt.Errorf("open v3 snapshot %s: %w", ref.ID, err)}
	}
	download := p.now().Sub(start)
	start = p.now()
	res, err := p.installV3(ctx, r, target, opts)
	if warning != "" {
		res.Warnings = append(res.Warnings, warning)
	}
	res.Format, res.BlobID, res.BlobSize = FormatV3, r.Ref().String(), r.HeadSize()
	res.Download, res.Unpack = download, p.now().Sub(start)
	res.Downloaded, res.Ranges = r.Downloaded()
	if err != nil {
		return res, &StageError{"unpack", p.badBytes(err)}
	}
	return res, nil
}

func (p *Pipeline) installV3(ctx context.Context, r *repo.Reader, target string, opts RestoreOptions) (Restored, error) {
	c := r.Commit()
	// repo.Restore checks that what it writes fits before it writes a
	// byte: the files of opts.Path only, and a hard-linked file once. The
	// commit's totals would count every name of a file (and every file
	// for a single path), refusing restores that fit.
	return intoPlace(target, 0, opts.PublicRoot, func(tmp string) (Restored, error) {
		got, err := r.Restore(ctx, tmp, repo.RestoreOptions{Path: opts.Path, MaxBytes: p.Limits.MaxTotalSize, PublicDirs: opts.PublicRoot})
		if err != nil {
			return Restored{}, err
		}
		res := Restored{Verified: true, BundleHash: c.BundleHash, Files: got.Files, Bytes: got.Bytes, Links: got.Links,
			Symlinks: got.Symlinks, EndEpoch: c.MinEndEpoch(), Taken: time.UnixMilli(c.Time)}
		for _, st := range got.Stripped {
			res.Stripped = append(res.Stripped, stripped(st.Path, st.Mode, st.Restored))
		}
		var notes []string
		for _, n := range got.Narrowed {
			notes = append(notes, narrowed(n.Path, n.Mode, n.Restored))
		}
		res.Notes = addNotes(res.Notes, notes)
		notes = notes[:0]
		for _, t := range got.Retimed {
			notes = append(notes, retimed(t.Path, time.Unix(0, t.Recorded), time.Unix(0, t.Kept)))
		}
		res.Notes = addNotes(res.Notes, notes)
		if mode, mtime, ok := c.RootMeta(); ok && opts.Path == "" {
			res.root = rootMeta{known: true, mode: mode, timed: true, mtime: mtime}
		}
		if opts.Path == "" {
			res.Files, res.Bytes = int(c.Files), c.Bytes
			if res.Lock, err = commitLock(tmp, c); err != nil {
				return Restored{}, err
			}
		}
		return res, nil
	})
}

// commitLock reads the restored bundle.lock.json, which must claim the
// commit's bundle hash (the commit and its trees were verified against
// the files already). A snapshot without a lock gets one recording the
// commit's state.
func commitLock(dir string, c *repo.Commit) (*bundlelock.Lock, error) {
	lock, err := bundlelock.Read(filepath.Join(dir, bundlelock.FileName))
	switch {
	case errors.Is(err, os.ErrNotExist):
		lock = &bundlelock.Lock{}
		lock.Record(c.BundleHash.String(), c.Time)
		if c.LockVersion > 0 {
			lock.SetVersion(c.LockVersion)
		}
		return lock, nil
	case err != nil:
		return nil, fmt.Errorf("%w: restored lock: %w", ErrHashMismatch, err)
	}
	if want, perr := hash.ParseDigest(lock.BundleHash()); perr != nil || want != c.BundleHash {
		return nil, fmt.Errorf("%w: the snapshot's lock says bundleHash %q, its commit and files %s", ErrHashMismatch, lock.BundleHash(), c.BundleHash)
	}
	return lock, nil
}

// HistoryEntry is one snapshot in an agent's history.
type HistoryEntry struct {
	N int `json:"n"` // 0 is the newest
	// BlobID names the snapshot: its blob id, for v3 its head reference
	// with the commit id read (docs/format-v3.md §14), which restores
	// exactly the snapshot listed.
	BlobID     string    `json:"blobId"`
	Format     Format    `json:"format,omitempty"` // "" for older v1/v2 lineage entries not read
	BundleHash string    `json:"bundleHash"`
	Time       time.Time `json:"time"`
	// Files and Bytes are the brain's regular files (v3).
	Files int64 `json:"files,omitempty"`
	Bytes int64 `json:"bytes,omitempty"`
	// Changed counts the files added, removed or modified since the
	// parent, from the trees alone (v3; -1 when not known).
	Changed int `json:"changed"`
	// Added is what the snapshot uploaded: the stored bytes of its new
	// objects (v3), or the blob's size (v1/v2).
	Added int64 `json:"added,omitempty"`
	// EndEpoch is when the snapshot stops being restorable, when known:
	// the blob's end epoch (v1/v2), the earliest of the listed packs' and
	// of the head pack's (v3; a commit does not list its own head pack, so
	// the head's end epoch is known from a newer commit that lists it, or
	// from the agent's local record: see hermesd log).
	EndEpoch uint64 `json:"endEpoch,omitempty"`
	// Status is "restorable" (every blob it needs was read), "expired"
	// (one is gone from Walrus), "damaged" (one fails verification) or
	// "unknown" (older v1/v2 lineage, not read).
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// History lists the snapshots reachable from head, newest first, at most
// limit of them (0: all): v3 commits from their head packs (a few range
// reads each, no file content), then the lineage recorded in the first
// v1/v2 snapshot met. A head pack that is gone ends the walk with an
// "expired" entry. head is a head reference: bound, its commit must be
// the one read (the parents a commit names carry no digest).
func (p *Pipeline) History(ctx context.Context, head string, limit int) ([]HistoryEntry, error) {
	out, err := p.history(ctx, head, limit)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, err
}

// history walks one entry past limit, which the last entry's Changed
// needs.
func (p *Pipeline) history(ctx context.Context, head string, limit int) ([]HistoryEntry, error) {
	var out []HistoryEntry
	var newer *repo.Reader // the reader of out[len(out)-1], for its Changed
	// The end epochs of packs that newer commits list: a commit does not
	// list its own head pack, but the commits after it do while they
	// still use it.
	ends := map[string]uint64{}
	full := func() bool { return limit > 0 && len(out) > limit }
	for blob := head; blob != "" && !full(); {
		ref, err := parseRef(blob)
		if err != nil {
			return out, err
		}
		f, err := p.BlobFormat(ctx, ref.ID)
		if errors.Is(err, ErrBlobNotFound) {
			out = append(out, HistoryEntry{N: len(out), BlobID: blob, Changed: -1, Status: "expired",
				Detail: "the blob is gone from Walrus; older snapshots cannot be listed from it"})
			break
		}
		if err != nil {
			return out, err
		}
		switch {
		case f != FormatV3 && ref.Bound:
			return out, notV3(ref, f)
		case f != FormatV3:
			return p.wholeHistory(ctx, out, ref.ID, f, limit)
		}
		e, r, parent, perr := p.v3Entry(ctx, ref, len(out), ends)
		if perr != nil {
			return out, perr
		}
		if newer != nil && r != nil {
			if n, err := changedFiles(ctx, r, newer); err == nil {
				out[len(out)-1].Changed = n
			}
		}
		out = append(out, e)
		newer = r
		if e.Status != "restorable" && parent != "" {
			// The head is readable but not its packs: its parent is
			// still named, so the walk goes on.
			newer = nil
		}
		blob = parent
	}
	return out, nil
}

// v3Entry reads one v3 commit. A listed pack that is gone or damaged makes
// the entry "expired" or "damaged" (with a nil reader); the head itself
// failing is an error.
func (p *Pipeline) v3Entry(ctx context.Context, ref headref.Ref, n int, ends map[string]uint64) (HistoryEntry, *repo.Reader, string, error) {
	blob := ref.ID
	keys, err := p.keysFor(ctx, blob)
	if err != nil {
		return HistoryEntry{}, nil, "", err
	}
	e := HistoryEntry{N: n, BlobID: ref.String(), Format: FormatV3, Changed: -1}
	var c *repo.Commit
	r, err := p.openRef(ctx, keys, ref)
	if err == nil {
		c, e.Status, e.BlobID = r.Commit(), "restorable", r.Ref().String()
	} else {
		h, herr := repo.ReadCommitRef(ctx, p.Store, keys, ref)
		if herr = p.badBytes(herr); herr != nil {
			return e, nil, "", p.explainV3(ctx, blob, herr)
		}
		c, r = h.Commit, nil
		e.BlobID = headref.Bind(blob, headref.Digest(h.CommitID)).String()
		e.Status, e.Detail = "damaged", err.Error()
		if errors.Is(err, ErrBlobNotFound) {
			e.Status = "expired"
		}
	}
	e.BundleHash, e.Time = c.BundleHash.String(), time.UnixMilli(c.Time).UTC()
	e.Files, e.Bytes, e.Added, e.EndEpoch = c.Files, c.Bytes, c.Added, c.MinEndEpoch()
	if head := ends[blob]; head > 0 && (e.EndEpoch == 0 || head < e.EndEpoch) {
		e.EndEpoch = head
	}
	for _, pk := range c.Packs {
		if pk.EndEpoch > 0 {
			ends[pk.BlobID] = pk.EndEpoch
		}
	}
	if c.Parent == "" {
		e.Changed = int(c.Files) // the first commit adds every file
	}
	parent := c.Parent
	if c.Parent != "" && c.ParentFormat != repo.ParentV3 {
		e.Detail = "continues the " + c.ParentFormat + " snapshot " + c.Parent
	}
	return e, r, parent, nil
}

// changedFiles counts the files that differ between two commits' trees.
func changedFiles(ctx context.Context, older, newer *repo.Reader) (int, error) {
	n := 0
	err := repo.Diff(ctx, older, older.Commit().Root, newer, newer.Commit().Root, func(c repo.Change) error {
		if c.Old != nil && c.Old.Type == repo.EntryFile || c.New != nil && c.New.Type == repo.EntryFile {
			n++
		}
		return nil
	})
	return n, err
}

// wholeHistory appends a v1/v2 blob and the lineage its lock records:
// hermesd's lineage (every earlier snapshot, in the newest lock), then
// the chain of walrusSnapshotBlobId the reference runtime's locks make.
// The lock inside a snapshot names the snapshot before it, so a brain
// the reference runtime snapshotted (and hermesd restored) lists its
// earlier snapshots by reading each one's lock in turn.
func (p *Pipeline) wholeHistory(ctx context.Context, out []HistoryEntry, blob string, f Format, limit int) ([]HistoryEntry, error) {
	lock, err := p.ReadLock(ctx, blob)
	if err != nil {
		return out, fmt.Errorf("read %s: %w", blob, err)
	}
	out = append(out, HistoryEntry{N: len(out), BlobID: blob, Format: f, BundleHash: lock.BundleHash(),
		Time: time.UnixMilli(lock.LastUpdated()).UTC(), Changed: -1, Status: "restorable"})
	seen := map[string]bool{blob: true}
	full := func() bool { return limit > 0 && len(out) >= limit }
	// tail is the oldest snapshot listed so far and parent what its lock
	// says came before it ("" when not known yet).
	tail, parent := blob, lock.BlobID()
	for _, l := range lock.Lineage() {
		if full() {
			return out, nil
		}
		if seen[l.BlobID] {
			continue
		}
		seen[l.BlobID] = true
		out = append(out, HistoryEntry{N: len(out), BlobID: l.BlobID, BundleHash: l.BundleHash,
			Time: time.UnixMilli(l.CreatedAt).UTC(), Added: l.Size, EndEpoch: l.EndEpoch, Changed: -1, Status: "unknown"})
		tail, parent = l.BlobID, ""
	}
	return p.lockChain(ctx, out, tail, parent, seen, limit), nil
}

// lockChain follows walrusSnapshotBlobId from tail, the oldest snapshot
// listed (parent: what tail's lock names, "" to read it), reading one lock
// per step: at most MaxLineage steps, never a blob twice. A step that
// cannot be read ends the walk (an expired blob is listed as such).
func (p *Pipeline) lockChain(ctx context.Context, out []HistoryEntry, tail, parent string, seen map[string]bool, limit int) []HistoryEntry {
	for range bundlelock.MaxLineage {
		if parent == "" {
			l, err := p.ReadLock(ctx, tail)
			if err != nil {
				return out // listed already; what came before is not known
			}
			parent = l.BlobID()
		}
		if parent == "" || seen[parent] || !validBlobID(parent) || limit > 0 && len(out) >= limit {
			return out
		}
		seen[parent] = true
		e := HistoryEntry{N: len(out), BlobID: parent, Changed: -1, Status: "restorable",
			Detail: "listed from the lock of " + tail}
		f, err := p.BlobFormat(ctx, parent)
		var l *bundlelock.Lock
		if err == nil {
			e.Format = f
			l, err = p.ReadLock(ctx, parent)
		}
		switch {
		case errors.Is(err, ErrBlobNotFound):
			e.Status, e.Detail = "expired", "the blob is gone from Walrus; older snapshots cannot be listed from it"
			return append(out, e)
		case err != nil:
			e.Status, e.Detail = "unknown", "cannot read its lock: "+err.Error()
			return append(out, e)
		}
		e.BundleHash, e.Time = l.BundleHash(), time.UnixMilli(l.LastUpdated()).UTC()
		out = append(out, e)
		tail, parent = parent, l.BlobID()
	}
	return out
}

// validBlobID is repo.ValidBlobID: a lock's blob id is untrusted text.
func validBlobID(s string) bool { return repo.ValidBlobID(s) }
