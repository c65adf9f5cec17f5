package repo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	gohash "hash"
	"io"
	"io/fs"
	"runtime"
	"slices"
	"strings"
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

// buffers are the bounded pools of a Builder's pipeline.
type buffers struct {
	workers, uploads int
	packSize         int64
	small, big       *bufPool // file and chunk contents
	sealed, sealedSm *bufPool // sealed chunks, large and small
}

// buffers returns the pools for this configuration, made on first use.
func (b *Builder) buffers(w, u int) *buffers {
	b.bufMu.Lock()
	defer b.bufMu.Unlock()
	if x := b.bufs; x != nil && x.workers == w && x.uploads == u && x.packSize == b.MaxPackSize {
		return x
	}
	b.bufs = &buffers{
		workers: w, uploads: u, packSize: b.MaxPackSize,
		small:    newBufPool(MinChunk+1, 8*w),
		big:      newBufPool(MaxChunk, w+2),
		sealed:   newBufPool(MaxChunk+Overhead, w+2),
		sealedSm: newBufPool(MinChunk+1+Overhead, 4*w),
	}
	return b.bufs
}

// dropBuffers forgets x: a failed snapshot may not have returned all of
// its buffers.
func (b *Builder) dropBuffers(x *buffers) {
	b.bufMu.Lock()
	defer b.bufMu.Unlock()
	if b.bufs == x {
		b.bufs = nil
	}
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

// dirNode is one directory of the brain being snapshotted. The walker
// makes its tree's entries in tree order with room for every listed name,
// so a pointer to a file's entry stays valid while the walker appends: a
// reader fills the entry in place. finishTrees fills the directories'
// subtrees and drops what vanished. Nothing else is kept per file.
//
// A directory that is exactly as in the previous commit (same names,
// modes and file contents, its subdirectories too) keeps the previous
// commit's tree itself (same): a snapshot of a large, mostly unchanged
// brain then holds one set of trees, not two.
type dirNode struct {
	tree *Tree
	subs []*dirNode // one per EntryDir entry, in order
	id   ID
	same bool // tree is the previous commit's tree id
}

// entryGone marks an entry whose file or directory vanished (or became
// something else) before it could be read: it is left out of the tree.
const entryGone EntryType = 0

// chunkedFile is a file of several chunks: its chunk ids are filled by the
// sealers while it is read.
type chunkedFile struct {
	e     *Entry
	slots []*ID
}

type fileJob struct {
	e     *Entry
	f     fsys.File
	path  string
	start time.Time // just before the open
}

// racyFile is a file read within the timestamp granularity of its last
// change, to read again before the commit (single-read snapshots).
type racyFile struct {
	path string
	st   fsys.Info
	sum  [32]byte
}

type chunkMsg struct {
	data  []byte
	id    ID
	known bool // id already computed (a whole small file: its SHA-256)
	slot  *ID  // where the id goes (nil when known)
	ref   *bufRef
}

// bufRef shares a pooled buffer between stages: the last release returns
// it to its pool.
type bufRef struct {
	n    atomic.Int32
	buf  *[]byte
	pool *bufPool
}

func newBufRef(buf *[]byte, pool *bufPool, users int32) *bufRef {
	r := &bufRef{buf: buf, pool: pool}
	r.n.Store(users)
	return r
}

func (r *bufRef) release() {
	if r.n.Add(-1) == 0 {
		r.pool.put(r.buf)
	}
}

type sealedObj struct {
	h    Handle
	data []byte
	plen int
	buf  *[]byte  // data's pooled buffer, nil for a one-off
	pool *bufPool // buf's pool
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

type uploadedPack struct {
	ref     PackRef
	entries []IndexEntry
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

// walkDir lists the directory rel, through the same walker (and overlay)
// as the hasher: a file it can reuse costs no system call beyond the
// listing (its mode comes from Known, like its contents), the others go to
// the readers, which stat them once open. It returns the directory's node
// and permission bits, or a nil node when the directory vanished before it
// could be listed: it is left out, like a vanished file. prev is the
// directory's tree in the previous commit (nil if none), prevID its id.
func (bd *build) walkDir(ctx context.Context, rel string, prev *Tree, prevID ID, depth int) (*dirNode, fs.FileMode, error) {
	if depth >= MaxDepth {
		return nil, 0, fmt.Errorf("%w: %s: directories nested deeper than %d", ErrTooLarge, displayPath(rel), MaxDepth)
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	ents, info, err := bd.fsroot.ReadDir(rel)
	if err != nil {
		if rel != "" && fsys.IsGone(err) {
			return nil, 0, nil
		}
		return nil, 0, fmt.Errorf("repo: read directory %s: %w", displayPath(rel), err)
	}
	if len(ents) > maxDirEntries {
		return nil, 0, fmt.Errorf("%w: %s: more than %d entries", ErrTooLarge, displayPath(rel), maxDirEntries)
	}
	slices.SortFunc(ents, func(a, b fsys.Entry) int { return strings.Compare(a.Name, b.Name) }) // bytewise: the tree order
	// Never grown: readers hold pointers to its elements.
	d := &dirNode{tree: &Tree{Entries: make([]Entry, 0, len(ents))}}
	// same: every entry so far is the one at its place in prev.
	same := prev != nil
	sameAs := func(e *Entry) bool {
		i := len(d.tree.Entries) - 1
		if i >= len(prev.Entries) {
			return false
		}
		pe := &prev.Entries[i]
		return pe.Name == e.Name && pe.Type == e.Type && pe.Mode == e.Mode
	}
	for _, ent := range ents {
		name := ent.Name
		p := name
		if rel != "" {
			p = rel + "/" + name
		}
		isDir, isFile := ent.Type == fs.ModeDir, ent.Type == 0
		if !isDir && !isFile {
			continue // symlink, socket, fifo, device: skipped like the hasher
		}
		if err := CheckName(name); err != nil {
			return nil, 0, fmt.Errorf("%w (at %q)", err, p)
		}
		if rel == "" && (name == LockFile || name == ReceiptsFile) {
			if isDir {
				return nil, 0, fmt.Errorf("%w: top-level %s is a directory", ErrName, name)
			}
			continue // read after the trees (sideFile)
		}
		var pe *Entry
		if prev != nil {
			pe = prev.Find(name)
		}
		if isDir {
			var sub *Tree
			var subID ID
			if pe != nil && pe.Type == EntryDir {
				subID = pe.Subtree()
				if sub, err = bd.in.Trees.Tree(ctx, subID); err != nil {
					return nil, 0, fmt.Errorf("load previous tree of %s: %w", p, err)
				}
			}
			c, mode, err := bd.walkDir(ctx, p, sub, subID, depth+1)
			if err != nil {
				return nil, 0, err
			}
			if c != nil {
				d.tree.Entries = append(d.tree.Entries, Entry{Name: name, Type: EntryDir, Mode: mode})
				d.subs = append(d.subs, c)
				same = same && c.same && sameAs(&d.tree.Entries[len(d.tree.Entries)-1])
			} else {
				same = false
			}
			continue
		}
		d.tree.Entries = append(d.tree.Entries, Entry{Name: name, Type: EntryFile})
		e := &d.tree.Entries[len(d.tree.Entries)-1]
		if k, ok := bd.reusable(p, pe); ok {
			e.Mode, e.Size, e.SHA256, e.Chunks = k.Mode.Perm(), pe.Size, pe.SHA256, pe.Chunks
			bd.stats.filesReused.Add(1)
			bd.stats.chunksReused.Add(int64(len(pe.Chunks)))
			same = same && sameAs(e)
			continue
		}
		same = false
		if err := bd.submit(ctx, p, e); err != nil {
			return nil, 0, err
		}
	}
	if same && len(d.tree.Entries) == len(prev.Entries) {
		// Nothing differs: keep prev (the fresh entries go now).
		d = &dirNode{tree: prev, subs: d.subs, id: prevID, same: true}
	}
	return d, info.Mode.Perm(), nil
}

// reusable returns the hash cache's entry for the file at path when the
// file may keep the previous commit's entry pe without being read: the
// cache vouches for the same size and SHA-256, and every chunk is in a
// live pack that is not being repacked (or was sealed in this snapshot).
func (bd *build) reusable(path string, pe *Entry) (hash.File, bool) {
	if pe == nil || pe.Type != EntryFile || bd.in.Known == nil {
		return hash.File{}, false
	}
	k, ok := bd.in.Known.Lookup(path)
	if !ok || k.Size != pe.Size || k.SHA256 != pe.SHA256 {
		return hash.File{}, false
	}
	for _, id := range pe.Chunks {
		if !bd.available(Handle{TypeChunk, id}) {
			return hash.File{}, false
		}
	}
	return k, true
}

func (bd *build) available(h Handle) bool {
	bd.mu.Lock()
	_, ok := bd.pending[h]
	bd.mu.Unlock()
	if ok {
		return true
	}
	_, ok = bd.locate(h)
	return ok
}

// locate returns where an indexed pack outside the repack set holds h.
func (bd *build) locate(h Handle) (objLoc, bool) {
	l, ok := bd.in.Index.lookup(h)
	if ok && bd.repack[l.pack.ref.BlobID] {
		l, ok = bd.alt[h]
	}
	return l, ok
}

// claim reports whether h must be sealed now: no live pack outside the
// repack set holds it and no other stage claimed it.
func (bd *build) claim(h Handle) bool {
	if _, ok := bd.locate(h); ok {
		return false
	}
	bd.mu.Lock()
	defer bd.mu.Unlock()
	if _, ok := bd.pending[h]; ok {
		return false
	}
	bd.pending[h] = struct{}{}
	return true
}

func (bd *build) submit(ctx context.Context, path string, e *Entry) error {
	start := time.Now()
	if bd.b.now != nil {
		start = bd.b.now()
	}
	f, err := bd.fsroot.Open(path)
	if err != nil {
		if fsys.IsGone(err) {
			e.Type = entryGone
			return nil
		}
		return fmt.Errorf("repo: open %s: %w", path, err)
	}
	select {
	case bd.jobs <- fileJob{e: e, f: f, path: path, start: start}:
		return nil
	case <-ctx.Done():
		f.Close()
		return ctx.Err()
	}
}

// readFiles is a reader stage: it reads, hashes and chunks files.
func (bd *build) readFiles(ctx context.Context) error {
	var cut *cutter
	sum := sha256.New()
	var firstErr error
	for j := range bd.jobs {
		if firstErr == nil {
			firstErr = ctx.Err()
		}
		if firstErr != nil {
			j.f.Close() // drain: the walker may still be sending
			continue
		}
		firstErr = bd.readFile(ctx, j, &cut, sum)
		j.f.Close()
	}
	return firstErr
}

// readFile reads one file; *cut is the reader's cutter, made on its first
// file larger than MinChunk.
func (bd *build) readFile(ctx context.Context, j fileJob, cut **cutter, sum gohash.Hash) error {
	e := j.e
	st, err := j.f.Stat()
	if err != nil {
		return fmt.Errorf("repo: stat %s: %w", j.path, err)
	}
	if st.Mode.Type() != 0 {
		e.Type = entryGone // replaced by something else since the listing
		return nil
	}
	e.Mode = st.Mode.Perm()
	var r io.Reader = j.f
	var prefix *[]byte
	if st.Size <= MinChunk {
		buf, err := bd.small.get(ctx)
		if err != nil {
			return err
		}
		m, err := readSmall(r, *buf, int(st.Size))
		switch {
		case err == io.EOF:
			// The whole file: one chunk whose id is the file's SHA-256.
			e.Size = int64(m)
			e.SHA256 = sha256.Sum256((*buf)[:m])
			bd.stats.filesRead.Add(1)
			bd.stats.bytesRead.Add(int64(m))
			if err := bd.readDone(j, st); err != nil {
				bd.small.put(buf)
				return err
			}
			if m == 0 {
				bd.small.put(buf)
				return nil
			}
			e.Chunks = []ID{e.SHA256}
			return bd.sendChunk(ctx, chunkMsg{data: (*buf)[:m], id: e.SHA256, known: true, ref: newBufRef(buf, bd.small, 1)})
		case err != nil:
			bd.small.put(buf)
			return fmt.Errorf("repo: read %s: %w", j.path, err)
		}
		// The file grew past MinChunk since the stat: chunk it.
		prefix = buf
		r = io.MultiReader(bytes.NewReader(*buf), r)
	}
	defer bd.small.put(prefix)
	if *cut == nil {
		*cut = newCutter(bd.tables, MinChunk, MaxChunk, AvgBits)
	}
	// The file's SHA-256 runs on a goroutine of its own, fed the chunks in
	// order: chunking (Rabin) and hashing a large file then use two cores,
	// while the sealers hash the chunks (their ids) in parallel.
	type hashMsg struct {
		data []byte
		ref  *bufRef
	}
	toHash := make(chan hashMsg, 4)
	hashed := make(chan struct{})
	go func() {
		defer close(hashed)
		sum.Reset()
		for m := range toHash {
			sum.Write(m.data)
			m.ref.release()
		}
		sum.Sum(e.SHA256[:0])
	}()
	slots, err := bd.chunkFile(ctx, j, r, *cut, func(data []byte, ref *bufRef, slot *ID) error {
		toHash <- hashMsg{data, ref}
		return bd.sendChunk(ctx, chunkMsg{data: data, slot: slot, ref: ref})
	})
	close(toHash)
	<-hashed
	if err != nil {
		return err
	}
	bd.chunkedMu.Lock()
	bd.chunked = append(bd.chunked, chunkedFile{e: e, slots: slots})
	bd.chunkedMu.Unlock()
	bd.stats.filesRead.Add(1)
	bd.stats.bytesRead.Add(e.Size)
	return bd.readDone(j, st)
}

// readDone is the end of a file's read (e holds its size and SHA-256; st
// is its stat from before). A single-read snapshot checks that the file
// held still: its stat must not have changed meanwhile, and a file
// changed within the timestamp granularity of its read is read again
// before the commit (checkRacy). Learn hears of it.
func (bd *build) readDone(j fileJob, st fsys.Info) error {
	e := j.e
	if bd.single {
		now, err := j.f.Stat()
		if err != nil {
			return fmt.Errorf("repo: stat %s: %w", j.path, err)
		}
		if now != st || e.Size != st.Size {
			return fmt.Errorf("%w: %s changed while it was read", ErrChanged, j.path)
		}
		if hash.Racy(st, j.start) && !st.Overlay {
			bd.racyMu.Lock()
			bd.racy = append(bd.racy, racyFile{path: j.path, st: st, sum: e.SHA256})
			bd.racyMu.Unlock()
		}
	}
	if bd.in.Learn != nil {
		bd.in.Learn(j.path, st, j.start, e.Size, e.SHA256)
	}
	return nil
}

// checkRacy reads the racy files of a single-read snapshot again: each
// must have kept its stat and contents (an overlay's substitutes are
// private copies and never racy here).
func (bd *build) checkRacy(ctx context.Context) error {
	if len(bd.racy) == 0 {
		return nil
	}
	buf, err := bd.big.get(ctx)
	if err != nil {
		return err
	}
	defer bd.big.put(buf)
	sum := sha256.New()
	for _, r := range bd.racy {
		if err := ctx.Err(); err != nil {
			return err
		}
		f, err := bd.fsroot.Open(r.path)
		if err != nil {
			if fsys.IsGone(err) {
				return fmt.Errorf("%w: %s vanished after it was read", ErrChanged, r.path)
			}
			return fmt.Errorf("repo: open %s: %w", r.path, err)
		}
		st, err := f.Stat()
		if err == nil && st == r.st {
			sum.Reset()
			_, err = io.CopyBuffer(sum, io.LimitReader(f, r.st.Size+1), *buf)
		}
		f.Close()
		switch {
		case err != nil:
			return fmt.Errorf("repo: read %s again: %w", r.path, err)
		case st != r.st || !bytes.Equal(sum.Sum(nil), r.sum[:]):
			return fmt.Errorf("%w: %s changed after it was read", ErrChanged, r.path)
		}
	}
	bd.racy = nil
	return nil
}

// readSmall reads a file fstat found to have size bytes into buf (of
// MinChunk+1 bytes). It returns io.EOF with the whole file, which it takes
// to end once size bytes were read (not spending a read(2) to hear it), or
// nil when the file filled buf: it grew past MinChunk.
func readSmall(r io.Reader, buf []byte, size int) (int, error) {
	m := 0
	for m < len(buf) {
		k, err := r.Read(buf[m:])
		m += k
		switch {
		case err != nil:
			return m, err
		case m == size:
			return m, io.EOF
		case k == 0:
			return m, io.ErrNoProgress
		}
	}
	return m, nil
}

// chunkFile cuts r into chunks, hands each to emit in order (which passes
// it on to the file's hash and the sealers), and returns where the
// sealers put the chunks' ids.
func (bd *build) chunkFile(ctx context.Context, j fileJob, r io.Reader, cut *cutter, emit func([]byte, *bufRef, *ID) error) ([]*ID, error) {
	cut.reset(r)
	var slots []*ID
	for {
		buf, err := bd.big.get(ctx)
		if err != nil {
			return nil, err
		}
		data, err := cut.next((*buf)[:0])
		if err == io.EOF {
			bd.big.put(buf)
			return slots, nil
		}
		if err != nil {
			bd.big.put(buf)
			return nil, fmt.Errorf("repo: read %s: %w", j.path, err)
		}
		j.e.Size += int64(len(data))
		slot := new(ID)
		slots = append(slots, slot)
		// Two shares: the file's hash, and the sealer.
		if err := emit(data, newBufRef(buf, bd.big, 2), slot); err != nil {
			return nil, err
		}
	}
}

func (bd *build) sendChunk(ctx context.Context, m chunkMsg) error {
	select {
	case bd.chunks <- m:
		return nil
	case <-ctx.Done():
		m.ref.release()
		return ctx.Err()
	}
}

// seal is a sealer stage: chunk id, dedup, AES-256-GCM.
func (bd *build) seal(ctx context.Context) error {
	for m := range bd.chunks {
		if !m.known {
			m.id = sha256.Sum256(m.data)
		}
		if m.slot != nil {
			*m.slot = m.id
		}
		h := Handle{TypeChunk, m.id}
		if !bd.claim(h) {
			bd.stats.chunksReused.Add(1)
			m.ref.release()
			continue
		}
		err := bd.sealObject(ctx, h, m.data)
		m.ref.release()
		if err != nil {
			return err
		}
		bd.stats.chunksNew.Add(1)
	}
	return nil
}

func (bd *build) sealObject(ctx context.Context, h Handle, plain []byte) error {
	var pool *bufPool
	switch n := len(plain) + Overhead; {
	case n <= bd.sealedSm.size:
		pool = bd.sealedSm
	case n <= bd.sealed.size:
		pool = bd.sealed
	}
	var buf *[]byte
	var out []byte
	if pool != nil {
		var err error
		if buf, err = pool.get(ctx); err != nil {
			return err
		}
		out = (*buf)[:0]
	} else {
		out = make([]byte, 0, len(plain)+Overhead) // a large tree
	}
	out, err := bd.keys.sealTo(out, h.Type, plain)
	if err != nil {
		pool.put(buf)
		return err
	}
	select {
	case bd.objects <- sealedObj{h: h, data: out, plen: len(plain), buf: buf, pool: pool}:
		return nil
	case <-ctx.Done():
		pool.put(buf)
		return ctx.Err()
	}
}

// spool is the pack stage: it appends sealed objects to the current pack
// and hands full packs to the uploaders. The last pack stays open: it
// becomes the head.
func (bd *build) spool(ctx context.Context) (err error) {
	defer close(bd.full)
	pw, err := newPackWriter(bd.keys, bd.spools, bd.b.MaxPackSize)
	if err != nil {
		for o := range bd.objects {
			o.pool.put(o.buf)
		}
		return err
	}
	defer func() {
		if err != nil {
			pw.Abort()
		} else {
			bd.last = pw
		}
	}()
	for o := range bd.objects {
		if err == nil {
			err = bd.add(ctx, &pw, o)
		}
		o.pool.put(o.buf)
	}
	return err
}

func (bd *build) add(ctx context.Context, pw **PackWriter, o sealedObj) error {
	err := (*pw).Add(o.h.Type, o.h.ID, o.data)
	if errors.Is(err, ErrPackFull) {
		select {
		case bd.full <- *pw:
		case <-ctx.Done():
			return ctx.Err()
		}
		if *pw, err = newPackWriter(bd.keys, bd.spools, bd.b.MaxPackSize); err != nil {
			return err
		}
		err = (*pw).Add(o.h.Type, o.h.ID, o.data)
	}
	if err != nil {
		return err
	}
	bd.stats.bytesNew.Add(int64(o.plen))
	bd.stats.bytesStored.Add(int64(len(o.data)))
	return nil
}

// finish completes full packs (index, SHA-256), one at a
// time, for the uploaders.
func (bd *build) finish(ctx context.Context) error {
	defer close(bd.ready)
	var firstErr error
	for pw := range bd.full {
		if firstErr == nil {
			firstErr = ctx.Err()
		}
		if firstErr != nil {
			pw.Abort()
			continue
		}
		p, err := pw.Finish(nil)
		if err != nil {
			firstErr = err
			continue
		}
		select {
		case bd.ready <- p:
		case <-ctx.Done():
			p.Discard()
			firstErr = ctx.Err()
		}
	}
	return firstErr
}

// upload is an uploader stage: it stores packs through the sink.
func (bd *build) upload(ctx context.Context) error {
	var firstErr error
	for p := range bd.ready {
		if firstErr == nil {
			firstErr = ctx.Err()
		}
		if firstErr != nil {
			p.Discard()
			continue
		}
		ref, err := bd.store(ctx, p)
		if err != nil {
			firstErr = err
			continue
		}
		bd.upMu.Lock()
		bd.uploaded = append(bd.uploaded, uploadedPack{ref: ref, entries: p.Objects})
		bd.upMu.Unlock()
	}
	return firstErr
}

func (bd *build) store(ctx context.Context, p *Pack) (PackRef, error) {
	defer p.Discard()
	st, err := bd.b.Sink.StorePack(ctx, p)
	if err != nil {
		return PackRef{}, fmt.Errorf("store pack: %w", err)
	}
	if !ValidBlobID(st.BlobID) {
		return PackRef{}, fmt.Errorf("store pack: sink returned blob id %q", clip(st.BlobID))
	}
	if st.EndEpoch > maxJSONInt {
		return PackRef{}, fmt.Errorf("store pack: sink returned end epoch %d", st.EndEpoch)
	}
	bd.stats.packs.Add(1)
	bd.stats.bytesUploaded.Add(p.Size)
	return PackRef{BlobID: st.BlobID, Size: p.Size, EndEpoch: st.EndEpoch, IndexLength: p.IndexLength}, nil
}

// finishTrees encodes every directory bottom-up, seals the trees no live
// pack holds, computes the bundle hash and how much of each indexed pack
// the commit references.
func (bd *build) finishTrees(ctx context.Context) (hash.Digest, error) {
	bd.usage, bd.seen = map[*indexPack]int64{}, map[Handle]struct{}{}
	ref := bd.ref
	// The chunk ids of files read in several chunks: every sealer is done.
	for _, c := range bd.chunked {
		ids := make([]ID, len(c.slots))
		for i, s := range c.slots {
			ids[i] = *s
		}
		c.e.Chunks = ids
	}
	bd.chunked = nil
	var enc []byte
	var walk func(d *dirNode, path string) error
	walk = func(d *dirNode, path string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		t := d.tree
		kept, subs := t.Entries[:0], d.subs
		for _, e := range t.Entries {
			switch e.Type {
			case EntryDir:
				sub := subs[0]
				subs = subs[1:]
				p := e.Name
				if path != "" {
					p = path + "/" + e.Name
				}
				if err := walk(sub, p); err != nil {
					return err
				}
				if !d.same {
					e.SHA256 = sub.id
				}
				bd.dirs++
			case EntryFile:
				for _, id := range e.Chunks {
					ref(Handle{TypeChunk, id})
				}
				bd.files++
				bd.bytes += e.Size
			default:
				continue // vanished (never in a previous commit's tree)
			}
			if !d.same {
				kept = append(kept, e)
			}
		}
		d.subs = nil
		encode := func() error {
			var err error
			if enc, err = t.appendEncoding(enc[:0]); err != nil {
				return fmt.Errorf("tree of %s: %w", displayPath(path), err)
			}
			if len(enc) > bd.maxTree {
				return fmt.Errorf("%w: the tree of %s is %d bytes, more than a pack of %d bytes can hold (too many entries)",
					ErrTooLarge, displayPath(path), len(enc), bd.b.MaxPackSize)
			}
			return nil
		}
		if !d.same {
			t.Entries = kept
			if err := encode(); err != nil {
				return err
			}
			d.id = sha256.Sum256(enc)
		}
		bd.trees[d.id] = t
		h := Handle{TypeTree, d.id}
		if bd.claim(h) {
			// A kept tree is encoded only when it must be written again
			// (its pack is being repacked).
			if d.same {
				if err := encode(); err != nil {
					return err
				}
			}
			if err := bd.sealObject(ctx, h, enc); err != nil {
				return err
			}
			bd.stats.treesNew.Add(1)
		} else {
			bd.stats.treesReused.Add(1)
		}
		ref(h) // after the claim: a tree being repacked is new now
		return nil
	}
	if err := walk(bd.root, ""); err != nil {
		return hash.Digest{}, err
	}
	sum, err := Summarize(ctx, bd.trees, bd.root.id)
	if err != nil {
		return hash.Digest{}, err
	}
	return sum.BundleHash, nil
}

// ref counts h toward the usage of the indexed pack holding it, unless it
// was claimed for a new pack or counted already.
func (bd *build) ref(h Handle) {
	bd.mu.Lock()
	_, isNew := bd.pending[h]
	bd.mu.Unlock()
	if isNew {
		return // in a new pack: nothing to count
	}
	if _, ok := bd.seen[h]; ok {
		return
	}
	bd.seen[h] = struct{}{}
	if l, ok := bd.locate(h); ok {
		bd.usage[l.pack] += l.n
	}
}

// sealTrees ends the trees' part of the snapshot: their bundle hash is checked
// (against Want, or by reading racy files again), the caller records it
// (Seal), and the top-level lock and receipts are read and sealed.
func (bd *build) sealTrees(ctx context.Context, bundle hash.Digest) error {
	if want := bd.in.Want; want != (hash.Digest{}) && bundle != want {
		return fmt.Errorf("%w: the snapshot's files hash to %s, expected %s", ErrChanged, bundle, want)
	}
	if err := bd.checkRacy(ctx); err != nil {
		return err
	}
	bd.lockVer = bd.in.LockVersion
	if bd.in.Seal != nil {
		v, err := bd.in.Seal(ctx, bundle)
		if err != nil {
			return err
		}
		if v < 0 {
			return errors.New("repo: negative lock version")
		}
		bd.lockVer = v
	}
	var err error
	if bd.lock, err = bd.sideFile(ctx, LockFile); err != nil {
		return err
	}
	if bd.receipts, err = bd.sideFile(ctx, ReceiptsFile); err != nil {
		return err
	}
	// Nothing claims objects any more: the set of a large brain's new
	// objects need not live on while the index is updated.
	bd.mu.Lock()
	bd.pending = nil
	bd.mu.Unlock()
	return nil
}

// sideFile reads the top-level file name (the lock or the receipts) and
// seals its chunks; nil when there is none (a symlink, a fifo... count as
// none, as in the tree).
func (bd *build) sideFile(ctx context.Context, name string) (*Entry, error) {
	lst, err := bd.fsroot.Lstat(name)
	switch {
	case err != nil && fsys.IsGone(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("repo: stat %s: %w", name, err)
	case lst.Mode.IsDir():
		return nil, fmt.Errorf("%w: top-level %s is a directory", ErrName, name)
	case !lst.Mode.IsRegular():
		return nil, nil
	}
	f, err := bd.fsroot.Open(name)
	if err != nil {
		if fsys.IsGone(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("repo: open %s: %w", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("repo: stat %s: %w", name, err)
	}
	if !st.Mode.IsRegular() {
		return nil, nil
	}
	e := &Entry{Name: name, Type: EntryFile, Mode: st.Mode.Perm()}
	sum := sha256.New()
	add := func(data []byte) error {
		id := ID(sha256.Sum256(data))
		sum.Write(data)
		e.Size += int64(len(data))
		e.Chunks = append(e.Chunks, id)
		h := Handle{TypeChunk, id}
		if bd.claim(h) {
			if err := bd.sealObject(ctx, h, data); err != nil {
				return err
			}
			bd.stats.chunksNew.Add(1)
		} else {
			bd.stats.chunksReused.Add(1)
		}
		bd.ref(h)
		return nil
	}
	done := func() (*Entry, error) {
		sum.Sum(e.SHA256[:0])
		bd.stats.filesRead.Add(1)
		bd.stats.bytesRead.Add(e.Size)
		return e, nil
	}
	var r io.Reader = f
	if st.Size <= MinChunk { // the usual case: one chunk, no cutter
		sb, err := bd.small.get(ctx)
		if err != nil {
			return nil, err
		}
		defer bd.small.put(sb)
		m, err := readSmall(f, *sb, int(st.Size))
		switch {
		case err == io.EOF:
			if m > 0 {
				if err := add((*sb)[:m]); err != nil {
					return nil, err
				}
			}
			return done()
		case err != nil:
			return nil, fmt.Errorf("repo: read %s: %w", name, err)
		}
		r = io.MultiReader(bytes.NewReader((*sb)[:m]), f) // it grew: chunk it
	}
	cut := newCutter(bd.tables, MinChunk, MaxChunk, AvgBits)
	cut.reset(r)
	buf, err := bd.big.get(ctx)
	if err != nil {
		return nil, err
	}
	defer bd.big.put(buf)
	for {
		data, err := cut.next((*buf)[:0])
		if err == io.EOF {
			return done()
		}
		if err != nil {
			return nil, fmt.Errorf("repo: read %s: %w", name, err)
		}
		if err := add(data); err != nil {
			return nil, err
		}
	}
}

// commit writes the head pack: the commit lists every live pack (the
// indexed ones still referenced, and every pack this snapshot uploaded),
// then the index is replaced by the new head's packs.
func (bd *build) commit(ctx context.Context, bundle hash.Digest, usage map[*indexPack]int64) (*Result, error) {
	last := bd.last
	defer func() { last.Abort() }()

	t := bd.in.Time
	if t.IsZero() {
		t = time.Now()
	}
	c := &Commit{
		Format: Format, Identity: bd.keys.identity, KeyID: bd.keys.KeyID(),
		Root: bd.root.id, Parent: bd.in.Parent, ParentFormat: bd.in.ParentFormat,
		Time: max(t.UnixMilli(), 0), BundleHash: bundle, LockVersion: bd.lockVer,
		Added: bd.stats.bytesStored.Load(),
	}
	st := Stats{Files: bd.files, Dirs: bd.dirs, Bytes: bd.bytes}
	c.Files, c.Bytes = int64(st.Files), st.Bytes
	c.Lock, c.Receipts = fileRef(bd.lock), fileRef(bd.receipts)

	live := map[string]*indexPack{}
	for p := range usage {
		live[p.ref.BlobID] = p
	}
	packList := func() []PackRef {
		refs := make([]PackRef, 0, len(live)+len(bd.uploaded))
		for _, p := range live {
			refs = append(refs, p.ref)
		}
		for _, u := range bd.uploaded {
			refs = append(refs, u.ref)
		}
		slices.SortFunc(refs, func(a, b PackRef) int { return strings.Compare(a.BlobID, b.BlobID) })
		return refs
	}
	c.Packs = packList()
	enc, err := c.Encode()
	if err != nil {
		return nil, err
	}
	if !last.Fits(0, int64(len(enc))) {
		// The commit does not fit beside the last objects: they go in a
		// pack of their own, and the head carries the commit alone.
		p, err := last.Finish(nil)
		if err != nil {
			return nil, err
		}
		ref, err := bd.store(ctx, p)
		if err != nil {
			return nil, err
		}
		bd.uploaded = append(bd.uploaded, uploadedPack{ref: ref, entries: p.Objects})
		if last, err = newPackWriter(bd.keys, bd.spools, bd.b.MaxPackSize); err != nil {
			return nil, err
		}
		c.Packs = packList()
		if enc, err = c.Encode(); err != nil {
			return nil, err
		}
		if !last.Fits(0, int64(len(enc))) {
			return nil, fmt.Errorf("%w: commit of %d bytes does not fit in a pack of %d bytes", ErrTooLarge, len(enc), bd.b.MaxPackSize)
		}
	}
	hp, err := last.Finish(enc)
	if err != nil {
		return nil, err
	}
	head, err := bd.store(ctx, hp)
	if err != nil {
		return nil, err
	}

	// The new index: the packs the commit lists, plus the head.
	packs := make([]*indexPack, 0, len(live)+len(bd.uploaded)+1)
	for _, u := range bd.uploaded {
		packs = append(packs, &indexPack{ref: u.ref, entries: u.entries})
	}
	packs = append(packs, &indexPack{ref: head, head: true, entries: hp.Objects})
	for _, p := range live {
		packs = append(packs, p)
	}
	bd.in.Index.replace(head.BlobID, packs)

	newUse := map[string]int64{}
	for _, u := range bd.uploaded {
		newUse[u.ref.BlobID] = u.ref.Size - HeaderSize - u.ref.IndexLength
	}
	newUse[head.BlobID] = head.Size - HeaderSize - head.IndexLength
	for p, n := range usage {
		st.Live = append(st.Live, PackUse{BlobID: p.ref.BlobID, Size: p.ref.Size, Live: n, EndEpoch: p.ref.EndEpoch})
	}
	for _, u := range bd.uploaded {
		st.Live = append(st.Live, PackUse{BlobID: u.ref.BlobID, Size: u.ref.Size, Live: newUse[u.ref.BlobID], EndEpoch: u.ref.EndEpoch})
	}
	st.Live = append(st.Live, PackUse{BlobID: head.BlobID, Size: head.Size, Live: newUse[head.BlobID], EndEpoch: head.EndEpoch})
	slices.SortFunc(st.Live, func(a, b PackUse) int { return strings.Compare(a.BlobID, b.BlobID) })

	s := &bd.stats
	st.FilesRead, st.BytesRead, st.FilesReused = int(s.filesRead.Load()), s.bytesRead.Load(), int(s.filesReused.Load())
	st.ChunksNew, st.ChunksReused = int(s.chunksNew.Load()), int(s.chunksReused.Load())
	st.TreesNew, st.TreesReused = int(s.treesNew.Load()), int(s.treesReused.Load())
	st.BytesNew, st.BytesStored = s.bytesNew.Load(), s.bytesStored.Load()
	st.Packs, st.BytesUploaded = int(s.packs.Load()), s.bytesUploaded.Load()
	return &Result{Commit: c, CommitID: sha256.Sum256(enc), Head: head, HeadSHA256: hp.SHA256, Trees: bd.trees, Stats: st}, nil
}

func fileRef(e *Entry) *FileRef {
	if e == nil || e.Type == entryGone {
		return nil
	}
	return &FileRef{Mode: e.Mode, Size: e.Size, SHA256: e.SHA256, Chunks: e.Chunks}
}

func displayPath(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}
