# hermesd developer targets. `make test` is the README's test command and
# what .ci/run executes.
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
FUZZTIME  ?= 30s
BIN       := bin/hermesd

.PHONY: build test deps fuzz lint clean

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/hermesd

# deps fetches what the tests need that is not in the Go module graph: the
# real ENS contract artifacts (npm pack, git-ignored).
deps:
	scripts/fetch-ens-artifacts.sh

test: deps
	$(GO) vet ./...
	$(GO) test -count=1 ./...

# fuzz runs every fuzz target for FUZZTIME each.
fuzz:
	scripts/fuzz.sh $(FUZZTIME)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

clean:
	rm -rf bin .bench
