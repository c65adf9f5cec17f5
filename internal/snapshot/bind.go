package snapshot

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/repo"
)

// A whole blob is bound to its id by the store: a Walrus blob id is a
// commitment to the blob's encoding, and BlobStore.Get and Stream return
// only bytes that encode to the id asked for (an error matching
// headref.ErrMismatch otherwise). A quilt patch cannot be checked so: its
// id names its quilt, whose other patches a reader does not have; only a
// head reference's digest binds it (docs/format-v3.md §14).

// Warnings a restore gives when nothing binds the bytes it read to the
// reference it was given: one line each, naming the risk.
const (
	warnNoDigest = "head %s was named without its digest, and a quilt patch cannot be checked against its id: " +
		"an aggregator could serve another of this agent's snapshots in its place unnoticed"
	warnPatch = "blob %s is a quilt patch, which cannot be checked against its id: " +
		"an aggregator could serve another of this agent's snapshots in its place unnoticed"
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

// wholeWarning is the warning a whole read of id gives: none for a blob,
// which the store checks against its id; one for a quilt patch.
func wholeWarning(id string) string {
	if headref.Bare(id).IsPatch() {
		return fmt.Sprintf(warnPatch, id)
	}
	return ""
}

// bindV3 gives a bare reference to a v3 head the digest it can prove: a
// head pack that is a whole blob is downloaded (the store checks it
// against its blob id), and its commit id, read from those checked bytes,
// binds the range reads that follow. A patch stays bare, and the warning
// says so.
func (p *Pipeline) bindV3(ctx context.Context, ref headref.Ref) (headref.Ref, string, error) {
	if ref.Bound {
		return ref, "", nil
	}
	if ref.IsPatch() {
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
