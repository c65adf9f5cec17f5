package compose

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hermesd/hermesd/internal/quilt"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/walrus"
)

// QuiltStore is the Walrus client as the quilt batcher uses it (Build
// makes the daemon's; tools and tests build their own batchers on it).
func QuiltStore(c *walrus.Client) quilt.Store { return quiltStore{newStore(c)} }

// Quilter adapts a quilt batcher to the pipeline's Quilter.
func Quilter(b *quilt.Batcher) snapshot.Quilter { return quilter{b: b} }

// quiltStore is the Walrus client as the quilt batcher uses it.
type quiltStore struct{ s *walrusStore }

func (q quiltStore) StoreQuilt(ctx context.Context, parts []quilt.Part, epochs int) (quilt.Stored, error) {
	wp := make([]walrus.QuiltPart, len(parts))
	for i, p := range parts {
		wp[i] = walrus.QuiltPart{Identifier: p.Identifier, Body: p.Body}
	}
	r, err := q.s.c.StoreQuilt(ctx, wp, walrus.WithEpochs(epochs))
	if err != nil {
		return quilt.Stored{}, err
	}
	st := quilt.Stored{QuiltID: r.BlobID, EndEpoch: uint64(r.EndEpoch), Epoch: uint64(r.RegisteredEpoch),
		Size: r.Size, AlreadyCertified: r.AlreadyCertified, Attempts: r.Attempts, Charge: r.Charge(),
		Patches: make([]string, len(r.Patches))}
	for i, p := range r.Patches {
		st.Patches[i] = p.PatchID
	}
	return st, nil
}

func (q quiltStore) Compare(ctx context.Context, id string, open func() (io.ReadCloser, error), size int64) error {
	return q.s.Compare(ctx, id, open, size)
}

// quilter adapts the daemon's batcher to the pipeline's Quilter.
type quilter struct {
	b *quilt.Batcher
	// acct, when set, is charged every share of a quilt that a pack of
	// this pipeline was stored in (the agent's cost ledger).
	acct *account
}

func (q quilter) MaxPatch() int64 { return q.b.MaxPatch() }

func (q quilter) StorePatch(ctx context.Context, r snapshot.PatchRequest) (snapshot.PatchStored, error) {
	t, err := q.b.Add(quilt.Request{Owner: r.Owner, Pack: readerBody{r.Open, r.Size}, Epochs: r.Epochs})
	if err != nil {
		return snapshot.PatchStored{}, err
	}
	select {
	case <-r.Newer:
		// A newer state of the brain is ready: the pack gives way if it
		// still may, else it waits for its batch all the same.
		t.Withdraw()
	case <-t.Done():
	case <-ctx.Done():
	}
	res, err := t.Wait(ctx)
	if res.Charge.Patch && q.acct != nil {
		// Its quilt was stored: paid for whatever became of the patch.
		q.acct.charge(res.Charge)
	}
	if errors.Is(err, quilt.ErrSuperseded) {
		return snapshot.PatchStored{}, fmt.Errorf("%w: %w", snapshot.ErrSuperseded, err)
	}
	if err != nil {
		return snapshot.PatchStored{}, err
	}
	return snapshot.PatchStored{
		Stored: snapshot.Stored{BlobID: res.PatchID, EndEpoch: res.EndEpoch, Epoch: res.Epoch,
			AlreadyCertified: res.AlreadyCertified, Attempts: res.Attempts},
		QuiltID: res.QuiltID, Patches: res.Patches, Waited: res.Waited,
	}, nil
}

// MaxPatchRead bounds a quilt patch a reader holds: aggregators serve
// patches whole, so a range of a pack that is a patch is cut from the
// whole patch, kept in memory (docs/format-v3.md §13).
const MaxPatchRead = 16 << 20

// patchCacheBytes bounds the patches kept for further ranges, across
// all agents of a process.
const patchCacheBytes = 32 << 20

// patchCache keeps whole quilt patches for range reads: a reader reads a
// pack's header, then its index, then objects, each a range. Patches are
// immutable, so what is cached stays right; the oldest go first.
type patchCache struct {
	mu    sync.Mutex
	byID  map[string]*patchEntry
	order []string // oldest first
	bytes int64
}

type patchEntry struct {
	ready chan struct{}
	data  []byte
	err   error
}

func newPatchCache() *patchCache { return &patchCache{byID: map[string]*patchEntry{}} }

// get returns patch id, read once by fetch however many callers ask at
// the same time. Failures are not kept.
func (pc *patchCache) get(ctx context.Context, id string, fetch func(context.Context) ([]byte, error)) ([]byte, error) {
	pc.mu.Lock()
	e := pc.byID[id]
	if e == nil {
		e = &patchEntry{ready: make(chan struct{})}
		pc.byID[id] = e
		pc.mu.Unlock()
		e.data, e.err = fetch(ctx)
		pc.mu.Lock()
		switch {
		case pc.byID[id] != e:
			// Forgotten while it was read: not kept.
		case e.err != nil:
			delete(pc.byID, id)
		default:
			pc.order = append(pc.order, id)
			pc.bytes += int64(len(e.data))
			for pc.bytes > patchCacheBytes && len(pc.order) > 1 {
				old := pc.order[0]
				pc.order = pc.order[1:]
				pc.bytes -= int64(len(pc.byID[old].data))
				delete(pc.byID, old)
			}
		}
		close(e.ready)
		pc.mu.Unlock()
		return e.data, e.err
	}
	pc.mu.Unlock()
	select {
	case <-e.ready:
		return e.data, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// forget drops every patch kept (reads in flight finish, unkept).
func (pc *patchCache) forget() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.byID, pc.order, pc.bytes = map[string]*patchEntry{}, nil, 0
}

// Forget drops the quilt patches kept for range reads: the pipeline calls
// it when bytes it read failed verification, so that an aggregator's
// lie (or a corrupt answer) is read again, not answered from here, once
// the aggregator is right again.
func (s *walrusStore) Forget() { s.patches.forget() }

// readPatchRange writes bytes [off, off+length) of patch id to w from the
// whole patch, and returns the patch's size.
func (s *walrusStore) readPatchRange(ctx context.Context, id string, off, length int64, w io.Writer) (int64, error) {
	data, err := s.patches.get(ctx, id, func(ctx context.Context) ([]byte, error) {
		var b bytes.Buffer
		if _, err := s.c.Read(ctx, id, &b, walrus.WithMaxSize(MaxPatchRead)); err != nil {
			return nil, storeErr(err)
		}
		return b.Bytes(), nil
	})
	if err != nil {
		return 0, err
	}
	total := int64(len(data))
	if off < 0 || length <= 0 || off > total-length {
		return total, fmt.Errorf("%w: bytes %d-%d are beyond the end of the %d-byte patch %s", walrus.ErrInvalidRange, off, off+length-1, total, id)
	}
	_, err = w.Write(data[off : off+length])
	return total, err
}
