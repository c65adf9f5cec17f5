package repo

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/hermesd/hermesd/internal/headref"
)

// RangeReader reads closed byte ranges of blobs: the Walrus aggregator's
// `Range: bytes=a-b` (a 206 answer with `Content-Range: a-b/total`).
//
// ReadRange writes bytes [off, off+length) of the blob to w, never more,
// and returns the blob's total size. It may fail after a partial write;
// the reader then asks again for the rest. A missing or expired blob is an
// error that the reader passes on, wrapped.
type RangeReader interface {
	ReadRange(ctx context.Context, blobID string, off, length int64, w io.Writer) (total int64, err error)
}

// ReadOptions tunes a Reader's downloads.
type ReadOptions struct {
	// Concurrency bounds simultaneous range reads; 0 means 4.
	Concurrency int
	// Gap is how many unneeded bytes between two needed objects of one
	// pack are downloaded rather than paying for a second request; 0
	// means 64 KiB, negative means none.
	Gap int64
	// MaxRange bounds one coalesced range read; 0 means 2 MiB. An object
	// larger than that gets a range of its own.
	MaxRange int64
	// Attempts bounds the reads of one range, resuming after the bytes
	// received; 0 means 3.
	Attempts int
}

func (o ReadOptions) withDefaults() ReadOptions {
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	switch {
	case o.Gap == 0:
		o.Gap = 64 << 10
	case o.Gap < 0:
		o.Gap = 0
	}
	if o.MaxRange <= 0 {
		o.MaxRange = 2 << 20
	}
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	return o
}

// Reader reads one v3 snapshot: its head commit, the indexes of its live
// packs, its trees and its objects. It verifies everything it reads. A
// Reader is safe for concurrent use.
type Reader struct {
	src    RangeReader
	keys   *Keys
	opts   ReadOptions
	headID string
	commit *Commit
	cid    ID
	packs  []*packState // the commit's packs in list order, then the head
	head   *packState
	// headPrefix is the head pack's header and index as first read.
	headPrefix []byte
	// byID lists every object once (from the first pack holding it),
	// sorted by id, then type: a lookup is a binary search that mostly
	// compares keys, at 16 bytes an object where a map took about 140.
	byID []idKey

	treeMu sync.Mutex
	trees  map[ID]*Tree

	downloaded atomic.Int64
	ranges     atomic.Int64

	// spare holds span buffers between fetches, at most Concurrency: a
	// restore runs several fetches (trees level by level, then files),
	// which would otherwise each grow their own.
	spareMu    sync.Mutex
	spareSpans [][]byte
}

// takeBuf returns a span buffer, kept or new.
func (r *Reader) takeBuf() []byte {
	r.spareMu.Lock()
	defer r.spareMu.Unlock()
	var b []byte
	if n := len(r.spareSpans); n > 0 {
		b, r.spareSpans = r.spareSpans[n-1], r.spareSpans[:n-1]
	}
	return b
}

// keepBuf keeps a span buffer for later fetches, up to Concurrency and
// only of the usual size (MaxRange).
func (r *Reader) keepBuf(b []byte) {
	r.spareMu.Lock()
	defer r.spareMu.Unlock()
	if b != nil && int64(cap(b)) <= r.opts.MaxRange && len(r.spareSpans) < r.opts.Concurrency {
		r.spareSpans = append(r.spareSpans, b)
	}
}

// dropBufs lets the spare buffers go, for a caller about to hold a lot
// of memory between two fetches.
func (r *Reader) dropBufs() {
	r.spareMu.Lock()
	r.spareSpans = nil
	r.spareMu.Unlock()
}

type packState struct {
	ref     PackRef
	hdr     Header
	entries []IndexEntry
	head    bool
}

// entryRef names one index entry: r.packs[pack].entries[i]. Entries of
// a pack tile its data in order, so sorting by pack and i sorts by place.
type entryRef struct{ pack, i uint32 }

// idKey is an entry of the lookup table, with its id's first 8 bytes.
type idKey struct {
	key uint64
	entryRef
}

func compareRefs(a, b entryRef) int {
	if c := cmp.Compare(a.pack, b.pack); c != 0 {
		return c
	}
	return cmp.Compare(a.i, b.i)
}

// Head is what the head pack alone tells: its commit and size.
type Head struct {
	BlobID      string
	Commit      *Commit
	CommitID    ID // SHA-256 of the commit's encoding
	Size        int64
	IndexLength int64
	Objects     []IndexEntry // the objects the head pack holds
}

// ReadCommit reads only the head pack's header and index (two range
// reads) and returns its verified commit: enough to walk a lineage
// (hermesd log: follow Commit.Parent while ParentFormat is "v3").
func ReadCommit(ctx context.Context, src RangeReader, keys *Keys, blobID string) (*Head, error) {
	return ReadCommitRef(ctx, src, keys, headref.Bare(blobID))
}

// ReadCommitRef is ReadCommit of a head reference: a reference bound to a
// commit id reads only the head whose commit has that id (see OpenRef).
func ReadCommitRef(ctx context.Context, src RangeReader, keys *Keys, ref headref.Ref) (*Head, error) {
	r := &Reader{src: src, keys: keys, opts: ReadOptions{}.withDefaults()}
	p, c, cid, err := r.readHead(ctx, ref)
	if err != nil {
		return nil, err
	}
	return &Head{BlobID: ref.ID, Commit: c, CommitID: cid, Size: p.ref.Size, IndexLength: p.ref.IndexLength, Objects: p.entries}, nil
}

// Open reads the head pack blobID (header, index, commit) and the indexes
// of every pack the commit lists (one range read each, concurrently), and
// verifies them: the commit must be this agent's, every pack must have the
// size and index length the commit records.
func Open(ctx context.Context, src RangeReader, keys *Keys, blobID string, opts ReadOptions) (*Reader, error) {
	return OpenRef(ctx, src, keys, headref.Bare(blobID), opts)
}

// OpenRef is Open of a head reference (docs/format-v3.md §14). A
// reference bound to a commit id opens only the head whose commit has
// that id: another head, however genuine (an older snapshot of the same
// agent an aggregator serves in its place), fails with an error matching
// headref.ErrMismatch as soon as its index is decrypted, before its
// commit is parsed or any other pack is read.
func OpenRef(ctx context.Context, src RangeReader, keys *Keys, ref headref.Ref, opts ReadOptions) (*Reader, error) {
	blobID := ref.ID
	r := &Reader{src: src, keys: keys, opts: opts.withDefaults(), headID: blobID, trees: map[ID]*Tree{}}
	head, c, cid, err := r.readHead(ctx, ref)
	if err != nil {
		return nil, err
	}
	r.commit, r.cid, r.head = c, cid, head
	if c.Pack(blobID) != nil {
		return nil, corruptf("commit lists its own head pack %s", blobID)
	}
	r.packs = make([]*packState, len(c.Packs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.opts.Concurrency)
	for i := range c.Packs {
		g.Go(func() error {
			p, err := r.readPack(gctx, c.Packs[i])
			r.packs[i] = p
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	r.packs = append(r.packs, head)
	// entryRef's uint32s hold every place: a commit of at most
	// MaxCommitLen bytes lists fewer packs, an index counts its entries
	// in a u32.
	n := 0
	for _, p := range r.packs {
		n += len(p.entries)
	}
	r.byID = make([]idKey, 0, n)
	for pi, p := range r.packs {
		for i := range p.entries {
			r.byID = append(r.byID, idKey{binary.BigEndian.Uint64(p.entries[i].ID[:8]), entryRef{uint32(pi), uint32(i)}})
		}
	}
	slices.SortFunc(r.byID, func(a, b idKey) int {
		if c := r.compareIDs(a, b); c != 0 {
			return c
		}
		return compareRefs(a.entryRef, b.entryRef)
	})
	// An object in several packs: the first pack listing it is read.
	r.byID = slices.CompactFunc(r.byID, func(a, b idKey) bool { return r.compareIDs(a, b) == 0 })
	return r, nil
}

// compareIDs orders lookup entries by id, then type.
func (r *Reader) compareIDs(a, b idKey) int {
	if c := cmp.Compare(a.key, b.key); c != 0 {
		return c
	}
	ea, eb := r.entry(a.entryRef), r.entry(b.entryRef)
	if c := bytes.Compare(ea.ID[:], eb.ID[:]); c != 0 {
		return c
	}
	return cmp.Compare(ea.Type, eb.Type)
}

// readHead reads and verifies a head pack's header, index and commit;
// the commit's id must be the reference's digest when it has one.
func (r *Reader) readHead(ctx context.Context, ref headref.Ref) (*packState, *Commit, ID, error) {
	blobID := ref.ID
	if !ValidBlobID(blobID) {
		return nil, nil, ID{}, fmt.Errorf("repo: %q is not a blob id", clip(blobID))
	}
	hb, total, err := r.readRange(ctx, blobID, 0, HeaderSize, nil)
	if err != nil {
		return nil, nil, ID{}, fmt.Errorf("read pack %s: %w", blobID, err)
	}
	h, err := DecodeHeader(hb)
	if err != nil {
		return nil, nil, ID{}, fmt.Errorf("pack %s: %w", blobID, err)
	}
	if err := checkSize(blobID, h, total); err != nil {
		return nil, nil, ID{}, err
	}
	if !h.Head {
		return nil, nil, ID{}, corruptf("pack %s is not a head pack (it carries no commit)", blobID)
	}
	ib, _, err := r.readRange(ctx, blobID, HeaderSize, h.IndexLength, nil)
	if err != nil {
		return nil, nil, ID{}, fmt.Errorf("read pack %s: %w", blobID, err)
	}
	ix, err := r.keys.openIndex(hb, h, ib)
	if err != nil {
		return nil, nil, ID{}, fmt.Errorf("pack %s: %w", blobID, err)
	}
	cid := ID(sha256.Sum256(ix.Commit))
	if ref.Bound && cid != ID(ref.Digest) {
		return nil, nil, ID{}, fmt.Errorf("%w: %s holds the head of commit %s, the reference names commit %s",
			headref.ErrMismatch, blobID, headref.Digest(cid), ref.Digest)
	}
	c, err := DecodeCommit(ix.Commit)
	if err != nil {
		return nil, nil, ID{}, fmt.Errorf("pack %s: %w", blobID, err)
	}
	if c.Identity != r.keys.identity || c.KeyID != r.keys.KeyID() {
		return nil, nil, ID{}, &wrongAgentError{msg: fmt.Sprintf("%s: pack %s holds a commit of %q (key id %s)", ErrWrongAgent.Error(), blobID, clip(c.Identity), c.KeyID)}
	}
	p := &packState{ref: PackRef{BlobID: blobID, Size: total, IndexLength: h.IndexLength}, hdr: h, entries: ix.Entries, head: true}
	r.headPrefix = append(append([]byte{}, hb...), ib...)
	return p, c, cid, nil
}

// readPack reads a listed pack's header and index in one range read.
func (r *Reader) readPack(ctx context.Context, ref PackRef) (*packState, error) {
	b, total, err := r.readRange(ctx, ref.BlobID, 0, HeaderSize+ref.IndexLength, nil)
	if err != nil {
		return nil, fmt.Errorf("read pack %s: %w", ref.BlobID, err)
	}
	h, err := DecodeHeader(b)
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", ref.BlobID, err)
	}
	if err := checkSize(ref.BlobID, h, total); err != nil {
		return nil, err
	}
	if h.IndexLength != ref.IndexLength || total != ref.Size {
		return nil, corruptf("pack %s: %d bytes with an index of %d, the commit says %d and %d", ref.BlobID, total, h.IndexLength, ref.Size, ref.IndexLength)
	}
	ix, err := r.keys.openIndex(b[:HeaderSize], h, b[HeaderSize:])
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", ref.BlobID, err)
	}
	return &packState{ref: ref, hdr: h, entries: ix.Entries, head: h.Head}, nil
}

func checkSize(blobID string, h Header, total int64) error {
	switch {
	case total < h.Size():
		return corruptf("pack %s is truncated: %d bytes, its header says %d", blobID, total, h.Size())
	case total > h.Size():
		return corruptf("pack %s has %d bytes of trailing data", blobID, total-h.Size())
	}
	return nil
}

// fixedWriter collects exactly want bytes into b.
type fixedWriter struct {
	b    []byte
	want int
}

var errOverflow = errors.New("blob store returned more bytes than requested")

func (w *fixedWriter) Write(p []byte) (int, error) {
	room := w.want - len(w.b)
	if len(p) > room {
		w.b = append(w.b, p[:room]...)
		return room, errOverflow
	}
	w.b = append(w.b, p...)
	return len(p), nil
}

// readRange reads [off, off+n) of a blob into buf (reused if large
// enough), resuming after partial reads. It returns the bytes and the
// blob's total size.
func (r *Reader) readRange(ctx context.Context, blobID string, off, n int64, buf []byte) ([]byte, int64, error) {
	if int64(cap(buf)) < n {
		buf = make([]byte, 0, n)
	}
	w := &fixedWriter{b: buf[:0], want: int(n)}
	var total int64
	var err error
	for attempt := 0; attempt < r.opts.Attempts; attempt++ {
		got := int64(len(w.b))
		r.ranges.Add(1)
		total, err = r.src.ReadRange(ctx, blobID, off+got, n-got, w)
		r.downloaded.Add(int64(len(w.b)) - got)
		if errors.Is(err, errOverflow) {
			return nil, 0, fmt.Errorf("range %d+%d: %w", off, n, err)
		}
		if err == nil && int64(len(w.b)) == n {
			return w.b, total, nil
		}
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		if err == nil {
			if total > 0 && total < off+n {
				return nil, 0, corruptf("blob %s has %d bytes, the range %d+%d runs past it", blobID, total, off, n)
			}
			err = fmt.Errorf("range %d+%d: got %d bytes", off, n, len(w.b))
		}
	}
	return nil, 0, err
}

// Commit returns the head commit.
func (r *Reader) Commit() *Commit { return r.commit }

// CommitID returns the SHA-256 of the head commit's encoding.
func (r *Reader) CommitID() ID { return r.cid }

// Ref returns the reference naming the head read, with its commit id
// (docs/format-v3.md §14).
func (r *Reader) Ref() headref.Ref { return headref.Bind(r.headID, headref.Digest(r.cid)) }

// HeadBlobID returns the head pack's blob id.
func (r *Reader) HeadBlobID() string { return r.headID }

// Downloaded returns the bytes and range requests read so far.
func (r *Reader) Downloaded() (bytes, ranges int64) { return r.downloaded.Load(), r.ranges.Load() }

// Index rebuilds a dedup index of this head (the packs it lists and the
// head pack itself), for a lost or stale local index. headEndEpoch is the
// head pack's end epoch, which only the upload's answer (or the chain)
// knows. The head pack is downloaded once to compute its SHA-256, which the
// next commit records.
func (r *Reader) Index(ctx context.Context, headEndEpoch uint64) (*Index, error) {
	b, _, err := r.readRange(ctx, r.headID, 0, r.head.ref.Size, nil)
	if err != nil {
		return nil, fmt.Errorf("read pack %s: %w", r.headID, err)
	}
	if !bytes.Equal(b[:HeaderSize+r.head.ref.IndexLength], r.headPrefix) {
		return nil, corruptf("pack %s changed while it was read", r.headID)
	}
	packs := make([]*indexPack, 0, len(r.packs))
	for _, p := range r.packs {
		ref := p.ref
		if p == r.head {
			ref.EndEpoch = headEndEpoch
		}
		packs = append(packs, &indexPack{ref: ref, head: p.head, entries: p.entries})
	}
	ix := NewIndex()
	ix.replace(r.headID, packs)
	return ix, nil
}

// locate finds the index entry of h.
func (r *Reader) locate(h Handle) (entryRef, error) {
	key := binary.BigEndian.Uint64(h.ID[:8])
	i, ok := slices.BinarySearchFunc(r.byID, h, func(k idKey, h Handle) int {
		if c := cmp.Compare(k.key, key); c != 0 {
			return c
		}
		e := r.entry(k.entryRef)
		if c := bytes.Compare(e.ID[:], h.ID[:]); c != 0 {
			return c
		}
		return cmp.Compare(e.Type, h.Type)
	})
	if !ok {
		return entryRef{}, corruptf("%s is not in any live pack of the commit", h)
	}
	return r.byID[i].entryRef, nil
}

func (r *Reader) entry(e entryRef) *IndexEntry { return &r.packs[e.pack].entries[e.i] }

// Tree loads, verifies and caches one tree of the snapshot.
func (r *Reader) Tree(ctx context.Context, id ID) (*Tree, error) {
	r.treeMu.Lock()
	t := r.trees[id]
	r.treeMu.Unlock()
	if t != nil {
		return t, nil
	}
	ts, err := r.loadTrees(ctx, []ID{id})
	if err != nil {
		return nil, err
	}
	return ts[0], nil
}

// Prefetch loads every tree reachable from root, level by level: each
// level's trees are fetched together (coalesced, concurrent), so a commit's
// trees cost about one round of requests per directory level.
func (r *Reader) Prefetch(ctx context.Context, root ID) error {
	level := []ID{root}
	seen := map[ID]bool{root: true}
	for depth := 0; len(level) > 0; depth++ {
		if depth > MaxDepth {
			return corruptf("trees nested deeper than %d", MaxDepth)
		}
		trees, err := r.loadTrees(ctx, level)
		if err != nil {
			return err
		}
		var next []ID
		for _, t := range trees {
			for _, e := range t.Entries {
				if e.Type == EntryDir && !seen[e.Subtree()] {
					seen[e.Subtree()] = true
					next = append(next, e.Subtree())
				}
			}
		}
		level = next
	}
	return nil
}

// loadTrees returns the trees of ids, fetching those not cached. It does
// not rely on the cache keeping them: Restore empties it.
func (r *Reader) loadTrees(ctx context.Context, ids []ID) ([]*Tree, error) {
	trees := make([]*Tree, len(ids))
	type miss struct {
		entryRef
		k int // its place in ids
	}
	var missing []miss
	r.treeMu.Lock()
	for k, id := range ids {
		trees[k] = r.trees[id]
	}
	r.treeMu.Unlock()
	for k, id := range ids {
		if trees[k] == nil {
			e, err := r.locate(Handle{TypeTree, id})
			if err != nil {
				return nil, err
			}
			missing = append(missing, miss{e, k})
		}
	}
	slices.SortFunc(missing, func(a, b miss) int { return compareRefs(a.entryRef, b.entryRef) })
	at := func(j int) entryRef { return missing[j].entryRef }
	err := r.fetch(ctx, r.plan(len(missing), at, true), fetchOpts{}, at, func(j int, plain []byte) error {
		k := missing[j].k
		t, err := DecodeTree(plain)
		if err != nil {
			return fmt.Errorf("tree %s: %w", ids[k].Short(), err)
		}
		trees[k] = t
		r.treeMu.Lock()
		r.trees[ids[k]] = t
		r.treeMu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return trees, nil
}

// dropTrees empties the tree cache.
func (r *Reader) dropTrees() {
	r.treeMu.Lock()
	r.trees = map[ID]*Tree{}
	r.treeMu.Unlock()
}

// span is one coalesced range read: objects lo to hi-1 of a fetch's list.
type span struct {
	pack   *packState
	off, n int64
	lo, hi int
}

// plan groups a list of n objects, at(0) to at(n-1), into range reads,
// each span a run of the list. sorted: the list is in entryRef order (by
// pack, in the commit's order, and offset), which minimizes requests;
// otherwise only neighbours in the list are merged.
func (r *Reader) plan(n int, at func(k int) entryRef, sorted bool) []span {
	// Unsorted objects (one file's chunks in file order) lie in their pack
	// slightly out of order (two sealers race to the pack): the next one is
	// often one chunk past the span, the one after fills the hole. Such a
	// span may reach back, and skip up to a quarter of MaxRange (about a
	// chunk) that the next objects usually need; objects are delivered in
	// the order given, whatever their place in the span.
	gap := r.opts.Gap
	if !sorted {
		gap = max(gap, r.opts.MaxRange/4)
	}
	var spans []span
	for k := range n {
		ref := at(k)
		p, e := r.packs[ref.pack], r.entry(ref)
		off := p.hdr.DataOffset() + e.Offset
		if j := len(spans) - 1; j >= 0 {
			s := &spans[j]
			lo, hi := min(s.off, off), max(s.off+s.n, off+e.Length)
			// An object within the span (listed again) always joins it.
			if s.pack == p && off <= s.off+s.n+gap && off+e.Length >= s.off-gap && (hi-lo <= r.opts.MaxRange || hi-lo == s.n) {
				s.off, s.n, s.hi = lo, hi-lo, k+1
				continue
			}
		}
		spans = append(spans, span{pack: p, off: off, n: e.Length, lo: k, hi: k + 1})
	}
	return spans
}

// fetchOpts says how fetch hands the objects over.
type fetchOpts struct {
	// ordered: deliveries happen in list order, one at a time; otherwise
	// concurrently, in any order.
	ordered bool
	// hashed (with ordered): the caller hashes the delivered objects into
	// a digest that covers every one of them and checks it before it
	// trusts any (a file's SHA-256, recorded in its tree), so each object
	// is decrypted without its own id check (Keys.openHashed): that would
	// hash every byte a second time.
	hashed bool
	// place, when set, is called for every object as soon as it is
	// opened, on the worker that opened it, concurrently with other
	// workers and before the object's delivery: the work that need not
	// wait for the turn (a restore's write at the object's offset).
	place func(k int, plain []byte) error
}

// fetch downloads the spans (Concurrency at a time), decrypts and verifies
// every object of the list they were planned from, and calls deliver with
// its place in the list and its plaintext, which is valid only during the
// call and not to be modified: an object listed more than once in a span
// is opened once and delivered each time.
func (r *Reader) fetch(ctx context.Context, spans []span, o fetchOpts, at func(k int) entryRef, deliver func(k int, plain []byte) error) error {
	if len(spans) == 0 {
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	next := make(chan int)
	var turns []chan struct{}
	if o.ordered {
		turns = make([]chan struct{}, len(spans)+1)
		for i := range turns {
			turns[i] = make(chan struct{})
		}
		close(turns[0])
	}
	open := r.keys.openTo
	if o.ordered && o.hashed {
		open = r.keys.openHashed
	}
	g.Go(func() error {
		defer close(next)
		for i := range spans {
			select {
			case next <- i:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	for range min(r.opts.Concurrency, len(spans)) {
		g.Go(func() error {
			buf := r.takeBuf()
			defer func() { r.keepBuf(buf) }()
			var plains [][]byte
			opened := map[int64][]byte{}
			for i := range next {
				s := &spans[i]
				var err error
				buf = grow(buf, s.n, r.opts.MaxRange)
				buf, _, err = r.readRange(gctx, s.pack.ref.BlobID, s.off, s.n, buf)
				if err != nil {
					return fmt.Errorf("read pack %s: %w", s.pack.ref.BlobID, err)
				}
				// Every object of the span is opened in place (its plaintext
				// over its ciphertext) and placed before the turn: decryption,
				// the id checks and the writes run on all workers at once, only
				// deliveries wait.
				plains = plains[:0]
				clear(opened)
				for k := s.lo; k < s.hi; k++ {
					e := r.entry(at(k))
					off := s.pack.hdr.DataOffset() + e.Offset - s.off
					plain, ok := opened[off] // an object listed again is opened once
					if !ok {
						stored := buf[off : off+e.Length]
						if plain, err = open(stored[NonceSize:NonceSize], e.Type, e.ID, stored); err != nil {
							return fmt.Errorf("pack %s: %w", s.pack.ref.BlobID, err)
						}
						opened[off] = plain
					}
					if o.place != nil {
						if err := o.place(k, plain); err != nil {
							return err
						}
					}
					plains = append(plains, plain)
				}
				if o.ordered {
					select {
					case <-turns[i]:
					case <-gctx.Done():
						return gctx.Err()
					}
				}
				for j, plain := range plains {
					if err := deliver(s.lo+j, plain); err != nil {
						return err
					}
				}
				if o.ordered {
					close(turns[i+1])
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// grow returns b, or a larger buffer when b cannot hold n bytes: twice
// its capacity (at most limit) or n, whichever is more, so a worker's
// buffer settles after a few spans instead of growing with each.
func grow(b []byte, n, limit int64) []byte {
	if int64(cap(b)) >= n {
		return b
	}
	return make([]byte, 0, max(n, min(2*int64(cap(b)), limit)))
}

// Walk calls fn for every entry of the snapshot's root tree, depth first
// in name order, with its '/'-separated path; see the package function
// Walk.
func (r *Reader) Walk(ctx context.Context, fn WalkFunc) error {
	return Walk(ctx, r, r.commit.Root, fn)
}
