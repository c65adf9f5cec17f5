package snapshot_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/repo"
	"github.com/hermesd/hermesd/internal/snapshot"
)

// TestV3Rekey: an agent handed to a new owner restores the seller's head
// with the seller's agent key (ReadKeys), and its next snapshot is a full
// one under the buyer's own key whose parent is that head; the seller's
// key does not read it, history reaches through both keys, and the
// snapshot after it is incremental again (runtime: under 2 s).
func TestV3Rekey(t *testing.T) {
	t.Parallel()
	f := newV3Fix(t, 0)
	f.write("system.md", []byte("the seller's agent\n"), 0o644)
	f.write("skills/a.md", randomBytes(1, 200<<10), 0o600)
	s0 := f.take()
	f.write("memory/notes.md", []byte("learned\n"), 0o640)
	s1 := f.take()
	sellerKey := repo.DeriveAgentKey([repo.KeySize]byte(f.key), f.p.Identity)

	buyerMaster, _ := cipher.GenerateKey()
	buyerKey := repo.DeriveAgentKey([repo.KeySize]byte(buyerMaster), f.p.Identity)
	root := t.TempDir()
	buyer := f.pipeline()
	buyer.Key, buyer.AgentKey, buyer.ReadKeys = buyerMaster, &buyerKey, []repo.AgentKey{sellerKey}
	buyer.BrainDir, buyer.CacheDir = filepath.Join(root, "brain"), filepath.Join(root, "state")
	if err := os.MkdirAll(buyer.CacheDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := buyer.KeyID(); got != buyerKey.ID() || got == sellerKey.ID() {
		t.Fatalf("buyer KeyID %q, want its own %q", got, buyerKey.ID())
	}
	restored, err := buyer.Restore(t.Context(), s1.BlobID, buyer.BrainDir)
	if err != nil {
		t.Fatalf("buyer restores the seller's head: %v", err)
	}
	if restored.BundleHash != s1.BundleHash {
		t.Fatalf("restored bundle hash %s, want %s", restored.BundleHash, s1.BundleHash)
	}
	sameTree(t, f.brain, buyer.BrainDir)
	// As the agent does after a restore: the lock names the restored head.
	lockPath := filepath.Join(buyer.BrainDir, bundlelock.FileName)
	restored.Lock.Uploaded(bundlelock.LineageEntry{BlobID: s1.BlobID, BundleHash: s1.BundleHash.String(), Size: restored.BlobSize})
	if err := bundlelock.Write(lockPath, restored.Lock); err != nil {
		t.Fatal(err)
	}

	take := func() snapshot.Result {
		t.Helper()
		hr, err := hash.Dir(t.Context(), buyer.BrainDir, hash.Options{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := buyer.Take(t.Context(), snapshot.Input{Want: hr.Digest, Known: hash.Files(hr.Files)})
		if err != nil {
			t.Fatalf("buyer take: %v", err)
		}
		return res
	}
	rk := take()
	if !rk.Rekey {
		t.Error("the first snapshot over the seller's head is not a re-key")
	}
	if rk.Uploaded < 200<<10 {
		t.Errorf("the re-key uploaded %d bytes: it reused the seller's packs", rk.Uploaded)
	}
	r, err := buyer.OpenV3(t.Context(), rk.BlobID)
	if err != nil {
		t.Fatal(err)
	}
	if c := r.Commit(); c.Parent != headref.ID(s1.BlobID) || c.ParentFormat != repo.ParentV3 || c.KeyID != buyerKey.ID() {
		t.Errorf("re-key commit: parent %s (%s), key id %s; want %s (v3), %s", c.Parent, c.ParentFormat, c.KeyID, s1.BlobID, buyerKey.ID())
	}
	// The seller's key reads nothing the buyer writes.
	if _, err := f.pipeline().Restore(t.Context(), rk.BlobID, filepath.Join(t.TempDir(), "x")); !errors.Is(err, repo.ErrWrongAgent) {
		t.Errorf("the seller restores the buyer's re-key head: %v", err)
	}
	hist, err := buyer.History(t.Context(), rk.BlobID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 3 || hist[1].BlobID != s1.BlobID || hist[2].BlobID != s0.BlobID || hist[2].Status != "restorable" {
		t.Errorf("buyer's history %+v, want the re-key, then the seller's two snapshots", hist)
	}
	f2 := filepath.Join(buyer.BrainDir, "memory", "notes.md")
	if err := os.WriteFile(f2, []byte("learned by the buyer\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	next := take()
	if next.Rekey || next.Uploaded >= rk.Uploaded/2 {
		t.Errorf("the snapshot after the re-key: rekey %v, %d bytes uploaded (re-key %d)", next.Rekey, next.Uploaded, rk.Uploaded)
	}
	if _, err := f.pipeline().Restore(t.Context(), next.BlobID, filepath.Join(t.TempDir(), "y")); !errors.Is(err, repo.ErrWrongAgent) {
		t.Errorf("the seller restores the buyer's later head: %v", err)
	}
}

// TestV3HandoverKeyIsOneAgents: the key a handover carries reads its own
// agent only: another agent of the seller (derived from the same master
// key) stays unreadable to it.
func TestV3HandoverKeyIsOneAgents(t *testing.T) {
	t.Parallel()
	f := newV3Fix(t, 0)
	f.p.Identity = "beta.hermes.eth"
	f.write("system.md", []byte("beta, never handed over\n"), 0o644)
	beta := f.take()
	alphaKey := repo.DeriveAgentKey([repo.KeySize]byte(f.key), "alpha.hermes.eth")
	for _, identity := range []string{"alpha.hermes.eth", "beta.hermes.eth"} {
		own, _ := cipher.GenerateKey()
		p := f.pipeline()
		p.Identity, p.Others, p.Key, p.ReadKeys = identity, nil, own, []repo.AgentKey{alphaKey}
		dir := filepath.Join(t.TempDir(), "brain")
		if _, err := p.Restore(t.Context(), beta.BlobID, dir); !errors.Is(err, repo.ErrWrongAgent) {
			t.Errorf("as %s with alpha's handed-over key, beta's snapshot: %v", identity, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the refused restore wrote %s", dir)
		}
	}
}
