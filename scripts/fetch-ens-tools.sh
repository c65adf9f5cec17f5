#!/usr/bin/env bash
# Installs the pinned npm tools of hermesd's ENS tests into .deps/ens-tools/
# (git-ignored), with the whole dependency tree of
# internal/devchain/contracts/package-lock.json (npm ci, no install scripts):
#   solc@0.8.28   compiles the project's own contracts in
#                 internal/devchain/contracts/*.sol (a Universal-Resolver-
#                 compatible contract, an on-chain wildcard resolver, test
#                 resolvers) into .deps/ens/ beside the fetched ENS artifacts;
#   viem@2.57.20  the peer resolver the ENS tests compare hermesd with.
# Third-party code and compiled bytecode are never committed; only the
# sources and the lockfile are.
# Idempotent: installs only when the lockfile changed, compiles only when a
# source changed.
set -euo pipefail
cd "$(dirname "$0")/.."
src=internal/devchain/contracts
tools=.deps/ens-tools
out=.deps/ens
command -v npm >/dev/null || { echo "fetch-ens-tools: npm is required (apt-get install npm)" >&2; exit 1; }
mkdir -p .deps
# Serialize concurrent runs (test binaries of several packages may start it).
exec 9>.deps/ens-tools.lock
if command -v flock >/dev/null; then flock 9; fi
if ! { [ -f "$tools/node_modules/solc/package.json" ] && [ -f "$tools/node_modules/viem/package.json" ] &&
	cmp -s "$src/package-lock.json" "$tools/package-lock.json"; }; then
	tmp=$(mktemp -d .deps/ens-tools.tmp.XXXXXX)
	trap 'rm -rf "$tmp"' EXIT
	cp "$src/package.json" "$src/package-lock.json" "$tmp/"
	(cd "$tmp" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
	rm -rf "$tools"
	mv "$tmp" "$tools"
	trap - EXIT
	echo "fetched solc@0.8.28 and viem@2.57.20 into $tools"
fi
# Compile when any artifact is missing or was built from another source.
stale=0
for f in "$src"/*.sol; do
	name=$(basename "$f" .sol)
	want=$(sha256sum "$f" | cut -d' ' -f1)
	if ! grep -q "\"sourceSha256\": \"$want\"" "$out/$name.json" 2>/dev/null; then
		stale=1
	fi
done
if [ "$stale" = 1 ]; then
	node "$src/compile.mjs" "$tools" "$out"
fi
