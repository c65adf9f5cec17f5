package arch

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// listed is one package of a `go list -deps` answer.
type listed struct {
	path string
	cgo  bool   // has cgo files in this configuration
	err  string // why it cannot be built in this configuration
}

// binaryDeps is the dependency closure of the command in pkg (relative to
// the module root) as `go list -deps` computes it for a build with
// CGO_ENABLED=cgo: what the linker would link.
func binaryDeps(t *testing.T, pkg, cgo string) []listed {
	t.Helper()
	goTool, err := goCommand()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goTool, "list", "-e", "-deps", "-f",
		"{{.ImportPath}}\t{{if .CgoFiles}}cgo{{end}}\t{{with .Error}}{{.}}{{end}}", "./"+pkg)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo, "GOFLAGS=-mod=readonly")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pkg, err, stderr.Bytes())
	}
	var deps []listed
	for line := range strings.Lines(string(out)) {
		f := strings.SplitN(strings.TrimSuffix(line, "\n"), "\t", 3)
		if len(f) != 3 {
			t.Fatalf("go list: unexpected line %q", line)
		}
		deps = append(deps, listed{path: f[0], cgo: f[1] == "cgo", err: strings.ReplaceAll(f[2], "\n", " ")})
	}
	if len(deps) < 100 {
		t.Fatalf("go list %s: only %d packages", pkg, len(deps))
	}
	return deps
}

// notInTheDaemon are the packages (and everything below them) that the
// daemon never links: the in-process chain (ours and go-ethereum's: the
// EVM, state, the chain database, the node, sync), the C libraries the
// chain's database compresses with, and etcd's server (its raft, its
// bbolt database, the embedded member). The daemon reaches a chain over
// JSON-RPC and etcd through its client only; hermesd-devnet runs the
// local ones.
var notInTheDaemon = []string{
	module + "internal/devchain",
	module + "internal/devetcd",
	"go.etcd.io/etcd/server/v3",
	"go.etcd.io/etcd/pkg/v3",
	"go.etcd.io/raft/v3",
	"go.etcd.io/bbolt",
	module + "internal/devnet",
	module + "cmd/hermesd-devnet",
	"github.com/ethereum/go-ethereum/core", // but core/types: see allowedBelow
	"github.com/ethereum/go-ethereum/ethdb",
	"github.com/ethereum/go-ethereum/trie",
	"github.com/ethereum/go-ethereum/triedb",
	"github.com/ethereum/go-ethereum/node",
	"github.com/ethereum/go-ethereum/eth",
	"github.com/ethereum/go-ethereum/miner",
	"github.com/ethereum/go-ethereum/consensus",
	"github.com/ethereum/go-ethereum/ethclient/simulated",
	"github.com/cockroachdb/pebble",
	"github.com/DataDog/zstd",
	"github.com/syndtr/goleveldb",
	"go.etcd.io/etcd/server",
	"go.etcd.io/raft",
	"go.etcd.io/bbolt",
}

// allowedBelow are the exceptions under notInTheDaemon: transaction and
// receipt types, which a JSON-RPC client needs.
var allowedBelow = []string{"github.com/ethereum/go-ethereum/core/types"}

// cgoWhenEnabled are the only packages with cgo the daemon may link when
// it is built with cgo (a plain `go build` where a C compiler exists): the
// standard library's resolver and user lookup, and go-ethereum's libsecp256k1,
// each with a pure-Go fallback that `make build` (CGO_ENABLED=0) uses.
var cgoWhenEnabled = []string{"runtime/cgo", "net", "os/user", "github.com/ethereum/go-ethereum/crypto/secp256k1"}

func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// TestDaemonCarriesNoEVM: the daemon's binary links only what it runs. Its
// dependency closure, as go list computes it, holds none of the local
// chain (internal/devchain, internal/devnet, go-ethereum's core, state, vm,
// databases, node) nor etcd's server, builds without cgo, and with cgo links no C beyond
// cgoWhenEnabled. A new import that drags the EVM or a C library back in
// fails here, naming the package.
func TestDaemonCarriesNoEVM(t *testing.T) {
	for _, cgo := range []string{"0", "1"} {
		found := map[string][]string{} // forbidden root -> what is linked under it
		for _, d := range binaryDeps(t, "cmd/hermesd", cgo) {
			for _, bad := range notInTheDaemon {
				if under(d.path, bad) && !slices.ContainsFunc(allowedBelow, func(ok string) bool { return under(d.path, ok) }) {
					found[bad] = append(found[bad], d.path)
				}
			}
			if d.err != "" {
				t.Errorf("CGO_ENABLED=%s: cmd/hermesd cannot be built: %s: %s", cgo, d.path, d.err)
			}
			if d.cgo && (cgo == "0" || !slices.Contains(cgoWhenEnabled, d.path)) {
				t.Errorf("CGO_ENABLED=%s: cmd/hermesd links C through %s", cgo, d.path)
			}
		}
		for _, bad := range notInTheDaemon {
			if p := found[bad]; len(p) > 0 {
				t.Errorf("CGO_ENABLED=%s: cmd/hermesd links %d package(s) under %s, which only the devnet may: %s",
					cgo, len(p), bad, strings.Join(p[:min(len(p), 3)], ", "))
			}
		}
	}
}

// TestDevnetBuildsWithoutCgo: make builds the devnet without cgo too (its
// chain database falls back to pure-Go zstd), so a first make run compiles
// no C; a dependency without that fallback fails here.
func TestDevnetBuildsWithoutCgo(t *testing.T) {
	deps := binaryDeps(t, "cmd/hermesd-devnet", "0")
	for _, d := range deps {
		if d.err != "" || d.cgo {
			t.Errorf("CGO_ENABLED=0: cmd/hermesd-devnet cannot be built: %s: %s", d.path, d.err)
		}
	}
	if !slices.ContainsFunc(deps, func(d listed) bool { return d.path == module+"internal/devchain" }) {
		t.Error("cmd/hermesd-devnet does not link internal/devchain: is the list right?")
	}
}
