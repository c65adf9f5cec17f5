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
// agent's constants; Snapshot's input is per snapshot. A Builder may be
// reused but runs one snapshot at a time.
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

	now func() time.Time // the clock of racy checks (tests); nil: time.Now
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
	// Seal, when set, is called once the trees are final and their bundle
	// hash is known (and equal to Want, when set), before the top-level
	// lock and receipts files are read: the caller records the new state
	// in them. It returns the lock's version, which LockVersion then need
	// not give.
	Seal func(ctx context.Context, bundle hash.Digest) (lockVersion int64, err error)
	// Learn, when set, is told of every file of the root tree the snapshot
	// read, from several goroutines: its '/'-separated path, its stat
	// after it was opened, the moment before it was opened, the bytes read
	// and their SHA-256 (see hash.Learner).
	Learn func(path string, st fsys.Info, start time.Time, size int64, sum [32]byte)
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
	// LockVersion is the lock's version field.
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

// build is one Snapshot run.
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

	fsroot   fsys.Root // the brain, through in.Overlay
	root     *dirNode
	lock     *Entry
	receipts *Entry
	trees    TreeMap

	// single: no Want, the snapshot is the hash (see SnapshotInput.Want).
	single  bool
	racyMu  sync.Mutex
	racy    []racyFile
	lockVer int64

	// usage is how much of each indexed pack the commit references; seen
	// the objects counted (finishTrees, sideFile).
	usage map[*indexPack]int64
	seen  map[Handle]struct{}

	chunkedMu sync.Mutex
	chunked   []chunkedFile

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

// Snapshot snapshots in.Brain: it walks the brain (never following a
// symlink below it, skipping what is neither a regular file nor a
// directory), reads and chunks only the files it cannot reuse, seals and
// packs the objects no live pack holds yet, uploads every full pack
// through the sink, and finally the head pack carrying the commit. The
// stages overlap (read+hash+chunk, seal, spool, upload) with bounded
// memory. On any error nothing is referenced and in.Index is unchanged;
// packs already uploaded are orphans the next commit ignores.
func (b *Builder) Snapshot(ctx context.Context, in SnapshotInput) (*Result, error) {
	if err := b.check(&in); err != nil {
		return nil, err
	}
	if _, err := b.Keys.Polynomial(); err != nil {
		return nil, err
	}
	w := b.workers()
	bufs := b.buffers(w, b.uploads())
	// Kept for reuse: one per uploader, the one filling, and the ones
	// waiting between the stages.
	sp := &spools{dir: b.SpoolDir, max: b.uploads() + 3}
	defer sp.drain()
	bd := &build{
		spools: sp,
		b:      b, in: &in, keys: b.Keys, tables: b.Keys.tables,
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
	res, err := bd.run(ctx)
	if err != nil {
		b.dropBuffers(bufs)
		return nil, err
	}
	for _, p := range []*bufPool{bufs.small, bufs.big, bufs.sealed, bufs.sealedSm} {
		p.park()
	}
	return res, nil
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

func (bd *build) run(ctx context.Context) (res *Result, err error) {
	if bd.in.Prev != nil {
		if p, ok := bd.in.Trees.(prefetcher); ok {
			if err := p.Prefetch(ctx, bd.in.Prev.Root); err != nil {
				return nil, fmt.Errorf("load previous trees: %w", err)
			}
		}
	}
	root, err := fsys.OpenRootOverlay(bd.in.Brain, bd.in.Overlay)
	if err != nil {
		return nil, fmt.Errorf("repo: brain: %w", err)
	}
	defer root.Close()
	bd.fsroot = root

	g, gctx := errgroup.WithContext(ctx)
	var filesDone sync.WaitGroup // walker, readers, sealers
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
				return fmt.Errorf("load previous root tree: %w", err)
			}
			prev, prevID = t, bd.in.Prev.Root
		}
		var err error
		bd.root, _, err = bd.walkDir(gctx, "", prev, prevID, 0)
		return err
	})
	var readers sync.WaitGroup
	for range w {
		readers.Add(1)
		filesDone.Add(1)
		g.Go(func() error {
			defer filesDone.Done()
			defer readers.Done()
			return bd.readFiles(gctx)
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
			return bd.seal(gctx)
		})
	}
	var bundle hash.Digest
	g.Go(func() error {
		defer close(bd.objects)
		filesDone.Wait()
		if err := gctx.Err(); err != nil {
			return err
		}
		var err error
		if bundle, err = bd.finishTrees(gctx); err != nil {
			return err
		}
		return bd.sealTrees(gctx, bundle)
	})
	g.Go(func() error { return bd.spool(gctx) })
	g.Go(func() error { return bd.finish(gctx) })
	var uploaders sync.WaitGroup
	for range bd.b.uploads() {
		uploaders.Add(1)
		g.Go(func() error {
			defer uploaders.Done()
			return bd.upload(gctx)
		})
	}
	err = g.Wait()
	if err != nil {
		if bd.last != nil {
			bd.last.Abort()
		}
		return nil, err
	}
	return bd.commit(ctx, bundle, bd.usage)
}
