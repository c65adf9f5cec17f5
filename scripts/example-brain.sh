#!/usr/bin/env bash
# Builds the example brain that `make run` protects: the text files of
# examples/brain plus a small SQLite memory.db created from memory.sql (the
# binary database is generated here, never committed). Output: $1 (default
# .devnet/seed). Existing output is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.devnet/seed}
if [ -s "$out/memory.db" ]; then
	exit 0
fi
if ! command -v sqlite3 >/dev/null; then
	echo "example-brain: installing sqlite3 (needed to create memory.db)" >&2
	if [ "$(id -u)" = 0 ]; then
		apt-get update -qq && apt-get install -y -qq sqlite3 >/dev/null
	else
		sudo apt-get update -qq && sudo apt-get install -y -qq sqlite3 >/dev/null
	fi
fi
mkdir -p "$(dirname "$out")"
tmp=$(mktemp -d "$(dirname "$out")/.seed.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp -R examples/brain/. "$tmp/"
rm -f "$tmp/memory.sql"
sqlite3 "$tmp/memory.db" < examples/brain/memory.sql >/dev/null
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "example brain ready in $out"
