package snapshot_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/snapshot"
)

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
// restore, OpenV3, History — before anything is written; a bare blob id
// (a record written before heads carried their digest) is bound by the
// store's check of the whole head pack against its blob id, and refused
// too.
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

	// A bare id: the whole head pack is checked against its blob id, and
	// refused.
	if _, err := p.Restore(t.Context(), headref.ID(newer.BlobID), dir); !errors.Is(err, headref.ErrMismatch) {
		t.Fatalf("bare id: %v", err)
	}
	gone(t, dir)

	// The genuine bytes: a bare id checked against its blob id is bound
	// to the commit it holds, and restores without a warning.
	f.srv.Forge(headref.ID(newer.BlobID), nil)
	r, err := p.Restore(t.Context(), headref.ID(newer.BlobID), filepath.Join(t.TempDir(), "genuine"))
	if err != nil || r.BlobID != newer.BlobID || r.BundleHash != newer.BundleHash || len(r.Warnings) != 0 {
		t.Fatalf("genuine head, bare id: %v; restored %s as %s, warnings %q", err, r.BundleHash, r.BlobID, r.Warnings)
	}
}

// TestReplayV3Patch: the same replay of a head stored as a quilt patch.
// Named with its digest it is refused; a bare patch id cannot be checked
// against its quilt's id, so it restores what is served, with the one
// warning that names the risk.
func TestReplayV3Patch(t *testing.T) {
	t.Parallel()
	agents, b, _ := quiltAgents(t, 1)
	a := agents[0]
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(a.brain, "system.md"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("the older brain\n")
	older := takeAll(t, b, agents)[0]
	write("the newer brain\n")
	newer := takeAll(t, b, agents)[0]
	ref, err := headref.Parse(newer.BlobID)
	if err != nil || !ref.Bound || !ref.IsPatch() {
		t.Fatalf("the head %q (%v): want a quilt patch named with its digest", newer.BlobID, err)
	}
	var buf bytes.Buffer
	if _, err := a.p.Store.Stream(t.Context(), headref.ID(older.BlobID), &buf, 0); err != nil {
		t.Fatal(err)
	}
	a.srv.Forge(ref.ID, buf.Bytes())

	dir := filepath.Join(t.TempDir(), "restored")
	if _, err := a.p.Restore(t.Context(), newer.BlobID, dir); !errors.Is(err, headref.ErrMismatch) {
		t.Fatalf("restore of the replayed patch: %v", err)
	}
	gone(t, dir)

	// The aggregator honest again, the same pipeline restores the newer
	// brain: the patch it was served is not kept for range reads (a kept
	// lie answered every retry of a fleet take-over until the process
	// ended).
	a.srv.Forge(ref.ID, nil)
	r, err := a.p.Restore(t.Context(), newer.BlobID, dir)
	if err != nil || r.BundleHash != newer.BundleHash {
		t.Fatalf("restore once the aggregator is honest: %v (bundle %s, want %s)", err, r.BundleHash, newer.BundleHash)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	a.srv.Forge(ref.ID, buf.Bytes())
	a.p.Store.(interface{ Forget() }).Forget() // the honest patch was kept

	r, err = a.p.Restore(t.Context(), ref.ID, dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.BundleHash != older.BundleHash || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "named without its digest") {
		t.Fatalf("bare patch id: restored %s (older %s), warnings %q", r.BundleHash, older.BundleHash, r.Warnings)
	}
	t.Logf("warning: %s", r.Warnings[0])
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
// by the store's blob id check, and refused too.
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

	if _, err := p.Restore(t.Context(), newer.BlobID, dir); !errors.Is(err, headref.ErrMismatch) ||
		!strings.Contains(err.Error(), "served other bytes than the blob id names") {
		t.Fatalf("replayed v2 blob: %v", err)
	}
	gone(t, dir)
	if _, err := p.ReadLock(t.Context(), newer.BlobID); !errors.Is(err, headref.ErrMismatch) {
		t.Errorf("the lock of a replayed v2 blob: %v", err)
	}

	f.srv.Forge(newer.BlobID, nil)
	r, err := p.Restore(t.Context(), newer.BlobID, filepath.Join(t.TempDir(), "genuine"))
	if err != nil || r.BundleHash != newer.BundleHash || len(r.Warnings) != 0 {
		t.Fatalf("genuine v2 blob: %v; %s, warnings %q", err, r.BundleHash, r.Warnings)
	}
}
