# hermesd developer targets.
#   make run   start the local devnet (chain + Walrus) and hermesd on it with the example brain
#   make fleet the same world with etcd and a fleet of three hermesd nodes sharing its agents
#   make test  the whole test suite (what .ci/run executes)
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
FUZZTIME  ?= 30s
BIN       := bin/hermesd
DEVNET    := bin/hermesd-devnet
GOBUILD    = $(GO) build -trimpath -ldflags '$(LDFLAGS)'

# Everything builds and tests without cgo: the daemon signs and recovers
# with go-ethereum's pure-Go secp256k1 (decred's), the devnet's chain
# database compresses with pure-Go zstd, and a first build compiles no C
# (with cgo it compiled libsecp256k1 and zstd: minutes on 2 cores). Only
# the race detector needs cgo (test). Override with CGO_ENABLED=1.
export CGO_ENABLED ?= 0

.PHONY: build build-devnet run fleet devnet test vet deps devnet-deps seed bench bench-small fuzz lint clean

# build builds the daemon alone: what an operator installs.
build:
	$(GOBUILD) -o $(BIN) ./cmd/hermesd

# build-devnet builds the daemon and the devnet command (the chain, Walrus
# and Seal servers of the local world) in one go build, which shares the
# compile of what they have in common.
build-devnet:
	$(GOBUILD) -o bin/ ./cmd/hermesd ./cmd/hermesd-devnet

# deps fetches what the tests and the devnet need that is not in the Go
# module graph, pinned, into .deps/ (git-ignored): the real ENS contract
# artifacts (npm pack), solc and viem for the ENS tests (npm ci from
# internal/devchain/contracts/package-lock.json; solc compiles the
# project's own resolver contracts there), the official Seal SDK for the
# interop tests (npm ci from internal/seal/testdata/sdk/package-lock.json),
# Walrus's own blob encoder (WASM) and quilt layout for the blob-id
# cross-checks (npm ci from internal/redstuff/testdata/sdk/package-lock.json),
# and the programs the tests drive — the age CLI, python3 (with sqlite3),
# GNU time, and the sqlite3 CLI and curl the documentation's commands use
# (Debian packages, installed only if missing).
deps: devnet-deps
	scripts/fetch-ens-tools.sh
	scripts/fetch-seal-sdk.sh
	scripts/fetch-walrus-sdk.sh
	scripts/ensure-tools.sh

# devnet-deps is what `make run` needs: the ENS artifacts only.
devnet-deps:
	scripts/fetch-ens-artifacts.sh

# seed builds the example brain (with its SQLite memory.db) in .devnet/seed.
seed:
	scripts/example-brain.sh .devnet/seed

# run: the devnet (local chain with the real ENS contracts, local Walrus
# and Seal servers) in one process, and the daemon protecting the example
# brain in .devnet/brains/auditor as its supervised child, talking to it
# over 127.0.0.1. State persists in .devnet; Ctrl-C stops the daemon (after
# its pointer flush), then the devnet.
run: devnet-deps build-devnet seed
	$(DEVNET) -dir .devnet -seed .devnet/seed -- $(BIN) run -config .devnet/hermesd.yml

# fleet: the devnet in .devnet-fleet with an etcd member beside the
# chains, and three daemons (node-1 … node-3, HTTP on 127.0.0.1:9797,
# :9798, :9799), each on its own configuration (.devnet-fleet/node-K.yml),
# state and brain directories, sharing the agents through etcd; their
# lines are prefixed with the node's name. Kill any one of them (its pid is
# printed) and watch its agents move; Ctrl-C stops them all, then the
# world. Docs: docs/fleet.md.
fleet: devnet-deps build-devnet seed
	$(DEVNET) -dir .devnet-fleet -nodes 3 -seed .devnet/seed -- $(BIN) run

# devnet: the same world without the daemon, until Ctrl-C; run, stop and
# drill the daemon against it from another terminal
# (HERMESD_CONFIG=.devnet/hermesd.yml).
devnet: devnet-deps build-devnet seed
	$(DEVNET) -dir .devnet -seed .devnet/seed

# The race detector runs again over the packages with their own
# goroutines (pipelines, watcher, retries, daemon, the fleet node). It needs cgo, so this
# pass also covers go-ethereum's C secp256k1 (receipts, the daemon's
# chain writes), what a plain `go build` with a C compiler links.
RACE_PKGS := ./internal/hash ./internal/tarball ./internal/watch ./internal/walrus \
	./internal/localwalrus ./internal/receipts ./internal/snapshot ./internal/daemon \
	./internal/seal ./internal/sealserver ./internal/fleet

# RACE_SKIP are tests the race pass leaves to the plain pass, which runs
# every test: long CPU-bound loops (blob ids, hashing, SQLite writers over
# minutes of snapshots) that the detector slows some tenfold and that add
# no goroutines the other tests of their package do not run. Under the
# detector they ran 1,069 s of the pass (TestV3Expiry 395 s,
# TestLiveSQLiteBrain 223 s), most of its critical path. The second line:
# fixtures and answers checked one request at a time (store costs, query
# validation, id shapes, the format documents' vectors, the reference
# runtime's lineage, a restore onto a small filesystem), 127 s of the pass
# at 1000-shard blob ids; the server's and the restore's goroutines run
# under the detector in the other tests of their packages.
RACE_SKIP := ^(TestV3Expiry|TestV3SQLitePageEdit|TestV3IndependentReader|TestV3LostIndex|TestLiveSQLiteBrain|TestSpendAccounted|TestSpendAccountedQuilts|TestStoreChargeHeldToFormula|TestLocalwalrusConformance|$\
	TestStoreCost|TestQueryValidation|TestBlobIDShape|TestQuiltStoreCost|TestDedupAndPersistence|TestV3IndependentReaderDocVector|TestReferenceLineage|TestHardLinksFitSmallFilesystem)$$

# The packages whose files differ under -tags purego (assembly with a
# portable fallback) are tested again with the tag, so that the fallback
# runs even where the CPU takes the assembly. The set is computed (go list
# with and without the tag), so a new package with assembly is covered
# without editing a list; every package twice would double the time for
# packages the tag does not change.
PUREGO_FMT := {{.ImportPath}} {{.GoFiles}} {{.CgoFiles}} {{.SFiles}} {{.TestGoFiles}} {{.XTestGoFiles}}

# -timeout: the end-to-end package runs the real binary against devnets
# (its tests run side by side, each on its own devnet); a loaded machine
# must make it slower, not fail it.
test: deps vet
	$(GO) test -count=1 -timeout 30m ./...
	@a=$$($(GO) list -f '$(PUREGO_FMT)' ./...) && b=$$($(GO) list -tags purego -f '$(PUREGO_FMT)' ./...) || exit 1; \
	pkgs=$$(printf '%s\n%s\n' "$$a" "$$b" | sort | uniq -u | cut -d' ' -f1 | sort -u); \
	echo "purego: $${pkgs:-no package differs}"; \
	[ -z "$$pkgs" ] || $(GO) test -count=1 -timeout 30m -tags purego $$pkgs
	CGO_ENABLED=1 $(GO) test -count=1 -timeout 30m -race -skip '$(RACE_SKIP)' $(RACE_PKGS)

# vet is a prerequisite of both test and lint, so `make lint test` (what
# .ci/run executes) vets once.
vet:
	$(GO) vet ./...

# bench prints the performance figures (ratios against openssl and restic
# measured in the same run); it generates ~1.3 GB of datasets in .bench/.
bench: deps
	scripts/bench.sh

# bench-small checks the harness on small datasets (64 MiB, 5,000 files).
bench-small: deps
	BENCH_SCALE=small scripts/bench.sh

# fuzz runs every fuzz target for FUZZTIME each.
fuzz:
	scripts/fuzz.sh $(FUZZTIME)

# staticcheck is pinned; `go run` fetches and builds it once into the
# module cache (no tools.go, no go.mod entry).
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) run $(STATICCHECK) ./...
	# Portability: macOS builds both binaries (portable fallbacks; a
	# developer runs make run there); Windows builds hermesd, which refuses
	# to run with one clear line (cmd/hermesd/platform_windows.go). Each is
	# a cold compile of what it links, so no more than that.
	GOOS=darwin $(GO) build ./cmd/...
	GOOS=windows $(GO) build ./cmd/hermesd

clean:
	rm -rf bin .bench
