#!/usr/bin/env bash
# Installs the official Seal TypeScript SDK for the internal/seal interop
# tests into .deps/seal/ (git-ignored), pinned exactly:
#   @mysten/seal@1.4.12 and its peer @mysten/sui@2.33.1, with the whole
#   dependency tree of internal/seal/testdata/sdk/package-lock.json (npm ci).
# The SDK is plain JavaScript.
set -euo pipefail
exec "$(dirname "$0")/npm-ci-pinned.sh" internal/seal/testdata/sdk .deps/seal node_modules/@mysten/seal/package.json
