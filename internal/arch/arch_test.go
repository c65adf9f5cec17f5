package arch

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

const module = "github.com/hermesd/hermesd/"

// A layer is a rank and a rule for imports inside it. A package imports
// (outside its tests) only packages of lower layers, and of its own layer
// where sameLayer allows it.
type layer struct {
	name      string
	rank      int
	sameLayer bool
}

// The layers, bottom up (docs/design.md §1).
var (
	// leaf: one concept each, importing only the few leaves `leaves`
	// allows (fsys, the one walker and name policy; secretfile).
	leafLayer = layer{"leaf", 1, true}
	// clients, servers and formats: a client of one outside system (or
	// its local stand-in), or one file or wire format. They may build on
	// each other (sealserver on seal, handover on repo and config), never
	// on the pipeline or anything above it.
	formatLayer = layer{"client/format", 2, true}
	// pipeline: snapshot, the one path between a brain and a blob.
	pipelineLayer = layer{"pipeline", 3, false}
	// agent: one brain's decisions.
	agentLayer = layer{"agent", 4, false}
	// composition: compose builds every command's services from a
	// configuration; devnet builds the local world (chain, Walrus, Seal
	// key servers, keys, a configuration). Neither imports the other.
	compositionLayer = layer{"composition", 5, false}
	// services: the daemon and the drill, which never import each other.
	serviceLayer = layer{"service", 6, false}
	// binary: the CLI, on top of everything the daemon runs.
	binaryLayer = layer{"binary", 7, false}
	// tools: developer programs (benchmarks, the scale run, testnet
	// helpers). Nothing but another tool imports them.
	toolLayer = layer{"tool", 8, true}
	// test support: harnesses shared by tests. Only test files import
	// them (checked below), so no binary carries them.
	testLayer = layer{"test support", 8, false}
	// checks: packages with no code whose tests check the repository
	// (this one; the sample configurations).
	checkLayer = layer{"checks", 9, false}
)

// placement puts every package of the module in a layer. A pattern ending
// in "/..." places a directory and everything below it. A package that is
// in none fails TestEveryPackageIsPlaced until it is added here, and so
// does an entry that names no package any more.
var placement = map[string]layer{
	"internal/atomicfile": leafLayer,
	"internal/backoff":    leafLayer,
	"internal/cipher":     leafLayer,
	"internal/diskspace":  leafLayer,
	"internal/fsys":       leafLayer,
	"internal/hash":       leafLayer,
	"internal/headref":    leafLayer,
	"internal/redact":     leafLayer,
	"internal/secretfile": leafLayer,
	"internal/sqlite":     leafLayer,
	"internal/tarball":    leafLayer,
	"internal/walruscost": leafLayer,

	"internal/bundlelock":  formatLayer,
	"internal/config":      formatLayer,
	"internal/devchain":    formatLayer,
	"internal/ens":         formatLayer,
	"internal/handover":    formatLayer,
	"internal/ledger":      formatLayer,
	"internal/localwalrus": formatLayer,
	"internal/quilt":       formatLayer,
	"internal/receipts":    formatLayer,
	"internal/repo":        formatLayer,
	"internal/seal":        formatLayer,
	"internal/sealserver":  formatLayer,
	"internal/state":       formatLayer,
	"internal/walrus":      formatLayer,
	"internal/watch":       formatLayer,

	"internal/snapshot": pipelineLayer,
	"internal/agent":    agentLayer,

	"internal/compose": compositionLayer,
	"internal/devnet":  compositionLayer,

	"internal/daemon": serviceLayer,
	"internal/drill":  serviceLayer,

	"cmd/hermesd":        binaryLayer,
	"cmd/hermesd-devnet": binaryLayer,

	"scripts/...":    toolLayer,
	"testnet/ethkey": toolLayer,

	"internal/pointertest": testLayer,
	"internal/smallfstest": testLayer,
	"internal/nodetest":    testLayer,
	"internal/walrustest":  testLayer,

	"internal/arch": checkLayer,
	"configs":       checkLayer,
}

// leaves maps each leaf package to the only packages of this module it
// may import: fsys, the shared directory walk, name policy, overlay and
// path trust (owners, links, system directories), is itself a leaf that
// imports nothing of ours; hash, tarball and sqlite build on it, and so
// does secretfile (the ownership rule); cipher reads its key files through
// secretfile.
var leaves = map[string][]string{
	"internal/atomicfile": nil,
	"internal/backoff":    nil,
	"internal/cipher":     {"internal/secretfile"},
	"internal/diskspace":  nil,
	"internal/fsys":       nil,
	"internal/hash":       {"internal/fsys"},
	"internal/headref":    nil,
	"internal/redact":     nil,
	"internal/secretfile": {"internal/fsys"},
	"internal/sqlite":     {"internal/fsys"},
	"internal/tarball":    {"internal/fsys"},
	"internal/walruscost": nil,
}

// pkgs lists the module's packages and their non-test imports of the
// module, as paths relative to the module root, from `go list ./...` (the
// go command that runs the tests puts itself on PATH).
var pkgs = sync.OnceValues(func() (map[string][]string, error) {
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = filepath.Join("..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list ./...: %v\n%s", err, stderr.String())
	}
	return parseList(out), nil
})

// parseList reads go list lines "PKG IMPORT..." into package → imports of
// this module, relative to the module root.
func parseList(out []byte) map[string][]string {
	m := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !strings.HasPrefix(f[0], module) {
			continue
		}
		var deps []string
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module) {
				deps = append(deps, strings.TrimPrefix(imp, module))
			}
		}
		m[strings.TrimPrefix(f[0], module)] = deps
	}
	return m
}

func modulePackages(t *testing.T) map[string][]string {
	t.Helper()
	m, err := pkgs()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m["internal/arch"]; !ok {
		t.Fatalf("go list did not list this module's packages: %v", keys(m))
	}
	return m
}

func keys(m map[string][]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// layerOf returns the layer place gives pkg, if any.
func layerOf(place map[string]layer, pkg string) (layer, bool) {
	if l, ok := place[pkg]; ok {
		return l, true
	}
	for pat, l := range place {
		if dir, ok := strings.CutSuffix(pat, "/..."); ok && (pkg == dir || strings.HasPrefix(pkg, dir+"/")) {
			return l, true
		}
	}
	return layer{}, false
}

// unplaced returns the packages of pkgs that place puts in no layer, and
// the entries of place that match no package (one deleted or moved), both
// sorted.
func unplaced(pkgs []string, place map[string]layer) (missing, stale []string) {
	for _, p := range pkgs {
		if _, ok := layerOf(place, p); !ok {
			missing = append(missing, p)
		}
	}
	for pat := range place {
		if dir, ok := strings.CutSuffix(pat, "/..."); ok {
			if !slices.ContainsFunc(pkgs, func(p string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }) {
				stale = append(stale, pat)
			}
		} else if !slices.Contains(pkgs, pat) {
			stale = append(stale, pat)
		}
	}
	slices.Sort(missing)
	slices.Sort(stale)
	return missing, stale
}

// violations checks every import of deps (package → non-test imports)
// against the layers of place and the leaf rules of leaves, and returns
// one line per forbidden import.
func violations(deps map[string][]string, place map[string]layer, leaves map[string][]string) []string {
	var out []string
	for _, p := range keys(deps) {
		lp, ok := layerOf(place, p)
		if !ok {
			continue // reported by unplaced
		}
		for _, d := range deps[p] {
			ld, ok := layerOf(place, d)
			switch {
			case !ok:
			case ld == testLayer:
				out = append(out, fmt.Sprintf("%s imports %s, test support: only tests may", p, d))
			case ld.rank > lp.rank:
				out = append(out, fmt.Sprintf("%s (%s) imports %s (%s), which is above it", p, lp.name, d, ld.name))
			case ld.rank == lp.rank && (!lp.sameLayer || ld != lp):
				out = append(out, fmt.Sprintf("%s imports %s: %s packages do not import each other", p, d, lp.name))
			case lp == leafLayer && !slices.Contains(leaves[p], d):
				out = append(out, fmt.Sprintf("%s is a leaf package but imports %s (allowed: %v)", p, d, leaves[p]))
			}
		}
	}
	return out
}

// TestEveryPackageIsPlaced: the package set comes from go list, so a new
// package is checked from the day it appears, and fails here until it is
// put in a layer.
func TestEveryPackageIsPlaced(t *testing.T) {
	missing, stale := unplaced(keys(modulePackages(t)), placement)
	for _, p := range missing {
		t.Errorf("%s is in no layer: add it to placement in internal/arch/arch_test.go (docs/design.md §1)", p)
	}
	for _, p := range stale {
		t.Errorf("placement names %s, which is no package (deleted or moved?): remove or update the entry", p)
	}
	for p := range leaves {
		if l, _ := layerOf(placement, p); l != leafLayer {
			t.Errorf("leaves lists %s, which placement does not make a leaf", p)
		}
	}
}

func TestLayering(t *testing.T) {
	for _, v := range violations(modulePackages(t), placement, leaves) {
		t.Error(v)
	}
}

// TestPlacementChecks shows the checks at work on a made-up module: an
// unplaced package and a stale entry are reported, and so is every kind
// of forbidden import.
func TestPlacementChecks(t *testing.T) {
	place := map[string]layer{
		"internal/fsys":    leafLayer,
		"internal/hash":    leafLayer,
		"internal/walrus":  formatLayer,
		"internal/agent":   agentLayer,
		"internal/compose": compositionLayer,
		"internal/devnet":  compositionLayer,
		"internal/harness": testLayer,
		"internal/gone":    formatLayer,
		"scripts/...":      toolLayer,
	}
	deps := map[string][]string{
		"internal/fsys":    {"internal/hash"},
		"internal/hash":    {"internal/fsys", "internal/walrus"},
		"internal/walrus":  {"internal/agent"},
		"internal/agent":   nil,
		"internal/compose": {"internal/devnet", "internal/harness"},
		"internal/devnet":  nil,
		"internal/harness": {"internal/compose"},
		"internal/newpkg":  {"internal/fsys"},
		"scripts/a":        {"scripts/a/b", "internal/compose"},
		"scripts/a/b":      {"internal/fsys"},
	}
	missing, stale := unplaced(keys(deps), place)
	if !slices.Equal(missing, []string{"internal/newpkg"}) || !slices.Equal(stale, []string{"internal/gone"}) {
		t.Errorf("unplaced = %v, %v; want [internal/newpkg], [internal/gone]", missing, stale)
	}
	want := []string{
		"internal/compose imports internal/devnet: composition packages do not import each other",
		"internal/compose imports internal/harness, test support: only tests may",
		"internal/fsys is a leaf package but imports internal/hash (allowed: [])",
		"internal/hash (leaf) imports internal/walrus (client/format), which is above it",
		"internal/walrus (client/format) imports internal/agent (agent), which is above it",
	}
	got := violations(deps, place, map[string][]string{"internal/hash": {"internal/fsys"}})
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestOneWalkerOneNamePolicy: hash, tarball and the v3 builder share
// fsys's walk, name policy and overlay instead of keeping copies, so the
// hasher, the tar writer, the extractor and the v3 snapshot cannot drift
// apart again (a name one accepts and another refuses, a file one reads
// live and another through a frozen copy). It fails if one stops
// importing fsys.
func TestOneWalkerOneNamePolicy(t *testing.T) {
	m := modulePackages(t)
	for _, pkg := range []string{"internal/hash", "internal/tarball", "internal/repo"} {
		if !slices.Contains(m[pkg], "internal/fsys") {
			t.Errorf("%s does not use internal/fsys (imports %v)", pkg, m[pkg])
		}
	}
}

// closure returns every module package pkg depends on.
func closure(m map[string][]string, pkg string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		for _, d := range m[p] {
			if !seen[d] {
				seen[d] = true
				walk(d)
			}
		}
	}
	walk(pkg)
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// TestWalrusAndENSAreIndependent: the two clients share a layer but
// never meet, not even through another package.
func TestWalrusAndENSAreIndependent(t *testing.T) {
	m := modulePackages(t)
	if deps := closure(m, "internal/walrus"); slices.Contains(deps, "internal/ens") {
		t.Errorf("internal/walrus depends on internal/ens: %v", deps)
	}
	if deps := closure(m, "internal/ens"); slices.Contains(deps, "internal/walrus") {
		t.Errorf("internal/ens depends on internal/walrus: %v", deps)
	}
}

// TestTopBuildsThroughComposition: the daemon, the drill and the CLI
// build their services through compose (the daemon used to be the
// factory every command depended on).
func TestTopBuildsThroughComposition(t *testing.T) {
	m := modulePackages(t)
	for _, pkg := range []string{"internal/daemon", "internal/drill", "cmd/hermesd"} {
		if !slices.Contains(m[pkg], "internal/compose") {
			t.Errorf("%s does not build its services through internal/compose", pkg)
		}
	}
}
