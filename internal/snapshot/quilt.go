package snapshot

import (
	"context"
	"errors"
	"io"
	"time"
)

// Quilter stores small v3 packs as patches of Walrus quilts shared with
// other agents' packs (docs/design.md §11; compose adapts the daemon's
// quilt batcher). The pointer may then name a patch id: readers tell it
// from a blob id by its length (docs/format-v3.md §13).
type Quilter interface {
	// MaxPatch is the largest pack stored as a patch; larger packs are
	// blobs of their own.
	MaxPatch() int64
	// StorePatch stores the pack as one patch of a quilt, reads the patch
	// back and compares it with the pack, and only then returns its patch
	// id (PatchStored.BlobID) and the quilt's end epoch. It fails with an
	// error matching ErrSuperseded when the pack left its batch for a
	// newer state of the same brain (PatchRequest.Newer).
	StorePatch(ctx context.Context, req PatchRequest) (PatchStored, error)
}

// PatchRequest is one pack for a Quilter.
type PatchRequest struct {
	Owner  string // the agent
	Open   func() (io.ReadCloser, error)
	Size   int64
	Epochs int
	// Newer is Input.Newer: once it is closed, the pack leaves its batch
	// if it still may.
	Newer <-chan struct{}
}

// PatchStored is where a pack went as a patch.
type PatchStored struct {
	Stored                // BlobID is the patch id; EndEpoch the quilt's
	QuiltID string        // the quilt's blob id
	Patches int           // in the quilt
	Waited  time.Duration // in the batch
}

// ErrSuperseded: the snapshot gave way to a newer state of the brain
// while its head waited for a quilt (Input.Newer); nothing references
// what it stored, and the caller takes the newer snapshot at once.
var ErrSuperseded = errors.New("snapshot superseded by a newer state of the brain")

// storePatch stores pk as a quilt patch (read back and compared by the
// quilter).
func (s *packSink) storePatch(ctx context.Context, open func() (io.ReadCloser, error), size int64) (Stored, error) {
	p := s.p
	if slot := s.in.Slot; slot != nil {
		// The pack waits for other agents' packs: this snapshot's sync
		// slot is theirs meanwhile. One that cannot take it back (it is
		// being stopped) ends without it.
		slot.Lend()
		defer slot.Reclaim(ctx)
	}
	t := p.now()
	st, err := p.Quilts.StorePatch(ctx, PatchRequest{Owner: p.AgentID, Open: open, Size: size, Epochs: p.Epochs,
		Newer: s.in.Newer})
	if err != nil {
		return Stored{}, err
	}
	s.upload.Add(int64(p.now().Sub(t) - st.Waited))
	s.waited.Add(int64(st.Waited))
	s.patches.Add(1)
	s.uploaded.Add(size)
	s.attempts.Add(int64(st.Attempts))
	return st.Stored, nil
}
