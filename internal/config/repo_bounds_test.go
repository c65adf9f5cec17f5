package config

import (
	"testing"

	"github.com/hermesd/hermesd/internal/repo"
)

// TestRepositoryBoundsMatchRepo: the configuration's bounds for format v3
// are the repository's own (config does not import repo).
func TestRepositoryBoundsMatchRepo(t *testing.T) {
	if maxPacks != repo.MaxWriterPacks || minPackSize != repo.MinPackSize {
		t.Fatalf("max_packs ≤ %d and max_blob_size ≥ %d; repo says %d and %d", maxPacks, minPackSize, repo.MaxWriterPacks, repo.MinPackSize)
	}
}
