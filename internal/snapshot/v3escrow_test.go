package snapshot_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/seal"
	"github.com/hermesd/hermesd/internal/snapshot"
)

// TestV3Escrow: a v3 snapshot written with Escrow is restored by a
// pipeline holding no key at all, only the Sui requester, through two of
// three key servers; one is not enough, and a head without escrow says so.
func TestV3Escrow(t *testing.T) {
	t.Parallel()
	w := newSealWorld(t, nil)
	f := newFixture(t)
	p := f.pipeline("alpha.eth")
	p.Format, p.Seal, p.Escrow = snapshot.FormatV3, w.sealing(w.user, snapshot.SealPolicy{}), true
	res, err := p.Take(t.Context(), snapshot.Input{Want: f.hash()})
	if err != nil {
		t.Fatal(err)
	}

	cold := func() *snapshot.Pipeline {
		c := f.pipeline("alpha.eth")
		c.Format, c.Key, c.Seal = snapshot.FormatV3, cipher.Key{}, w.sealing(w.user, snapshot.SealPolicy{})
		return c
	}
	w.only(0, 2)
	c := cold()
	rec, err := c.RecoverAgentKey(t.Context(), res.BlobID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.KeyID != p.KeyID() || rec.EscrowBytes < 300 || rec.EscrowBytes > 1024 || len(rec.Servers) != 2 {
		t.Fatalf("recovered %+v, want key id %s from servers 0 and 2", rec, p.KeyID())
	}
	t.Logf("escrow %d bytes, recovered in %s", rec.EscrowBytes, rec.Took)
	target := filepath.Join(t.TempDir(), "brain")
	got, err := c.Restore(t.Context(), res.BlobID, target)
	if err != nil {
		t.Fatal(err)
	}
	h, err := hash.Dir(t.Context(), target, hash.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got.BundleHash != res.BundleHash || h.Digest != res.BundleHash {
		t.Fatalf("restored %s (re-hashed %s), want %s", got.BundleHash, h.Digest, res.BundleHash)
	}

	w.only(1)
	if _, err := cold().RecoverAgentKey(t.Context(), res.BlobID); !errors.Is(err, seal.ErrNotEnoughKeys) {
		t.Fatalf("one key server: %v", err)
	}
	w.only(0, 1, 2)

	// Without escrow the head pack has none to offer.
	q := f.pipeline("beta.eth")
	q.Format = snapshot.FormatV3
	plain, err := q.Take(t.Context(), snapshot.Input{Want: f.hash()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cold().RecoverAgentKey(t.Context(), plain.BlobID); !errors.Is(err, snapshot.ErrNoEscrow) {
		t.Fatalf("a head without escrow: %v", err)
	}
}
