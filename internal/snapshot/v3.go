package snapshot

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/hermesd/hermesd/internal/atomicfile"
	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/repo"
)

// Files of the v3 pipeline in Pipeline.CacheDir. Both are caches: the
// dedup index is rebuilt from the head commit and its packs' indexes when
// it is missing or describes another head, and the epoch clock is learned
// again from the next upload.
const (
	indexFile = "repo.index"
	clockFile = "repo.epoch.json"
)

// v3state is what the v3 pipeline keeps between snapshots of one agent.
type v3state struct {
	keys    *repo.Keys
	builder *repo.Builder
	// index describes the live packs of index.Head(); prev and trees are
	// that head's commit and trees when known (nil after a restart: they
	// are read from Walrus when the next snapshot needs them).
	index *repo.Index
	prev  *repo.Commit
	trees repo.TreeSource
	// live is how much of each pack the head's commit uses (compaction);
	// liveHead is that head.
	live     []repo.PackUse
	liveHead string
	clock    epochClock
	loaded   bool // the cache files were read
	// read are the keys of Pipeline.ReadKeys, by key id.
	read map[string]*repo.Keys
}

// AgentKeyFor decides which key the v3 snapshots of agent identity are
// written (and its own ones read) under: own when there is one
// (agents[].key, or a key recovered from a head pack's escrow), else the
// key derived from the master key (encryption.key) and the identity; nil
// when there is neither. Keys that only read (a handover's, ReadKeys)
// never write. It is the one place that decides: compose asks it for
// every agent's pipeline, and a pipeline built without AgentKey asks it
// too.
func AgentKeyFor(master cipher.Key, own *repo.AgentKey, identity string) *repo.AgentKey {
	switch {
	case own != nil:
		k := *own
		return &k
	case master != (cipher.Key{}):
		k := repo.DeriveAgentKey([repo.KeySize]byte(master), identity)
		return &k
	}
	return nil
}

// keysLocked returns the agent's v3 keys; the caller holds p.v3mu.
func (p *Pipeline) keysLocked() (*repo.Keys, error) {
	if p.v3 == nil {
		p.v3 = &v3state{}
	}
	if p.v3.keys != nil {
		return p.v3.keys, nil
	}
	own := AgentKeyFor(p.Key, p.AgentKey, p.Identity)
	if own == nil {
		return nil, fmt.Errorf("snapshot: agent %s has no key for format v3", p.AgentID)
	}
	ak := *own
	k, err := repo.NewKeys(ak, p.Identity)
	if err != nil {
		return nil, fmt.Errorf("snapshot: v3 keys of %s: %w", p.AgentID, err)
	}
	if err := p.escrowFor(k, ak); err != nil {
		return nil, err
	}
	p.v3.keys = k
	return k, nil
}

// v3Keys returns the agent's v3 keys.
func (p *Pipeline) v3Keys() (*repo.Keys, error) {
	p.v3mu.Lock()
	defer p.v3mu.Unlock()
	return p.keysLocked()
}

// KeyID returns the public id of the key the agent's v3 snapshots are
// written under (never the key); "" when there is none (format seal
// without a master key).
func (p *Pipeline) KeyID() string {
	k, err := p.v3Keys()
	if err != nil {
		return ""
	}
	return k.KeyID()
}

// keysFor returns the keys that read the v3 pack blobID: the agent's own,
// or the ReadKeys entry whose id the pack header names. A header naming
// neither gets the own keys, whose reader then says "another agent's".
func (p *Pipeline) keysFor(ctx context.Context, blobID string) (*repo.Keys, error) {
	p.v3mu.Lock()
	defer p.v3mu.Unlock()
	own, err := p.keysLocked()
	if err != nil || len(p.ReadKeys) == 0 {
		return own, err
	}
	kid, err := p.packKeyID(ctx, blobID)
	if err != nil || kid == own.KeyID() {
		return own, nil // the reader reports what is wrong with the pack
	}
	if k := p.readKeysLocked()[kid]; k != nil {
		return k, nil
	}
	return own, nil
}

// readKeysLocked returns the keys of ReadKeys by key id; the caller holds
// p.v3mu.
func (p *Pipeline) readKeysLocked() map[string]*repo.Keys {
	if p.v3.read == nil {
		p.v3.read = make(map[string]*repo.Keys, len(p.ReadKeys))
		for _, ak := range p.ReadKeys {
			if k, err := repo.NewKeys(ak, p.Identity); err == nil {
				p.v3.read[k.KeyID()] = k
			}
		}
	}
	return p.v3.read
}

// packKeyID reads the key id in the plaintext header of pack blobID.
func (p *Pipeline) packKeyID(ctx context.Context, blobID string) (string, error) {
	var b bytes.Buffer
	if _, err := p.Store.ReadRange(ctx, blobID, 0, repo.HeaderSize, &b); err != nil {
		return "", fmt.Errorf("read blob %s: %w", blobID, err)
	}
	h, err := repo.DecodeHeader(b.Bytes())
	if err != nil {
		return "", fmt.Errorf("blob %s: %w", blobID, err)
	}
	return hex.EncodeToString(h.KeyID[:]), nil
}

// stateLocked returns the v3 state with its keys, builder and cache files
// loaded; the caller holds p.v3mu.
func (p *Pipeline) stateLocked() (*v3state, error) {
	keys, err := p.keysLocked()
	if err != nil {
		return nil, err
	}
	st := p.v3
	if st.builder == nil {
		st.builder = &repo.Builder{Keys: keys, SpoolDir: p.SpoolDir, MaxPackSize: p.maxPackSize()}
	}
	if !st.loaded {
		st.loaded = true
		p.loadCache(st)
	}
	return st, nil
}

func (p *Pipeline) maxPackSize() int64 {
	if p.MaxBlobSize > 0 {
		return p.MaxBlobSize
	}
	return defaultMaxPack
}

// defaultMaxPack is the pack cap when no blob size limit is configured:
// what public Walrus publishers accept.
const defaultMaxPack = 10 << 20

// loadCache reads the dedup index and the epoch clock. Either may be
// missing or damaged: a cache, rebuilt when needed.
func (p *Pipeline) loadCache(st *v3state) {
	if p.CacheDir == "" {
		return
	}
	if f, err := os.Open(filepath.Join(p.CacheDir, indexFile)); err == nil {
		ix, err := repo.ReadIndex(f) // reads it whole: no buffer of its own
		f.Close()
		if err != nil {
			p.log().Warn("v3 dedup index not usable; it is rebuilt from Walrus when needed", "error", err)
		} else {
			st.index = ix
		}
	}
	if b, err := os.ReadFile(filepath.Join(p.CacheDir, clockFile)); err == nil {
		var c epochClock
		if json.Unmarshal(b, &c) == nil {
			st.clock = c
		}
	}
}

// saveCache writes the dedup index and the epoch clock. A failure costs a
// rebuild at the next start, nothing more.
func (p *Pipeline) saveCache(st *v3state) {
	if p.CacheDir == "" || st.index == nil {
		return
	}
	f, err := atomicfile.Create(filepath.Join(p.CacheDir, indexFile), 0o600)
	if err == nil {
		defer f.Abort()
		// WriteTo buffers its own writes: a buffer here held another
		// MiB per agent while a thousand of them saved at once.
		if _, err = st.index.WriteTo(f); err == nil {
			err = f.Commit()
		}
	}
	if err != nil {
		p.log().Warn("cannot save the v3 dedup index; it is rebuilt at the next start", "error", err)
	}
	if st.clock.Epoch > 0 {
		b, _ := json.Marshal(st.clock)
		if err := atomicfile.WriteFile(filepath.Join(p.CacheDir, clockFile), b, 0o600); err != nil {
			p.log().Warn("cannot save the Walrus epoch clock", "error", err)
		}
	}
}

// v3parent is where a new commit attaches: the previous head and, when it
// is a readable v3 head, its commit and trees.
type v3parent struct {
	blob, format string
	prev         *repo.Commit
	trees        repo.TreeSource
	rekey        bool // blob was written under a ReadKeys key
}

// parentLocked prepares st.index for a snapshot whose parent is head (the
// lock's head reference, bundlelock.Lock.BlobID): the cached index when it
// describes that head, else one rebuilt from Walrus for a v3 parent, or a
// new repository for a v1/v2 parent (a migrated agent's first v3 snapshot
// is a full one). A parent read from Walrus must be the head the reference
// names (its commit id, when the lock records it). A parent that is gone,
// not readable as this agent's, or not the head named starts a new chain.
func (p *Pipeline) parentLocked(ctx context.Context, st *v3state, head string) (v3parent, error) {
	ref, err := headref.Parse(head)
	if head == "" || err != nil || !repo.ValidBlobID(ref.ID) {
		st.index, st.prev, st.trees = repo.NewIndex(), nil, nil
		return v3parent{}, nil
	}
	blob := ref.ID
	if st.index != nil && st.index.Head() == blob {
		par := v3parent{blob: blob, format: repo.ParentV3, prev: st.prev, trees: st.trees}
		if par.prev == nil {
			// A restart: the index is cached, the trees are read from
			// Walrus (in a few batched requests) so that unchanged files
			// are not read again.
			r, err := p.openRef(ctx, st.keys, ref)
			if err != nil {
				if fatal := p.unreadableParent(blob, err); fatal != nil {
					return v3parent{}, fatal
				}
				// Its packs are not all there: nothing of the cached
				// index may be referenced.
				st.index, st.prev, st.trees = repo.NewIndex(), nil, nil
				return v3parent{blob: blob, format: repo.ParentV3}, nil
			}
			par.prev, par.trees = r.Commit(), r
			st.prev, st.trees = par.prev, par.trees
		}
		return par, nil
	}
	f, err := p.BlobFormat(ctx, blob)
	if err == nil && f != FormatV3 && ref.Bound {
		err = notV3(ref, f)
	}
	if err != nil {
		if fatal := p.unreadableParent(blob, err); fatal != nil {
			return v3parent{}, fatal
		}
		st.index, st.prev, st.trees = repo.NewIndex(), nil, nil
		return v3parent{}, nil
	}
	if f != FormatV3 {
		p.log().Info("the last snapshot is "+string(f)+"; this one starts the agent's v3 repository", "parent", blob)
		st.index, st.prev, st.trees = repo.NewIndex(), nil, nil
		return v3parent{blob: blob, format: string(f)}, nil
	}
	if len(p.ReadKeys) > 0 {
		if kid, err := p.packKeyID(ctx, blob); err == nil && kid != st.keys.KeyID() && p.readKeysLocked()[kid] != nil {
			// A re-key (an agent handed over): nothing under the earlier
			// owner's key is referenced, and no tree can be reused either
			// (the chunking polynomial follows from the key), so the
			// whole brain is stored under the own key, linked to the
			// earlier owner's head.
			p.log().Info("re-key: full snapshot under key "+st.keys.KeyID()+"; parent written under key "+kid, "parent", blob)
			st.index, st.prev, st.trees = repo.NewIndex(), nil, nil
			st.live, st.liveHead = nil, ""
			return v3parent{blob: blob, format: repo.ParentV3, rekey: true}, nil
		}
	}
	var headEnd uint64
	if st.index != nil {
		for _, pk := range st.index.Packs() {
			if pk.BlobID == blob {
				headEnd = pk.EndEpoch
			}
		}
	}
	r, err := p.openRef(ctx, st.keys, ref)
	var ix *repo.Index
	if err == nil {
		ix, err = r.Index(ctx, headEnd)
		err = p.badBytes(err)
	}
	if err != nil {
		if fatal := p.unreadableParent(blob, err); fatal != nil {
			return v3parent{}, fatal
		}
		// The head is there but not all of its packs: link to it, store
		// everything again.
		st.index, st.prev, st.trees = repo.NewIndex(), nil, nil
		return v3parent{blob: blob, format: repo.ParentV3}, nil
	}
	p.log().Info("v3 dedup index rebuilt from Walrus", "head", blob, "packs", len(ix.Packs()), "objects", ix.Len())
	st.index, st.prev, st.trees = ix, r.Commit(), r
	st.live, st.liveHead = nil, ""
	return v3parent{blob: blob, format: repo.ParentV3, prev: st.prev, trees: r}, nil
}

// unreadableParent decides what a parent that cannot be read means: gone
// from Walrus, not this agent's, or damaged starts a new chain (nil, with
// a warning); anything else (the network) fails the snapshot, to be
// retried.
func (p *Pipeline) unreadableParent(blob string, err error) error {
	for _, e := range []error{ErrBlobNotFound, repo.ErrAuth, repo.ErrCorrupt, repo.ErrNotPack, cipher.ErrUnknownFormat, cipher.ErrUnsupportedVersion,
		headref.ErrMismatch} {
		if errors.Is(err, e) {
			p.log().Warn("the previous snapshot cannot be read; this snapshot stores the whole brain", "parent", blob, "error", err)
			return nil
		}
	}
	return fmt.Errorf("read previous snapshot %s: %w", blob, err)
}

// packSink uploads the builder's packs, reads each back and compares it
// before the builder may reference it, and accounts for the time spent.
type packSink struct {
	p                *Pipeline
	in               *Input       // Newer and Slot, for packs stored as quilt patches
	upload, verify   atomic.Int64 // nanoseconds, summed over packs
	waited           atomic.Int64 // nanoseconds in quilt batches, summed
	uploaded         atomic.Int64 // bytes
	patches          atomic.Int64 // packs stored as quilt patches
	attempts         atomic.Int64
	epoch            atomic.Uint64 // the highest registration epoch the store reported
	alreadyCertified atomic.Bool
}

func (s *packSink) StorePack(ctx context.Context, pk *repo.Pack) (repo.Stored, error) {
	p := s.p
	if p.MaxBlobSize > 0 && pk.Size > p.MaxBlobSize {
		return repo.Stored{}, fmt.Errorf("%w: a pack of %d bytes is over the %d byte limit", ErrTooLarge, pk.Size, p.MaxBlobSize)
	}
	t := p.now()
	var st Stored
	var err error
	quilted := p.Quilts != nil && pk.Size <= p.Quilts.MaxPatch()
	if quilted {
		st, err = s.storePatch(ctx, pk.Open, pk.Size)
	} else {
		st, err = p.Store.PutReader(ctx, pk.Open, pk.Size, p.Epochs)
	}
	if err != nil {
		return repo.Stored{}, fmt.Errorf("upload pack: %w", err)
	}
	if st.AlreadyCertified {
		s.alreadyCertified.Store(true)
	}
	for {
		e := s.epoch.Load()
		if st.Epoch <= e || s.epoch.CompareAndSwap(e, st.Epoch) {
			break
		}
	}
	if quilted {
		// Read back and compared with the rest of its quilt.
		return repo.Stored{BlobID: st.BlobID, EndEpoch: st.EndEpoch}, nil
	}
	s.upload.Add(int64(p.now().Sub(t)))
	s.uploaded.Add(pk.Size)
	s.attempts.Add(int64(st.Attempts))
	t = p.now()
	if err := p.Store.Compare(ctx, st.BlobID, pk.Open, pk.Size); err != nil {
		return repo.Stored{}, fmt.Errorf("verify upload of pack %s: %w", st.BlobID, err)
	}
	s.verify.Add(int64(p.now().Sub(t)))
	return repo.Stored{BlobID: st.BlobID, EndEpoch: st.EndEpoch}, nil
}

// takeV3 is Take for format v3: the builder stages the snapshot (stores
// what no live pack holds yet, and what a repack moves) up to its final
// trees; then the lock and receipts are recorded as for every format, the
// builder stores them and the head pack last; only then does the lock
// name the new head.
func (p *Pipeline) takeV3(ctx context.Context, in Input) (Result, error) {
	p.v3mu.Lock()
	defer p.v3mu.Unlock()
	st, err := p.stateLocked()
	if err != nil {
		return Result{}, err
	}
	start := p.now()
	// The lock names the parent; it is recorded once the trees are final.
	lockFile := filepath.Join(p.BrainDir, bundlelock.FileName)
	parentBlob, err := lockParent(lockFile)
	if err != nil {
		return Result{}, err
	}
	par, err := p.parentLocked(ctx, st, parentBlob)
	if err != nil {
		return Result{}, err
	}
	plan := p.repackPlan(st, start)
	if len(plan.why) > 0 {
		p.log().Info("re-packing live objects", "packs", len(plan.list), "before_epoch", plan.before, "why", plan.why)
	}
	sink := &packSink{p: p, in: &in}
	st.builder.Sink = sink
	prepare := p.now().Sub(start)
	staged, err := st.builder.Stage(ctx, repo.SnapshotInput{
		Brain: p.BrainDir, Index: st.index, Prev: par.prev, Trees: par.trees,
		Known: in.Known, Want: in.Want, Overlay: in.Overlay,
		Parent: par.blob, ParentFormat: par.format, Time: start,
		Repack: plan.list, RepackBefore: plan.before,
	})
	if err != nil {
		return Result{}, v3Err(err)
	}
	defer staged.Abort()
	bundle := staged.Bundle()
	if in.Want == (hash.Digest{}) && bundle == hash.Null {
		return Result{}, v3Err(ErrEmpty) // an empty brain is never snapshotted
	}
	if parent, err := lockParent(lockFile); err != nil {
		return Result{}, v3Err(err)
	} else if parent != parentBlob {
		return Result{}, v3Err(fmt.Errorf("%w: the lock changed during the snapshot (it names %q, not %q)", repo.ErrChanged, parent, parentBlob))
	}
	// The lock is recorded in the brain here, before the commit, not
	// after it: the snapshot stores the recorded lock (this bundle hash,
	// the next version, naming the parent), and the record and its signed
	// transition receipt must be durable before a head exists, so that a
	// snapshot that fails or is killed from here on is retried under the
	// same version and receipt instead of minting new ones. No stage of
	// the builder runs meanwhile. v1 and v2 record the same way before
	// their tar.
	lock, lockPath, _, err := p.recordLock(ctx, bundle, start)
	if err != nil {
		return Result{}, v3Err(err)
	}
	res, err := staged.Commit(ctx, lock.Version())
	if err != nil {
		return Result{}, v3Err(err)
	}
	st.prev, st.trees = res.Commit, res.Trees
	st.live, st.liveHead = res.Stats.Live, res.Head.BlobID
	if e := sink.epoch.Load(); e > 0 {
		p.observeEpoch(st, e, p.now())
	}

	endEpoch := res.Head.EndEpoch
	for _, u := range res.Stats.Live {
		endEpoch = min(endEpoch, u.EndEpoch)
	}
	s := res.Stats
	out := Result{
		Format:           FormatV3,
		BlobID:           headref.Bind(res.Head.BlobID, headref.Digest(res.CommitID)).String(),
		BundleHash:       res.Commit.BundleHash,
		Version:          lock.Version(),
		Size:             res.Head.Size,
		SHA256:           res.HeadSHA256,
		EndEpoch:         endEpoch,
		AlreadyCertified: sink.alreadyCertified.Load(),
		Files:            s.Files,
		Bytes:            s.Bytes,
		Uploaded:         s.BytesUploaded,
		Packs:            s.Packs,
		LivePacks:        len(s.Live),
		Repacked:         plan.n,
		FilesRead:        s.FilesRead,
		CreatedAt:        start,
		Pack:             p.now().Sub(start),
		Prepare:          prepare,
		Upload:           time.Duration(sink.upload.Load()),
		Verify:           time.Duration(sink.verify.Load()),
		Attempts:         int(sink.attempts.Load()),
		Quilted:          int(sink.patches.Load()),
		BatchWait:        time.Duration(sink.waited.Load()),
		Rekey:            par.rekey,
		Reads:            res.Reads,
	}
	// Only a verified head becomes the lock's walrusSnapshotBlobId.
	lock.Uploaded(bundlelock.LineageEntry{
		BlobID:     out.BlobID,
		BundleHash: out.BundleHash.String(),
		CreatedAt:  start.UnixMilli(),
		Size:       out.Size,
		EndEpoch:   out.EndEpoch,
	})
	if err := bundlelock.Write(lockPath, lock); err != nil {
		return Result{}, fmt.Errorf("record blob id in lock: %w", err)
	}
	p.saveCache(st)
	return out, nil
}

// v3Err marks a v3 snapshot's error with this package's sentinels.
func v3Err(err error) error {
	switch {
	case errors.Is(err, repo.ErrChanged):
		err = fmt.Errorf("%w: %w", ErrChanged, err)
	case errors.Is(err, repo.ErrTooLarge):
		err = fmt.Errorf("%w: %w", ErrTooLarge, err)
	}
	return fmt.Errorf("v3 snapshot: %w", err)
}
