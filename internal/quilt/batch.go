package quilt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hermesd/hermesd/internal/walruscost"
)

// Store is Walrus as a Batcher uses it (compose adapts the client).
type Store interface {
	// StoreQuilt stores parts as one quilt for epochs epochs and returns
	// each part's patch id, in the order of parts, having checked that
	// every one is of the quilt and under its part's identifier.
	StoreQuilt(ctx context.Context, parts []Part, epochs int) (Stored, error)
	// Compare reads the patch id back and requires exactly the size bytes
	// open returns.
	Compare(ctx context.Context, id string, open func() (io.ReadCloser, error), size int64) error
}

// Body is a pack's bytes. Every store attempt and the read-back open it
// anew; it is read until the pack's batch is done with it.
type Body interface {
	Open() (io.ReadCloser, error)
	Size() int64
}

// Part is one pack of a quilt to store.
type Part struct {
	Identifier string
	Body
}

// Stored is a stored quilt.
type Stored struct {
	QuiltID          string
	Patches          []string // patch ids, in the order of the parts
	EndEpoch         uint64   // exclusive, for every patch
	Epoch            uint64   // when the quilt was registered (0: not said)
	Size             int64    // the quilt blob's size, when the publisher said
	AlreadyCertified bool
	Attempts         int
	// Charge is what the store cost, as the publisher answered it (the
	// quilt blob's encoded length, epochs and cost).
	Charge walruscost.Charge
}

// Request is one pack to store as a patch.
type Request struct {
	// Owner is who the pack belongs to (an agent); ids are never sent.
	Owner string
	// Pack is the pack's bytes: the request carries data only, and the
	// batcher calls nothing of its caller's.
	Pack Body
	// Epochs the quilt is stored for: packs of different epochs never
	// share a quilt.
	Epochs int
}

// Result is where a pack went.
type Result struct {
	PatchID          string // "" unless the pack was stored and read back
	QuiltID          string
	EndEpoch         uint64
	Epoch            uint64
	AlreadyCertified bool
	Attempts         int           // HTTP attempts of the quilt's store
	Waited           time.Duration // from Add to the batch's store
	Patches          int           // in the quilt
	// Charge is the pack's share of its quilt's charge (Charge.Split by
	// pack bytes; Charge.Patch is set) once the quilt is stored, and it
	// stays set when the pack's read-back then fails: the quilt is paid
	// for whatever becomes of the pack. Zero for a pack that left its
	// batch or whose quilt was not stored.
	Charge walruscost.Charge
}

// Sentinel errors.
var (
	// ErrSuperseded: the pack left its batch for a newer one of its
	// owner; nothing was stored for it.
	ErrSuperseded = errors.New("quilt: superseded by a newer snapshot of the same agent")
	// ErrClosed: the batcher is closed.
	ErrClosed = errors.New("quilt: batcher closed")
)

// Batch describes one quilt a Batcher stored (or failed to), for
// metrics and logs.
type Batch struct {
	QuiltID  string
	Epochs   int
	Patches  int
	Bytes    int64 // the packs' bytes
	Size     int64 // the quilt blob's, when the publisher said
	Charge   walruscost.Charge
	Wait     time.Duration // from the batch's first pack to its store
	Store    time.Duration // the store
	Verify   time.Duration // the read-backs
	Attempts int
	Err      error // the store's failure, or the first read-back's
	Failed   int   // packs whose store or read-back failed
}

// Config configures a Batcher.
type Config struct {
	// Window is how long a batch gathers packs after its first one; 0
	// stores every pack at once (a quilt of its own).
	Window time.Duration
	// MaxBody bounds a quilt's multipart body (walrus.max_blob_size).
	MaxBody int64
	// MaxPatches bounds a quilt's patches (0: MaxPatches).
	MaxPatches int
	// Reads bounds concurrent read-backs of one quilt (0: 8).
	Reads int
	// Observe, when set, sees every batch once it is done.
	Observe func(Batch)
	Logger  *slog.Logger
	// Now is the clock deciding whether half the window remains (tests);
	// nil is time.Now.
	Now func() time.Time
}

// MaxPatches is the most patches a quilt holds (QuiltV1).
const MaxPatches = 666

// MaxPatchSize caps PatchLimit: a reader holds a whole patch in memory
// (ranges of a patch are not part of the aggregator's documented API).
const MaxPatchSize = 4 << 20

// PatchLimit is the largest pack stored as a patch, for a quilt body cap
// of maxBody: a quarter of it, at most MaxPatchSize. A pack of size s in
// a quilt that fills up by size shares the quilt's fixed metadata (M =
// 64,032,000 encoded bytes at 1000 shards) with packs that take the rest
// of it, so it pays about M·s/maxBody of it instead of M: it saves
// M·(1 − s/maxBody) of the M + 4.49·s a blob of its own costs, at least
// 63% up to maxBody/4 (2.5 MiB of the default 10 MiB), falling to
// nothing as s nears maxBody, where the pack fills a quilt alone and only
// waits for the window. Larger packs stay blobs.
func PatchLimit(maxBody int64) int64 { return min(maxBody/4, MaxPatchSize) }

// partOverhead bounds the multipart headers around one part (the
// boundary, Content-Disposition with the identifier twice, Content-Type).
const partOverhead = 256

// Batcher gathers packs into quilts. It is safe for concurrent use.
type Batcher struct {
	store Store
	cfg   Config
	log   *slog.Logger

	ctx    context.Context // the stores' and read-backs'
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	open   map[int]*batch // by epochs
	// left is, per owner, the batch its last pack left (superseded):
	// its next pack may not leave a batch if that one went without it.
	left map[string]*batch
	seq  uint64
}

type batch struct {
	epochs  int
	opened  time.Time
	entries []*entry
	body    int64 // multipart body estimate
	timer   *time.Timer
	sent    bool
	seq     uint64
}

type entry struct {
	req    Request
	size   int64 // req.Pack's
	at     time.Time
	pinned bool // may not leave its batch for a newer pack (it already left one that went without it)
	done   chan struct{}
	res    Result // set, with err, before done is closed
	err    error
	parent *batch
	left   bool // it left its batch before it was sent (under Batcher.mu)
}

// New returns a Batcher storing through store.
func New(store Store, cfg Config) *Batcher {
	if cfg.MaxPatches <= 0 || cfg.MaxPatches > MaxPatches {
		cfg.MaxPatches = MaxPatches
	}
	if cfg.Reads <= 0 {
		cfg.Reads = 8
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Batcher{store: store, cfg: cfg, log: log, ctx: ctx, cancel: cancel,
		open: map[int]*batch{}, left: map[string]*batch{}}
}

// MaxPatch is the largest pack Put takes (PatchLimit of MaxBody).
func (b *Batcher) MaxPatch() int64 { return PatchLimit(b.cfg.MaxBody) }

// Window is the batch window.
func (b *Batcher) Window() time.Duration { return b.cfg.Window }

// Pending is the number of packs waiting in open batches.
func (b *Batcher) Pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, bt := range b.open {
		n += len(bt.entries)
	}
	return n
}

// Flush stores every open batch now, whatever its window (a daemon
// about to stop, tests).
func (b *Batcher) Flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, bt := range b.open {
		b.sendLocked(bt)
	}
}

// Close fails the packs of open batches with ErrClosed, cancels the
// batches in flight and waits for them.
func (b *Batcher) Close() {
	b.mu.Lock()
	b.closed = true
	for _, bt := range b.open {
		b.sendLocked(bt) // closed: its packs fail
	}
	b.mu.Unlock()
	b.cancel()
	b.wg.Wait()
}

// Put stores the pack req as a patch of a quilt, reads it back and
// compares it, and returns its patch id: Add, then Wait. It blocks for
// the batch window at most (plus the store and the read-backs).
func (b *Batcher) Put(ctx context.Context, req Request) (Result, error) {
	t, err := b.Add(req)
	if err != nil {
		return Result{}, err
	}
	return t.Wait(ctx)
}

// Add puts the pack req in the open batch of its epochs and returns its
// place there at once (see the package doc).
func (b *Batcher) Add(req Request) (*Ticket, error) {
	size := req.Pack.Size()
	if size < 0 || size > b.MaxPatch() {
		return nil, fmt.Errorf("quilt: a pack of %d bytes is not a patch (at most %d)", size, b.MaxPatch())
	}
	e := &entry{req: req, size: size, at: b.cfg.Now(), done: make(chan struct{})}
	if err := b.add(e); err != nil {
		return nil, err
	}
	return &Ticket{b: b, e: e}, nil
}

// Ticket is one pack's place in a batch, from Add until its batch is
// done with it. Its methods are safe for concurrent use.
type Ticket struct {
	b *Batcher
	e *entry
}

// Done is closed once the pack's batch is done with it, or the pack left
// it: Wait then returns at once.
func (t *Ticket) Done() <-chan struct{} { return t.e.done }

// Wait waits for the pack's batch and returns where the pack went. When
// ctx ends before the batch is sent, the pack leaves it and Wait returns
// ctx's error; a batch that is sent reads the pack until it is done, so
// Wait returns only then (a pack stored and verified is the caller's: a
// daemon stopping still publishes it). Result.Charge is set whenever the
// pack's quilt was stored, even when Wait fails.
func (t *Ticket) Wait(ctx context.Context) (Result, error) {
	select {
	case <-t.e.done:
	case <-ctx.Done():
		t.b.leave(t.e, ctx.Err())
		<-t.e.done
	}
	return t.e.res, t.e.err
}

// Withdraw takes the pack out of its batch because its owner has a newer
// state ready, if it may (see the package doc): the batch is not sent,
// the pack did not itself replace one that then missed its batch, and at
// least half the window remains. Wait then returns ErrSuperseded. It
// reports whether the pack left; if not, it stays in its batch.
func (t *Ticket) Withdraw() bool { return t.b.leave(t.e, ErrSuperseded) }

// add puts e in the open batch of its epochs, storing that batch first
// when e does not fit.
func (b *Batcher) add(e *entry) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	if prev, ok := b.left[e.req.Owner]; ok {
		// The owner's last pack left prev for this one: if prev went
		// without it, this one stays where it lands.
		e.pinned = prev.sent
		delete(b.left, e.req.Owner)
	}
	bt := b.open[e.req.Epochs]
	if bt != nil && !b.fits(bt, e.size) {
		b.sendLocked(bt)
		bt = nil
	}
	if bt == nil {
		b.seq++
		bt = &batch{epochs: e.req.Epochs, opened: e.at, seq: b.seq}
		b.open[e.req.Epochs] = bt
		if b.cfg.Window > 0 {
			bt.timer = time.AfterFunc(b.cfg.Window, func() { b.send(bt) })
		} else {
			bt.timer = time.NewTimer(time.Hour)
			bt.timer.Stop()
		}
	}
	e.parent = bt
	bt.entries = append(bt.entries, e)
	bt.body += e.size + partOverhead
	b.log.Debug("pack waits for its quilt batch", "owner", e.req.Owner, "bytes", e.size,
		"packs", len(bt.entries), "window", b.cfg.Window)
	if b.cfg.Window <= 0 || len(bt.entries) >= b.cfg.MaxPatches {
		b.sendLocked(bt)
	}
	return nil
}

// fits reports whether a pack of size bytes may join bt: the patch count
// and the body cap, and padding: widely different pack sizes widen every
// column of the quilt (see QuiltSize), and padding that would cost more
// than the metadata of a quilt of its own is not worth it.
func (b *Batcher) fits(bt *batch, size int64) bool {
	if len(bt.entries)+1 > b.cfg.MaxPatches || bt.body+size+partOverhead > b.cfg.MaxBody {
		return false
	}
	sizes := make([]int64, 0, len(bt.entries)+1)
	var payload int64
	for _, e := range bt.entries {
		sizes = append(sizes, e.size)
		payload += e.size
	}
	sizes = append(sizes, size)
	return QuiltSize(sizes)-payload-size <= PaddingBudget
}

// send stores bt (its window is over).
func (b *Batcher) send(bt *batch) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sendLocked(bt)
}

func (b *Batcher) sendLocked(bt *batch) {
	if bt.sent {
		return
	}
	bt.sent = true
	bt.timer.Stop()
	if b.open[bt.epochs] == bt {
		delete(b.open, bt.epochs)
	}
	if b.closed || len(bt.entries) == 0 {
		for _, e := range bt.entries {
			e.err = ErrClosed
			close(e.done)
		}
		return
	}
	entries := slices.Clone(bt.entries)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.storeBatch(bt, entries)
	}()
}

// leave takes e out of its batch, ending it with err, if that batch is
// not sent yet (and e is still in it); for a newer pack (ErrSuperseded)
// only if e may leave (not pinned) and at least half the window remains.
func (b *Batcher) leave(e *entry, err error) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	bt := e.parent
	if bt.sent || e.left {
		return false
	}
	superseded := errors.Is(err, ErrSuperseded)
	if superseded && (e.pinned || bt.opened.Add(b.cfg.Window).Sub(b.cfg.Now()) < b.cfg.Window/2) {
		return false
	}
	i := slices.Index(bt.entries, e)
	bt.entries = slices.Delete(bt.entries, i, i+1)
	bt.body -= e.size + partOverhead
	if superseded {
		// The batch stays open, even empty, until its window ends: the
		// newer pack joins it and keeps its deadline.
		b.left[e.req.Owner] = bt
	}
	e.left, e.err = true, err
	close(e.done)
	return true
}

// storeBatch stores one batch as a quilt, reads every patch back and
// compares it, and ends every entry.
func (b *Batcher) storeBatch(bt *batch, entries []*entry) {
	start := b.cfg.Now()
	rep := Batch{Epochs: bt.epochs, Patches: len(entries), Wait: start.Sub(bt.opened)}
	parts := make([]Part, len(entries))
	for i, e := range entries {
		// Identifiers are public: they say nothing but the order.
		parts[i] = Part{Identifier: fmt.Sprintf("p%03d", i), Body: e.req.Pack}
		rep.Bytes += e.size
	}
	st, err := b.store.StoreQuilt(b.ctx, parts, bt.epochs)
	rep.Store = b.cfg.Now().Sub(start)
	if err == nil && len(st.Patches) != len(parts) {
		err = fmt.Errorf("quilt: store returned %d patch ids for %d packs", len(st.Patches), len(parts))
	}
	if err != nil {
		rep.Err, rep.Failed = err, len(entries)
		for _, e := range entries {
			e.err = fmt.Errorf("store quilt of %d packs: %w", len(entries), err)
			close(e.done)
		}
		b.observe(rep)
		return
	}
	rep.QuiltID, rep.Size, rep.Attempts, rep.Charge = st.QuiltID, st.Size, st.Attempts, st.Charge
	// The quilt is paid for from here on, whatever its read-backs say:
	// each pack's result carries its share, by its bytes, and the shares
	// add up to the charge exactly.
	sizes := make([]uint64, len(entries))
	for i, e := range entries {
		sizes[i] = uint64(e.size)
	}
	for i, share := range st.Charge.Split(sizes) {
		entries[i].res = Result{QuiltID: st.QuiltID, EndEpoch: st.EndEpoch, Epoch: st.Epoch,
			AlreadyCertified: st.AlreadyCertified, Attempts: st.Attempts, Waited: start.Sub(entries[i].at),
			Patches: len(entries), Charge: share}
	}
	t := b.cfg.Now()
	sem := make(chan struct{}, b.cfg.Reads)
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := b.store.Compare(b.ctx, st.Patches[i], e.req.Pack.Open, e.size); err != nil {
				e.err = fmt.Errorf("verify patch %s of quilt %s: %w", st.Patches[i], st.QuiltID, err)
				return
			}
			e.res.PatchID = st.Patches[i]
		}()
	}
	wg.Wait()
	rep.Verify = b.cfg.Now().Sub(t)
	for _, e := range entries {
		if e.err != nil {
			rep.Failed++
			if rep.Err == nil {
				rep.Err = e.err
			}
		}
		close(e.done)
	}
	b.observe(rep)
}

func (b *Batcher) observe(rep Batch) {
	if rep.Err != nil {
		b.log.Warn("quilt batch failed", "patches", rep.Patches, "failed", rep.Failed, "quilt", rep.QuiltID, "error", rep.Err)
	} else {
		b.log.Debug("quilt stored and verified", "quilt", rep.QuiltID, "patches", rep.Patches, "bytes", rep.Bytes,
			"quilt_bytes", rep.Size, "frost", rep.Charge.FROST, "wait", rep.Wait.Round(time.Millisecond), "store", rep.Store.Round(time.Millisecond),
			"verify", rep.Verify.Round(time.Millisecond))
	}
	if b.cfg.Observe != nil {
		b.cfg.Observe(rep)
	}
}
