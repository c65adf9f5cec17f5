package repo

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/hash"
)

// The two top-level files kept beside the root tree, not in it.
const (
	LockFile     = "bundle.lock.json"
	ReceiptsFile = "receipts.ndjson"
)

// Walk bounds.
const (
	// MaxDepth bounds directory nesting, in the walker and in readers.
	MaxDepth = 256
	// maxDirEntries bounds one directory listing.
	maxDirEntries = 1 << 22
)

// PackSink stores finished packs. StorePack uploads the pack (p.Open, once
// per attempt; p.Size bytes), reads the blob back and checks that it is
// the pack (the same bytes as p.Open's), and only then returns the blob id
// and end epoch: the builder references a pack's objects only after
// StorePack succeeded. The pack belongs to the builder, which discards it
// when StorePack returns.
//
// Comparing the read-back with p.Open's bytes costs a memory compare; a
// digest would cost a SHA-256 pass over every uploaded byte (which is why
// a full pack has none).
//
// The sink is the builder's one dependency rather than a result it hands
// back: uploads overlap the reading and sealing (a first snapshot of a
// large brain is many packs, the spool directory holds a few), and the
// commit may name only packs already stored.
type PackSink interface {
	StorePack(ctx context.Context, p *Pack) (Stored, error)
}

// Stored is where a pack went.
type Stored struct {
	BlobID   string
	EndEpoch uint64 // exclusive: the blob expires when this epoch begins
}

// TreeSource loads trees by id: a *Reader (from Walrus) or a TreeMap (the
// trees a previous Snapshot built, kept in memory).
type TreeSource interface {
	Tree(ctx context.Context, id ID) (*Tree, error)
}

// prefetcher is a TreeSource that can load a whole commit's trees in a few
// batched round trips (Reader does).
type prefetcher interface {
	Prefetch(ctx context.Context, root ID) error
}

// TreeMap is an in-memory TreeSource.
type TreeMap map[ID]*Tree

// Tree returns the tree id, or an ErrCorrupt error when it is not in the
// map.
func (m TreeMap) Tree(_ context.Context, id ID) (*Tree, error) {
	if t, ok := m[id]; ok {
		return t, nil
	}
	return nil, corruptf("tree %s not found", id.Short())
}

// Builder takes v3 snapshots of one agent's brain. Its fields are the
// agent's constants; Snapshot's (and Stage's) input is per snapshot. A
// Builder may be reused but runs one snapshot at a time: a Staged one
// until it is committed or aborted.
type Builder struct {
	Keys        *Keys
	Sink        PackSink
	SpoolDir    string // where packs are spooled before upload ("": os.TempDir)
	MaxPackSize int64  // walrus.max_blob_size; at least MinPackSize
	// Workers is the number of file readers and of sealers; 0 means
	// runtime.GOMAXPROCS(0).
	Workers int
	// Uploads is the number of concurrent StorePack calls; 0 means 2.
	// Two uploads overlap one pack's upload with the other's read-back
	// and the store's fsync; more pay off when each upload waits on a far
	// publisher, at the cost of a pack in the spool directory each.
	Uploads int

	// The pipeline's buffer pools, kept from one snapshot to the next: a
	// daemon snapshotting every few seconds would otherwise fault in tens
	// of MiB of fresh pages each time (the pools' free buffers go to the
	// GC when idle). Dropped after a failed snapshot.
	bufMu sync.Mutex
	bufs  *buffers

	now       func() time.Time  // the clock of racy checks (tests); nil: time.Now
	afterRead func(path string) // tests: told of each file of the tree once read
}

// SnapshotInput is one snapshot's input.
type SnapshotInput struct {
	// Brain is the brain directory. Its top-level bundle.lock.json and
	// receipts.ndjson are stored beside the root tree (Commit.Lock,
	// Commit.Receipts).
	Brain string
	// Index is the dedup index of the previous head; required, updated in
	// place when the snapshot succeeds (and only then).
	Index *Index
	// Prev is the previous v3 commit and Trees loads its trees; with both,
	// a file whose path, size and SHA-256 (from Known) match Prev reuses
	// its chunks without being read. Nil means every file is read.
	Prev  *Commit
	Trees TreeSource
	// Known gives the brain's files with their digests as the hash the
	// lock records computed them (a *hash.Cache, or hash.Files).
	Known KnownFiles
	// Want, when not zero, is the bundle hash the caller computed: a tree
	// that hashes otherwise is ErrChanged. When zero, the snapshot is the
	// hash: each file is read once, and a file whose stat changed while it
	// was read is ErrChanged, as is one written within the timestamp
	// granularity of its read (hash.Racy) that a second read at the end
	// finds different.
	Want hash.Digest
	// Overlay, when set, is the view of the brain Want was computed
	// through (consistent copies of live SQLite databases): the snapshot
	// reads the same view, with the same walker as the hasher.
	Overlay *fsys.Overlay
	// Parent is the previous head's blob id ("" for an agent's first
	// snapshot) and ParentFormat its format ("v1", "v2", "v3").
	Parent       string
	ParentFormat string
	// Time is the commit time (time.Now when zero).
	Time time.Time
	// LockVersion is the lock's version field, for Snapshot (a caller of
	// Stage gives it to Commit).
	LockVersion int64
	// Repack lists packs whose still-referenced objects must be written
	// again (expiry, compaction); RepackBefore adds every indexed pack
	// whose end epoch is at most that epoch (0: none). The new commit
	// references none of them.
	Repack       []string
	RepackBefore uint64
}

// KnownFiles looks up a file of the brain by its '/'-separated path.
type KnownFiles interface {
	Lookup(path string) (hash.File, bool)
}

// Result describes a snapshot whose packs are all uploaded and verified.
type Result struct {
	Commit   *Commit
	CommitID ID      // SHA-256 of the commit's encoding
	Head     PackRef // the head pack: its blob id is the new ENS value
	// HeadSHA256 is the head pack's SHA-256 (the daemon records it, so
	// that a drill can check the blob reads back intact).
	HeadSHA256 [32]byte
	// Trees holds every tree of the commit: pass it as the next
	// snapshot's Trees to avoid downloading them.
	Trees TreeMap
	Stats Stats
	// Reads, in a snapshot without Want (which is the hash), are the files
	// of the root tree it read, in no order: a hash cache takes them over
	// (hash.Learner), so that its next pass need not read them again.
	Reads FileReads
}

// FileRead is one file a snapshot read (see hash.Learner.Add).
type FileRead struct {
	Path   string    // '/'-separated, relative to the brain
	Stat   fsys.Info // after the open, before the read
	Start  time.Time // just before the open
	Size   int64     // the bytes read
	SHA256 [32]byte  // of those bytes
}

// Stats counts what a snapshot did.
type Stats struct {
	Files, Dirs   int   // in the commit's root tree
	Bytes         int64 // total size of those files
	FilesRead     int   // files read and chunked (changed or new, plus lock and receipts)
	BytesRead     int64
	FilesReused   int // files whose chunks were reused without reading
	ChunksNew     int
	ChunksReused  int
	TreesNew      int
	TreesReused   int
	BytesNew      int64 // plaintext bytes of new objects
	BytesStored   int64 // stored bytes of new objects (Commit.Added)
	Packs         int   // packs uploaded, the head included
	BytesUploaded int64 // their total size
	// Live says how much of each pack the commit references (the head
	// included): a pack mostly dead is a compaction candidate (Repack).
	Live []PackUse
}

// PackUse is one live pack's size and the stored bytes of its objects the
// commit references.
type PackUse struct {
	BlobID   string
	Size     int64
	Live     int64
	EndEpoch uint64
}

// build is one snapshot's state, from Stage to Commit.
type build struct {
	spools  *spools // the snapshot's spool files, reused across its packs
	b       *Builder
	in      *SnapshotInput
	keys    *Keys
	tables  *rabin
	repack  map[string]bool
	maxTree int

	mu      sync.Mutex
	pending map[Handle]struct{} // objects claimed for sealing in this snapshot

	// alt holds, for objects whose indexed location is in a pack being
	// repacked, another location outside the repack set.
	alt map[Handle]objLoc

	bufs             *buffers
	small, big       *bufPool
	sealed, sealedSm *bufPool

	jobs    chan fileJob
	chunks  chan chunkMsg
	objects chan sealedObj
	full    chan *PackWriter // packs to write out
	ready   chan *Pack       // packs to upload

	upMu     sync.Mutex
	uploaded []uploadedPack
	last     *PackWriter

	fsroot   fsys.Root // the brain, through in.Overlay; open from Stage to Commit
	root     *dirNode
	rootInfo fsys.Info   // the brain directory's own stat, for the commit
	bundle   hash.Digest // the root tree's bundle hash (finishTrees)
	lock     *Entry
	receipts *Entry
	trees    TreeMap

	// single: no Want, the snapshot is the hash (see SnapshotInput.Want).
	single bool
	readMu sync.Mutex
	racy   []racyFile // files to read again (checkRacy)
	reads  FileReads  // Result.Reads

	// usage is how much of each indexed pack the commit references; seen
	// the objects counted (finishTrees, readHeadFile).
	usage map[*indexPack]int64
	seen  map[Handle]struct{}

	chunkedMu sync.Mutex
	chunked   []chunkedFile

	// linked are the files read that have more than one name
	// (resolveLinks).
	linkMu sync.Mutex
	linked []linkedFile

	files, dirs int   // in the commit's root tree (finishTrees)
	bytes       int64 // their total size

	stats struct {
		filesRead, filesReused, chunksNew, chunksReused, treesNew, treesReused atomic.Int64
		bytesRead, bytesNew, bytesStored, packs, bytesUploaded                 atomic.Int64
	}
}

func (b *Builder) workers() int {
	if b.Workers > 0 {
		return b.Workers
	}
	return runtime.GOMAXPROCS(0)
}

func (b *Builder) uploads() int {
	if b.Uploads > 0 {
		return b.Uploads
	}
	return 2
}

// Snapshot is Stage then Commit with in.LockVersion: for a caller whose
// lock and receipts are in place before the snapshot starts.
func (b *Builder) Snapshot(ctx context.Context, in SnapshotInput) (*Result, error) {
	s, err := b.Stage(ctx, in)
	if err != nil {
		return nil, err
	}
	return s.Commit(ctx, in.LockVersion)
}

// Stage runs a snapshot of in.Brain up to its head: it walks the brain
// (never following a symlink below it, storing each symlink's target as
// read, skipping sockets, fifos and devices), reads and chunks only the
// files it cannot reuse,
// seals and packs the objects no live pack holds yet, and uploads every
// full pack through the sink. The stages overlap (read+hash+chunk, seal,
// spool, upload) with bounded memory. It returns when the trees are final,
// their bundle hash vouched for (equal to in.Want, or every racy file read
// again), and no stage runs any more.
//
// The caller then records the bundle hash (Staged.Bundle) in the brain's
// lock and receipts, which Commit stores beside the trees, and calls
// Commit, or Abort. On any error, and after Abort, nothing is referenced
// and in.Index is unchanged; packs already uploaded are orphans the next
// commit ignores.
func (b *Builder) Stage(ctx context.Context, in SnapshotInput) (*Staged, error) {
	if err := b.check(&in); err != nil {
		return nil, err
	}
	tables, err := b.Keys.chunkTables()
	if err != nil {
		return nil, err
	}
	root, err := fsys.OpenRootOverlay(in.Brain, in.Overlay)
	if err != nil {
		return nil, fmt.Errorf("repo: brain: %w", err)
	}
	w := b.workers()
	bufs := b.buffers(w, b.uploads())
	bd := &build{
		// Kept for reuse: one per uploader, the one filling, and the
		// ones waiting between the stages.
		spools: &spools{dir: b.SpoolDir, max: b.uploads() + 3},
		b:      b, in: &in, keys: b.Keys, tables: tables,
		fsroot:   root,
		repack:   map[string]bool{},
		single:   in.Want == (hash.Digest{}),
		pending:  map[Handle]struct{}{},
		bufs:     bufs,
		small:    bufs.small,
		big:      bufs.big,
		sealed:   bufs.sealed,
		sealedSm: bufs.sealedSm,
		jobs:     make(chan fileJob, 64),
		chunks:   make(chan chunkMsg, 2*w),
		objects:  make(chan sealedObj, 2*w),
		full:     make(chan *PackWriter),
		ready:    make(chan *Pack, 1),
		trees:    TreeMap{},
	}
	// The largest object an empty pack can hold.
	bd.maxTree = int(min(b.MaxPackSize-HeaderSize-minIndexStored-indexEntryLen-Overhead, MaxTreeLen))
	for _, id := range in.Repack {
		bd.repack[id] = true
	}
	if in.RepackBefore > 0 {
		for _, p := range in.Index.Packs() {
			if p.EndEpoch <= in.RepackBefore {
				bd.repack[p.BlobID] = true
			}
		}
	}
	if len(bd.repack) > 0 {
		bd.alt = in.Index.alternatives(bd.repack)
	}
	s := &Staged{bd: bd}
	if err := bd.run(ctx); err != nil {
		s.end(false)
		return nil, err
	}
	// The stages are done and their channels closed: a staged snapshot
	// may wait long (its head for a quilt batch, beside every other
	// agent's), and a thousand of them held 4.5 MB of empty channels.
	bd.jobs, bd.chunks, bd.objects, bd.full, bd.ready = nil, nil, nil, nil, nil
	return s, nil
}

// Staged is a snapshot whose trees are final and whose full packs are
// uploaded; its head is not written yet. Call Commit or Abort once (Abort
// after Commit does nothing, so a deferred Abort is fine). Not safe for
// concurrent use.
type Staged struct {
	bd   *build
	done bool
}

// Bundle is the bundle hash of the staged trees.
func (s *Staged) Bundle() hash.Digest { return s.bd.bundle }

// Commit reads the brain's top-level lock and receipts as they are now,
// stores them beside the trees, and uploads the head pack carrying the
// commit, whose LockVersion is lockVersion. Then, and only then, in.Index
// describes the new head.
func (s *Staged) Commit(ctx context.Context, lockVersion int64) (*Result, error) {
	if s.done {
		return nil, errors.New("repo: the staged snapshot has ended")
	}
	if lockVersion < 0 {
		s.end(false)
		return nil, errors.New("repo: negative lock version")
	}
	res, err := s.bd.head(ctx, lockVersion)
	s.end(err == nil)
	return res, err
}

// Abort ends a staged snapshot without a head.
func (s *Staged) Abort() {
	if !s.done {
		s.end(true) // no stage runs: every buffer is back in its pool
	}
}

// end releases what the snapshot holds. The buffer pools are kept for
// the next snapshot when every buffer came back (ok), else dropped.
func (s *Staged) end(ok bool) {
	s.done = true
	bd := s.bd
	if bd.last != nil {
		bd.last.Abort()
	}
	bd.fsroot.Close()
	bd.spools.drain()
	if !ok {
		bd.b.dropBuffers(bd.bufs)
		return
	}
	bd.parkBuffers()
}

// parkBuffers moves the pools' free buffers to their idle pools.
func (bd *build) parkBuffers() {
	for _, p := range []*bufPool{bd.small, bd.big, bd.sealed, bd.sealedSm} {
		p.park()
	}
}

func (b *Builder) check(in *SnapshotInput) error {
	switch {
	case b.Keys == nil:
		return errors.New("repo: builder has no keys")
	case b.Sink == nil:
		return errors.New("repo: builder has no pack sink")
	case b.MaxPackSize < MinPackSize:
		return fmt.Errorf("%w: max pack size %d is below the minimum %d", ErrTooLarge, b.MaxPackSize, MinPackSize)
	case in.Index == nil:
		return errors.New("repo: snapshot needs a dedup index (NewIndex for a new repository)")
	case in.Parent != "" && !ValidBlobID(in.Parent):
		return fmt.Errorf("repo: parent %q is not a blob id", clip(in.Parent))
	case (in.Parent == "") != (in.ParentFormat == ""):
		return errors.New("repo: parent and parent format go together")
	case in.Parent != "" && !slices.Contains([]string{ParentV1, ParentV2, ParentV3}, in.ParentFormat):
		return fmt.Errorf("repo: parent format %q: want v1, v2 or v3", clip(in.ParentFormat))
	case in.LockVersion < 0:
		return errors.New("repo: negative lock version")
	}
	if in.Prev != nil && in.Trees == nil {
		return errors.New("repo: a previous commit needs a tree source")
	}
	return nil
}

// run runs the pipeline's stages, each in its own goroutine(s), and
// waits for them all:
//
//	walker (walk.go) → jobs → readers (read.go) → chunks → sealers (seal.go)
//	   → objects → spooler → full → finisher → ready → uploaders (upload.go)
//
// Once the walker, readers and sealers are done, the trees stage
// (trees.go) encodes the trees, seals the new ones into objects, computes
// the bundle hash and checks it, then closes objects. The last pack stays
// open (bd.last): Commit adds the lock and receipts and the commit to it
// (head.go).
func (bd *build) run(ctx context.Context) error {
	if bd.in.Prev != nil {
		if p, ok := bd.in.Trees.(prefetcher); ok {
			if err := p.Prefetch(ctx, bd.in.Prev.Root); err != nil {
				return fmt.Errorf("load previous trees: %w", err)
			}
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	var filesDone sync.WaitGroup // walker, readers, sealers
	// failed is set by a walker, reader or sealer that fails, before its
	// filesDone.Done: the errgroup cancels gctx only once the function
	// has returned, so the tree finisher, woken by Done, may not see the
	// cancellation yet and must not finish a half-built tree.
	var failed atomic.Bool
	fail := func(err error) error {
		if err != nil {
			failed.Store(true)
		}
		return err
	}
	w := bd.b.workers()

	filesDone.Add(1)
	g.Go(func() error {
		defer filesDone.Done()
		defer close(bd.jobs)
		var prev *Tree
		var prevID ID
		if bd.in.Prev != nil {
			t, err := bd.in.Trees.Tree(gctx, bd.in.Prev.Root)
			if err != nil {
				return fail(fmt.Errorf("load previous root tree: %w", err))
			}
			prev, prevID = t, bd.in.Prev.Root
		}
		var err error
		bd.root, bd.rootInfo, err = bd.walkDir(gctx, "", prev, prevID, 0)
		return fail(err)
	})
	var readers sync.WaitGroup
	for range w {
		readers.Add(1)
		filesDone.Add(1)
		g.Go(func() error {
			defer filesDone.Done()
			defer readers.Done()
			return fail(bd.readFiles(gctx))
		})
	}
	g.Go(func() error {
		readers.Wait()
		close(bd.chunks)
		return nil
	})
	for range w {
		filesDone.Add(1)
		g.Go(func() error {
			defer filesDone.Done()
			return fail(bd.seal(gctx))
		})
	}
	g.Go(func() error {
		defer close(bd.objects)
		filesDone.Wait()
		if failed.Load() {
			return nil // the one that failed returns its error
		}
		if err := gctx.Err(); err != nil {
			return err
		}
		var err error
		if bd.bundle, err = bd.finishTrees(gctx); err != nil {
			return err
		}
		if err := checkCounts(int64(bd.files), int64(bd.dirs)); err != nil {
			return err
		}
		return bd.checkTrees(gctx)
	})
	g.Go(func() error { return bd.spool(gctx) })
	g.Go(func() error { return bd.finish(gctx) })
	for range bd.b.uploads() {
		g.Go(func() error { return bd.upload(gctx) })
	}
	return g.Wait()
}
