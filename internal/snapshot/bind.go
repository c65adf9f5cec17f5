package snapshot

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/repo"
)

// BlobIDs checks a whole blob against the id it was read under. A Walrus
// blob id is a commitment to the blob's encoding, so bytes that do not
// encode to the id are not the blob the id names, whatever the aggregator
// says. A quilt patch cannot be checked so: its id names its quilt, whose
// other patches a reader does not have (docs/format-v3.md §14).
type BlobIDs interface {
	// CheckBlobID returns nil when the size bytes of blob are the blob
	// blobID names, and an error matching headref.ErrMismatch when they
	// are not.
	CheckBlobID(ctx context.Context, blobID string, blob io.ReaderAt, size int64) error
}

// Warnings a restore gives when nothing binds the bytes it read to the
// reference it was given: one line each, naming the risk.
const (
	warnNoDigest = "head %s was named without its digest: " +
		"an aggregator could serve another of this agent's snapshots in its place unnoticed"
	warnNoBlobID = "blob %s was taken on the aggregator's word: its bytes are not checked against its blob id here, " +
		"so an aggregator could serve another of this agent's snapshots in its place unnoticed"
)

// parseRef reads a head reference handed to the pipeline: a record's
// value, a state's, a lock's, a command line's.
func parseRef(s string) (headref.Ref, error) {
	r, err := headref.Parse(s)
	if err != nil {
		return headref.Ref{}, fmt.Errorf("snapshot: %w", err)
	}
	return r, nil
}

// notV3 is the error for a reference bound to a v3 commit whose id
// serves a blob of another format.
func notV3(ref headref.Ref, f Format) error {
	return fmt.Errorf("%w: %s is a %s blob, the reference names the v3 head of commit %s", headref.ErrMismatch, ref.ID, f, ref.Digest)
}

// checkWhole checks a whole downloaded blob against its id with p.IDs,
// when it can: a patch, or a pipeline without BlobIDs, takes the
// aggregator's word, and the warning it returns says so.
func (p *Pipeline) checkWhole(ctx context.Context, blobID string, f *os.File, size int64) (warning string, err error) {
	if p.IDs == nil || headref.Bare(blobID).IsPatch() {
		return fmt.Sprintf(warnNoBlobID, blobID), nil
	}
	if err := p.IDs.CheckBlobID(ctx, blobID, f, size); err != nil {
		return "", fmt.Errorf("check blob %s against its id: %w", blobID, err)
	}
	return "", nil
}

// bindV3 gives a bare reference to a v3 head the digest it can prove: a
// head pack that is a whole blob is downloaded and checked against its
// blob id (p.IDs), and its commit id, read from those checked bytes,
// binds the range reads that follow. A patch, or a pipeline without
// BlobIDs, stays bare, and the warning says so.
func (p *Pipeline) bindV3(ctx context.Context, ref headref.Ref) (headref.Ref, string, error) {
	if ref.Bound {
		return ref, "", nil
	}
	if p.IDs == nil || ref.IsPatch() {
		return ref, fmt.Sprintf(warnNoDigest, ref.ID), nil
	}
	spool, err := os.CreateTemp(p.SpoolDir, "head-*.pack")
	if err != nil {
		return ref, "", fmt.Errorf("create spool: %w", err)
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	got, err := p.Store.Get(ctx, ref.ID, spool.Name(), 0)
	if err != nil {
		return ref, "", &StageError{"download", fmt.Errorf("download head pack %s: %w", ref.ID, err)}
	}
	f, err := os.Open(spool.Name())
	if err != nil {
		return ref, "", err
	}
	defer f.Close()
	if _, err := p.checkWhole(ctx, ref.ID, f, got.Size); err != nil {
		return ref, "", &StageError{"unpack", err}
	}
	keys, err := p.keysFor(ctx, ref.ID)
	if err != nil {
		return ref, "", err
	}
	h, err := repo.ReadCommit(ctx, fileRanges{f, got.Size}, keys, ref.ID)
	if err != nil {
		return ref, "", &StageError{"unpack", p.explainV3(ctx, ref.ID, err)}
	}
	return headref.Bind(ref.ID, headref.Digest(h.CommitID)), "", nil
}

// fileRanges serves range reads of a downloaded blob.
type fileRanges struct {
	f    *os.File
	size int64
}

func (r fileRanges) ReadRange(_ context.Context, _ string, off, n int64, w io.Writer) (int64, error) {
	if off < 0 || n <= 0 || off+n > r.size {
		return r.size, fmt.Errorf("range %d+%d outside a blob of %d bytes", off, n, r.size)
	}
	_, err := io.Copy(w, io.NewSectionReader(r.f, off, n))
	return r.size, err
}
