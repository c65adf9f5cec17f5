package devchain

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The project's compiled contracts are used only when they were compiled
// from the sources committed beside this package, and ENS's
// OffchainResolver only as the pinned npm build.
func TestCCIPArtifactsChecked(t *testing.T) {
	a, err := NeedCCIPArtifacts()
	if err != nil {
		t.Fatal(err)
	}
	for _, art := range []Artifact{a.OffchainResolver, a.UniversalResolver, a.WildcardResolver, a.URCheckResolver, a.LoopResolver} {
		if len(art.Bytecode) == 0 || len(art.DeployedBytecode) == 0 {
			t.Errorf("%s: no bytecode", art.Name)
		}
	}
	if _, ok := a.UniversalResolver.ABI.Methods["resolveWithGateways"]; !ok {
		t.Error("the Universal Resolver has no resolveWithGateways")
	}
	copyDir := func(t *testing.T) string {
		dir := t.TempDir()
		for _, f := range []string{OffchainResolverFile, UniversalResolverFile, WildcardResolverFile, URCheckResolverFile, LoopResolverFile} {
			b, err := os.ReadFile(filepath.Join(a.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	t.Run("stale compile", func(t *testing.T) {
		dir := copyDir(t)
		p := filepath.Join(dir, WildcardResolverFile)
		b, _ := os.ReadFile(p)
		i := strings.Index(string(b), `"sourceSha256": "`) + len(`"sourceSha256": "`)
		b[i] ^= 1
		os.WriteFile(p, b, 0o644)
		if _, err := LoadCCIPArtifacts(dir); err == nil || !strings.Contains(err.Error(), "another version of contracts/WildcardResolver.sol") {
			t.Fatalf("stale: %v", err)
		}
	})
	t.Run("another OffchainResolver build", func(t *testing.T) {
		dir := copyDir(t)
		p := filepath.Join(dir, OffchainResolverFile)
		b, _ := os.ReadFile(p)
		s := strings.Replace(string(b), `"bytecode": "0x60`, `"bytecode": "0x61`, 1)
		os.WriteFile(p, []byte(s), 0o644)
		if _, err := LoadCCIPArtifacts(dir); err == nil || !strings.Contains(err.Error(), "not the pinned build") {
			t.Fatalf("other build: %v", err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		dir := copyDir(t)
		os.Remove(filepath.Join(dir, LoopResolverFile))
		if _, err := LoadCCIPArtifacts(dir); err == nil || !strings.Contains(err.Error(), "fetch-ens-tools.sh") {
			t.Fatalf("missing: %v", err)
		}
	})
}
