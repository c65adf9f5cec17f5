package snapshot_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/snapshot"
)

// localIDs checks whole blobs against localwalrus's ids, which are
// content-addressed as Walrus's are (another function of the bytes, see
// the localwalrus package doc): the stand-in for the real Walrus blob id
// check (snapshot.BlobIDs) until localwalrus issues real ids.
type localIDs struct{}

func (localIDs) CheckBlobID(_ context.Context, id string, r io.ReaderAt, size int64) error {
	b := make([]byte, size)
	if _, err := r.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if got := localwalrus.BlobID(b); got != id {
		return fmt.Errorf("%w: the bytes read under %s are blob %s", headref.ErrMismatch, id, got)
	}
	return nil
}

// readAll reads a blob whole, as a hostile aggregator would to replay it.
func readAll(t *testing.T, p *snapshot.Pipeline, id string, size int64) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := p.Store.ReadRange(t.Context(), headref.ID(id), 0, size, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// gone fails unless dir was never created.
func gone(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused restore left %s (%v)", dir, err)
	}
}

// TestReplayV3: the aggregator answers the newer v3 head's id with the
// same agent's older head. A reference with the digest (what the pointer,
// the state and the lock hold) refuses it in every read of a head —
// restore, OpenV3, History — before anything is written; a bare id is
// bound by checking the whole head pack against its blob id when the
// pipeline can (BlobIDs), and otherwise restores with a warning naming
// the risk.
func TestReplayV3(t *testing.T) {
	t.Parallel()
	f := newV3Fix(t, 0)
	f.write("system.md", []byte("the older brain\n"), 0o644)
	older := f.take()
	f.write("system.md", []byte("the newer brain\n"), 0o644)
	f.write("skills/s.md", []byte("a skill learned since\n"), 0o600)
	newer := f.take()
	if !strings.Contains(newer.BlobID, ".") {
		t.Fatalf("a v3 snapshot's reference %q carries no digest", newer.BlobID)
	}
	f.srv.Forge(headref.ID(newer.BlobID), readAll(t, f.p, older.BlobID, older.Size))

	p := f.pipeline()
	dir := filepath.Join(t.TempDir(), "restored")
	_, err := p.Restore(t.Context(), newer.BlobID, dir)
	if !errors.Is(err, headref.ErrMismatch) || !strings.Contains(err.Error(), "served other bytes than the pointer names") {
		t.Fatalf("restore of the replayed head: %v", err)
	}
	gone(t, dir)
	if _, err := p.OpenV3(t.Context(), newer.BlobID); !errors.Is(err, headref.ErrMismatch) {
		t.Errorf("OpenV3: %v", err)
	}
	if _, err := p.History(t.Context(), newer.BlobID, 0); !errors.Is(err, headref.ErrMismatch) {
		t.Errorf("History: %v", err)
	}

	// A bare id with the blob id check: the whole head pack is checked
	// against its id, and refused.
	p.IDs = localIDs{}
	if _, err := p.Restore(t.Context(), headref.ID(newer.BlobID), dir); !errors.Is(err, headref.ErrMismatch) {
		t.Fatalf("bare id, blob ids checked: %v", err)
	}
	gone(t, dir)

	// A bare id without it: the older brain, and a warning that says so.
	p.IDs = nil
	r, err := p.Restore(t.Context(), headref.ID(newer.BlobID), dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.BundleHash != older.BundleHash || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "named without its digest") {
		t.Fatalf("bare id: restored %s (older %s), warnings %q", r.BundleHash, older.BundleHash, r.Warnings)
	}
	t.Logf("warning: %s", r.Warnings[0])

	// The genuine bytes: a bare id checked against its blob id is bound
	// to the commit it holds, and restores without a warning.
	f.srv.Forge(headref.ID(newer.BlobID), nil)
	p.IDs = localIDs{}
	r, err = p.Restore(t.Context(), headref.ID(newer.BlobID), filepath.Join(t.TempDir(), "genuine"))
	if err != nil || r.BlobID != newer.BlobID || r.BundleHash != newer.BundleHash || len(r.Warnings) != 0 {
		t.Fatalf("genuine head, bare id: %v; restored %s as %s, warnings %q", err, r.BundleHash, r.BlobID, r.Warnings)
	}
}

// TestReplayV3Parent: the parent a snapshot builds on is read under the
// reference the lock records. Replayed, it is not used: the snapshot
// stores the whole brain (nothing of the replayed head is reused) and
// still names its true parent.
func TestReplayV3Parent(t *testing.T) {
	t.Parallel()
	f := newV3Fix(t, 0)
	f.write("system.md", []byte("the older brain\n"), 0o644)
	f.write("memory.db", bytes.Repeat([]byte("page"), 64<<10), 0o600)
	older := f.take()
	f.write("system.md", []byte("the newer brain\n"), 0o644)
	newer := f.take()
	lock, err := bundlelock.Read(filepath.Join(f.brain, bundlelock.FileName))
	if err != nil || lock.BlobID() != newer.BlobID {
		t.Fatalf("the lock names %q (%v), want %s", lock.BlobID(), err, newer.BlobID)
	}
	f.srv.Forge(headref.ID(newer.BlobID), readAll(t, f.p, older.BlobID, older.Size))
	// A restarted process, its dedup index lost: the parent is read.
	os.RemoveAll(f.cache)
	os.MkdirAll(f.cache, 0o755)
	f.p = f.pipeline()
	f.write("notes.md", []byte("a third state\n"), 0o644)
	third := f.take()
	if third.Uploaded < newer.Bytes {
		t.Errorf("the snapshot over a replayed parent uploaded %d bytes of a %d byte brain: it reused what the replay named", third.Uploaded, newer.Bytes)
	}
	f.srv.Forge(headref.ID(newer.BlobID), nil)
	r, err := f.p.OpenV3(t.Context(), third.BlobID)
	if err != nil {
		t.Fatal(err)
	}
	if c := r.Commit(); c.Parent != headref.ID(newer.BlobID) {
		t.Errorf("parent %s, want %s", c.Parent, headref.ID(newer.BlobID))
	}
}

// TestReplayWhole: v1/v2 blobs are named by their blob id alone (the
// reference runtime reads them so). Under a reference with a digest a
// v2 blob is refused (a digest names a v3 head); under its id it is bound
// by the blob id check (BlobIDs), and without one restored with a
// warning.
func TestReplayWhole(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	older, err := f.take("alpha.hermes.eth", f.hash())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.brain, "system.md"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	newer, err := f.take("alpha.hermes.eth", f.hash())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(newer.BlobID, ".") {
		t.Fatalf("a v2 snapshot is named %q: the reference runtime reads plain blob ids", newer.BlobID)
	}
	p := f.pipeline("alpha.hermes.eth")
	f.srv.Forge(newer.BlobID, readAll(t, p, older.BlobID, older.Size))
	dir := filepath.Join(t.TempDir(), "restored")

	bound := headref.Bind(newer.BlobID, headref.Digest{1}).String()
	if _, err := p.Restore(t.Context(), bound, dir); !errors.Is(err, headref.ErrMismatch) {
		t.Fatalf("a v2 blob under a digest: %v", err)
	}
	gone(t, dir)

	p.IDs = localIDs{}
	if _, err := p.Restore(t.Context(), newer.BlobID, dir); !errors.Is(err, headref.ErrMismatch) {
		t.Fatalf("replayed v2 blob, blob ids checked: %v", err)
	}
	gone(t, dir)

	p.IDs = nil
	r, err := p.Restore(t.Context(), newer.BlobID, dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.BundleHash != older.BundleHash || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "aggregator's word") {
		t.Fatalf("replayed v2 blob, unchecked: restored %s (older %s), warnings %q", r.BundleHash, older.BundleHash, r.Warnings)
	}

	f.srv.Forge(newer.BlobID, nil)
	p.IDs = localIDs{}
	r, err = p.Restore(t.Context(), newer.BlobID, filepath.Join(t.TempDir(), "genuine"))
	if err != nil || r.BundleHash != newer.BundleHash || len(r.Warnings) != 0 {
		t.Fatalf("genuine v2 blob: %v; %s, warnings %q", err, r.BundleHash, r.Warnings)
	}
}
