#!/usr/bin/env bash
# Installs the npm packages a testdata package.json names, with the whole
# dependency tree of its package-lock.json (npm ci), into DEST (under the
# git-ignored .deps/). Third-party code is never committed; only the
# lockfile is. Idempotent: does nothing when the installed tree matches the
# lockfile (MARK is a file the install must have). Concurrent runs (two test
# binaries may start it at once) are serialized.
#   usage: scripts/npm-ci-pinned.sh SRC_DIR DEST_DIR MARK
set -euo pipefail
cd "$(dirname "$0")/.."
src=$1 dest=$2 mark=$3
installed() { [ -f "$dest/$mark" ] && cmp -s "$src/package-lock.json" "$dest/package-lock.json"; }
installed && exit 0
command -v npm >/dev/null || { echo "$0: npm is required (apt-get install npm)" >&2; exit 1; }
mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock"
if command -v flock >/dev/null; then flock 9; fi
installed && exit 0
tmp=$(mktemp -d "$dest.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp "$src/package.json" "$src/package-lock.json" "$tmp/"
# --ignore-scripts: no install scripts run.
(cd "$tmp" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "installed $src/package-lock.json into $dest"
