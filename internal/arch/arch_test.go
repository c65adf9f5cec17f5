package arch

import (
	"go/build"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/hermesd/hermesd/"

// imports returns the non-test imports of the package in dir that belong to
// this module, as paths relative to the module root.
func imports(t *testing.T, rel string) []string {
	t.Helper()
	p, err := build.ImportDir(filepath.Join("..", "..", rel), 0)
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	var out []string
	for _, imp := range p.Imports {
		if strings.HasPrefix(imp, module) {
			out = append(out, strings.TrimPrefix(imp, module))
		}
	}
	return out
}

// closure returns every module package rel depends on.
func closure(t *testing.T, rel string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		for _, imp := range imports(t, p) {
			if !seen[imp] {
				seen[imp] = true
				walk(imp)
			}
		}
	}
	walk(rel)
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// leaves maps each leaf package to the only packages of this module it
// may import: fsys, the shared directory walk, name policy and overlay, is
// itself a leaf that imports nothing of ours; hash, tarball and sqlite
// build on it.
var leaves = map[string][]string{
	"internal/fsys":       nil,
	"internal/cipher":     {"internal/secretfile"},
	"internal/secretfile": nil,
	"internal/backoff":    nil,
	"internal/diskspace":  nil,
	"internal/atomicfile": nil,
	"internal/hash":       {"internal/fsys"},
	"internal/tarball":    {"internal/fsys"},
	"internal/sqlite":     {"internal/fsys"},
	"internal/redact":     nil,
}

func TestLeavesImportNothingOfOurs(t *testing.T) {
	for leaf, allowed := range leaves {
		for _, dep := range imports(t, leaf) {
			if !slices.Contains(allowed, dep) {
				t.Errorf("%s is a leaf package but imports %s (allowed: %v)", leaf, dep, allowed)
			}
		}
	}
}

// TestOneWalkerOneNamePolicy: hash, tarball and the v3 builder share
// fsys's walk, name policy and overlay instead of keeping copies, so the
// hasher, the tar writer, the extractor and the v3 snapshot cannot drift
// apart again (a name one accepts and another refuses, a file one reads
// live and another through a frozen copy). It fails if one stops
// importing fsys.
func TestOneWalkerOneNamePolicy(t *testing.T) {
	for _, pkg := range []string{"internal/hash", "internal/tarball", "internal/repo"} {
		if deps := imports(t, pkg); !slices.Contains(deps, "internal/fsys") {
			t.Errorf("%s does not use internal/fsys (imports %v)", pkg, deps)
		}
	}
}

func TestWalrusAndENSAreIndependent(t *testing.T) {
	if deps := closure(t, "internal/walrus"); slices.Contains(deps, "internal/ens") {
		t.Errorf("internal/walrus depends on internal/ens: %v", deps)
	}
	if deps := closure(t, "internal/ens"); slices.Contains(deps, "internal/walrus") {
		t.Errorf("internal/ens depends on internal/walrus: %v", deps)
	}
}

// The layers, bottom up: leaf and client packages; the snapshot pipeline;
// the agent; the composition root (compose); and on top the daemon, the
// drill and the CLI, which depend on compose and never on each other.
var (
	top         = []string{"cmd/hermesd", "internal/daemon", "internal/drill"}
	composition = "internal/compose"
	below       = []string{
		"internal/fsys", "internal/hash", "internal/tarball", "internal/cipher", "internal/walrus", "internal/localwalrus",
		"internal/ens", "internal/devchain", "internal/receipts", "internal/bundlelock", "internal/snapshot",
		"internal/state", "internal/config", "internal/watch", "internal/backoff", "internal/diskspace",
		"internal/atomicfile", "internal/agent", "internal/repo", "internal/seal", "internal/sealserver",
		"internal/sqlite", "internal/redact", "internal/handover", "internal/secretfile",
	}
)

func TestOrchestrationIsOnTop(t *testing.T) {
	for _, pkg := range below {
		for _, dep := range closure(t, pkg) {
			if dep == composition || slices.Contains(top, dep) {
				t.Errorf("%s imports %s, which is above it", pkg, dep)
			}
		}
	}
	for _, dep := range closure(t, composition) {
		if slices.Contains(top, dep) {
			t.Errorf("compose imports %s: composition sits below the daemon, the drill and the CLI", dep)
		}
	}
}

// TestTopLayersDependOnCompositionOnly: the drill and the daemon build
// their services through compose, and never import each other (the
// daemon used to be the factory every command depended on).
func TestTopLayersDependOnCompositionOnly(t *testing.T) {
	for _, pair := range [][2]string{
		{"internal/drill", "internal/daemon"},
		{"internal/daemon", "internal/drill"},
	} {
		if deps := closure(t, pair[0]); slices.Contains(deps, pair[1]) {
			t.Errorf("%s depends on %s", pair[0], pair[1])
		}
	}
	for _, pkg := range top {
		if !slices.Contains(imports(t, pkg), composition) {
			t.Errorf("%s does not build its services through %s", pkg, composition)
		}
	}
}
