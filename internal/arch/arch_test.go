package arch

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// A layer is a rank and a rule for imports inside it. A package imports
// (outside its tests) only packages of lower layers, and of its own layer
// as the layer's lateral rule allows.
type layer struct {
	name    string // its row in docs/design.md §1.1's table
	rank    int
	lateral lateralRule
}

// lateralRule says which imports a layer allows between its own packages.
type lateralRule int

const (
	noLateral     lateralRule = iota // none
	listedLateral                    // the edges the lateral table lists
	anyLateral                       // any
)

// The layers, bottom up (docs/design.md §1.1).
var (
	// leaves: one mechanism each, importing only the few leaves lateral
	// lists for them (fsys, the one walker and name policy; secretfile).
	leafLayer = layer{"leaves", 1, listedLateral}
	// clients, servers and formats: a client of one outside system (or
	// its local stand-in), or one file or wire format. They build on
	// each other only along the edges lateral lists, never on the
	// pipeline or anything above it.
	formatLayer = layer{"clients, servers, formats", 2, listedLateral}
	// pipeline: snapshot, the one path between a brain and a blob.
	pipelineLayer = layer{"pipeline", 3, noLateral}
	// pointer: the one owner of an agent's head and where it is
	// published. Beside the pipeline: neither imports the other.
	pointerLayer = layer{"pointer", 3, noLateral}
	// fleet: one node's place in a fleet (etcd: lease, fence, ownership,
	// assignment, hand-off order, fleet heads). Beside the pipeline and
	// the pointer: what it drives (agents, heads) it declares as
	// interfaces, which the daemon and compose implement.
	fleetLayer = layer{"fleet", 3, noLateral}
	// agent: one brain's decisions.
	agentLayer = layer{"agent", 4, noLateral}
	// composition: compose builds every command's services from a
	// configuration; devnet builds the local world (chain, Walrus, Seal
	// key servers, keys, a configuration). Neither imports the other.
	compositionLayer = layer{"composition", 5, noLateral}
	// services: the daemon and the drill, which never import each other.
	serviceLayer = layer{"services", 6, noLateral}
	// commands: hermesd and hermesd-devnet.
	commandLayer = layer{"commands", 7, noLateral}
	// tools: developer programs (benchmarks, the scale run, testnet
	// helpers). Nothing but another tool imports them.
	toolLayer = layer{"tools", 8, anyLateral}
	// test support: harnesses shared by tests. Only test files import
	// them (checked below), so no binary carries them.
	testLayer = layer{"test support", 8, noLateral}
	// checks: packages with no code whose tests check the repository
	// (this one; the sample configurations).
	checkLayer = layer{"checks", 9, noLateral}
)

// layers lists every layer, in the order of design.md's table.
var layers = []layer{leafLayer, formatLayer, pipelineLayer, pointerLayer, fleetLayer, agentLayer, compositionLayer,
	serviceLayer, commandLayer, toolLayer, testLayer, checkLayer}

// placement puts every package of the module in a layer. A pattern ending
// in "/..." places a directory and everything below it. A package that is
// in none fails TestEveryPackageIsPlaced until it is added here (and to
// the same layer's row of docs/design.md §1.1), and so does an entry that
// names no package any more.
var placement = map[string]layer{
	"internal/atomicfile": leafLayer,
	"internal/backoff":    leafLayer,
	"internal/cipher":     leafLayer,
	"internal/diskspace":  leafLayer,
	"internal/exitcode":   leafLayer,
	"internal/ensname":    leafLayer,
	"internal/fsys":       leafLayer,
	"internal/gcpace":     leafLayer,
	"internal/hash":       leafLayer,
	"internal/headref":    leafLayer,
	"internal/redact":     leafLayer,
	"internal/redstuff":   leafLayer,
	"internal/secretfile": leafLayer,
	"internal/sqlite":     leafLayer,
	"internal/tarball":    leafLayer,
	"internal/walruscost": leafLayer,

	"internal/bundlelock":  formatLayer,
	"internal/config":      formatLayer,
	"internal/devchain":    formatLayer,
	"internal/devetcd":     formatLayer,
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
	"internal/pointer":  pointerLayer,
	"internal/fleet":    fleetLayer,
	"internal/agent":    agentLayer,

	"internal/compose": compositionLayer,
	"internal/devnet":  compositionLayer,

	"internal/daemon": serviceLayer,
	"internal/drill":  serviceLayer,

	"cmd/hermesd":        commandLayer,
	"cmd/hermesd-devnet": commandLayer,

	"scripts/...":    toolLayer,
	"testnet/ethkey": toolLayer,

	"internal/fleettest":   testLayer,
	"internal/nodetest":    testLayer,
	"internal/pointertest": testLayer,
	"internal/smallfstest": testLayer,
	"internal/wait":        testLayer,
	"internal/walrustest":  testLayer,
	"internal/systemdunit": testLayer,

	"internal/arch": checkLayer,
	"configs":       checkLayer,
	"deploy":        checkLayer,
}

// lateral is the order inside the two layers whose packages may build on
// each other: package → the packages of its own layer it may import. An
// import inside the layer that is not listed fails TestLayering, and an
// entry no package needs any more fails TestLateralEdgesAreCurrent, so
// the table is always today's edges.
var lateral = map[string][]string{
	// Leaves: fsys is the one directory walk, name policy, overlay and
	// path trust (owners, links, system directories); hash, tarball and
	// sqlite walk with it, secretfile applies its ownership rule, and
	// cipher reads its key files through secretfile.
	"internal/cipher":     {"internal/secretfile"},
	"internal/hash":       {"internal/fsys"},
	"internal/headref":    nil,
	"internal/redact":     nil,
	"internal/redstuff":   {"internal/walruscost"},
	"internal/secretfile": {"internal/fsys"},
	"internal/sqlite":     {"internal/fsys"},
	"internal/tarball":    {"internal/fsys"},

	// Clients, servers and formats: a handover carries a v3 agent key and
	// head and reads its age identity as a configured secret file; the
	// cost ledger is a file of the agent's state directory; sealserver
	// serves seal's key protocol.
	"internal/handover":   {"internal/config", "internal/repo"},
	"internal/ledger":     {"internal/state"},
	"internal/sealserver": {"internal/seal"},
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
// against the layers of place and the lateral edges of lat, and returns
// one line per forbidden import.
func violations(deps map[string][]string, place map[string]layer, lat map[string][]string) []string {
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
			case ld.rank < lp.rank:
			case ld != lp:
				out = append(out, fmt.Sprintf("%s (%s) imports %s (%s): the two layers do not import each other", p, lp.name, d, ld.name))
			case lp.lateral == noLateral:
				out = append(out, fmt.Sprintf("%s imports %s: %s packages do not import each other", p, d, lp.name))
			case lp.lateral == listedLateral && !slices.Contains(lat[p], d):
				out = append(out, fmt.Sprintf("%s imports %s, an edge inside %s that lateral does not list (allowed: %v)", p, d, lp.name, lat[p]))
			}
		}
	}
	return out
}

// lateralProblems returns one line per entry of lat that is no import of
// deps any more, or that joins packages place does not put in the same
// layer with listed lateral edges.
func lateralProblems(deps map[string][]string, place map[string]layer, lat map[string][]string) []string {
	var out []string
	for _, p := range keys(lat) {
		lp, _ := layerOf(place, p)
		for _, d := range lat[p] {
			ld, _ := layerOf(place, d)
			switch {
			case lp != ld || lp.lateral != listedLateral:
				out = append(out, fmt.Sprintf("lateral lists %s → %s, which are not two packages of one layer with listed edges", p, d))
			case !slices.Contains(deps[p], d):
				out = append(out, fmt.Sprintf("lateral lists %s → %s, which %s no longer imports: remove the entry", p, d, p))
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
		t.Errorf("%s is in no layer: add it to placement in internal/arch/arch_test.go and to its layer's row in docs/design.md §1.1", p)
	}
	for _, p := range stale {
		t.Errorf("placement names %s, which is no package (deleted or moved?): remove or update the entry", p)
	}
}

func TestLayering(t *testing.T) {
	for _, v := range violations(modulePackages(t), placement, lateral) {
		t.Error(v)
	}
}

func TestLateralEdgesAreCurrent(t *testing.T) {
	for _, v := range lateralProblems(modulePackages(t), placement, lateral) {
		t.Error(v)
	}
}

// TestPlacementChecks shows the checks at work on a made-up module: an
// unplaced package and a stale entry are reported, and so is every kind
// of forbidden import, a new lateral edge among them, and a listed edge
// that is gone.
func TestPlacementChecks(t *testing.T) {
	place := map[string]layer{
		"internal/fsys":    leafLayer,
		"internal/hash":    leafLayer,
		"internal/walrus":  formatLayer,
		"internal/quilt":   formatLayer,
		"internal/state":   formatLayer,
		"internal/ledger":  formatLayer,
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
		"internal/quilt":   {"internal/state"},
		"internal/state":   nil,
		"internal/ledger":  {"internal/state"},
		"internal/agent":   nil,
		"internal/compose": {"internal/devnet", "internal/harness"},
		"internal/devnet":  nil,
		"internal/harness": {"internal/compose", "scripts/a"},
		"internal/newpkg":  {"internal/fsys"},
		"scripts/a":        {"scripts/a/b", "internal/compose"},
		"scripts/a/b":      {"internal/fsys"},
	}
	lat := map[string][]string{
		"internal/hash":   {"internal/fsys"},
		"internal/ledger": {"internal/state"},
		"internal/walrus": {"internal/state"},
		"internal/agent":  {"internal/compose"},
	}
	missing, stale := unplaced(keys(deps), place)
	if !slices.Equal(missing, []string{"internal/newpkg"}) || !slices.Equal(stale, []string{"internal/gone"}) {
		t.Errorf("unplaced = %v, %v; want [internal/newpkg], [internal/gone]", missing, stale)
	}
	want := []string{
		"internal/compose imports internal/devnet: composition packages do not import each other",
		"internal/compose imports internal/harness, test support: only tests may",
		"internal/fsys imports internal/hash, an edge inside leaves that lateral does not list (allowed: [])",
		"internal/harness (test support) imports scripts/a (tools): the two layers do not import each other",
		"internal/hash (leaves) imports internal/walrus (clients, servers, formats), which is above it",
		"internal/quilt imports internal/state, an edge inside clients, servers, formats that lateral does not list (allowed: [])",
		"internal/walrus (clients, servers, formats) imports internal/agent (agent), which is above it",
	}
	if got := violations(deps, place, lat); !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	want = []string{
		"lateral lists internal/agent → internal/compose, which are not two packages of one layer with listed edges",
		"lateral lists internal/walrus → internal/state, which internal/walrus no longer imports: remove the entry",
	}
	if got := lateralProblems(deps, place, lat); !slices.Equal(got, want) {
		t.Errorf("lateralProblems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
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
// build their services through compose, not through each other.
func TestTopBuildsThroughComposition(t *testing.T) {
	m := modulePackages(t)
	for _, pkg := range []string{"internal/daemon", "internal/drill", "cmd/hermesd"} {
		if !slices.Contains(m[pkg], "internal/compose") {
			t.Errorf("%s does not build its services through internal/compose", pkg)
		}
	}
}
