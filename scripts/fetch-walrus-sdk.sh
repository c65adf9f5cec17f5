#!/usr/bin/env bash
# Installs Walrus's own blob encoder and quilt layout for the
# internal/redstuff cross-checks into .deps/walrus/ (git-ignored), pinned
# exactly: @mysten/walrus-wasm@0.3.0 (walrus-core's RS2 encoder compiled to
# WebAssembly: plain JavaScript and a .wasm file, nothing built here),
# @mysten/walrus@1.2.13 and its peer @mysten/sui@2.33.1, with the whole
# dependency tree of internal/redstuff/testdata/sdk/package-lock.json.
set -euo pipefail
exec "$(dirname "$0")/npm-ci-pinned.sh" internal/redstuff/testdata/sdk .deps/walrus node_modules/@mysten/walrus-wasm/package.json
