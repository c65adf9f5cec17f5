#!/usr/bin/env bash
# Installs the official Seal TypeScript SDK for the internal/seal interop
# tests into .deps/seal/ (git-ignored), pinned exactly:
#   @mysten/seal@1.4.12 and its peer @mysten/sui@2.33.1, with the whole
#   dependency tree of internal/seal/testdata/sdk/package-lock.json (npm ci).
# Third-party code is never committed; only the lockfile is.
# Idempotent: does nothing when the installed tree matches the lockfile.
set -euo pipefail
cd "$(dirname "$0")/.."
src=internal/seal/testdata/sdk
dest=.deps/seal
if [ -f "$dest/node_modules/@mysten/seal/package.json" ] && cmp -s "$src/package-lock.json" "$dest/package-lock.json"; then
	exit 0
fi
command -v npm >/dev/null || { echo "fetch-seal-sdk: npm is required (apt-get install npm)" >&2; exit 1; }
mkdir -p .deps
# Serialize concurrent runs (two test binaries may start it at once).
exec 9>.deps/seal.lock
if command -v flock >/dev/null; then flock 9; fi
if [ -f "$dest/node_modules/@mysten/seal/package.json" ] && cmp -s "$src/package-lock.json" "$dest/package-lock.json"; then
	exit 0
fi
tmp=$(mktemp -d .deps/seal.tmp.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cp "$src/package.json" "$src/package-lock.json" "$tmp/"
# --ignore-scripts: no install scripts run; the SDK is plain JavaScript.
(cd "$tmp" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "fetched @mysten/seal@1.4.12 and @mysten/sui@2.33.1 into $dest"
