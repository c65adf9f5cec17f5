#!/usr/bin/env bash
# Fetches the real ENS contract artifacts that the local chain deploys:
#   @ensdomains/ens@0.6.2      build/contracts/ENSRegistry.json
#   @ensdomains/resolver@0.3.1 build/contracts/PublicResolver.json
#   @ensdomains/offchain-resolver-contracts@0.2.1
#                              artifacts/contracts/OffchainResolver.sol/OffchainResolver.json
#                              (ENS's CCIP-read resolver whose gateway signs its answers)
# into DIR (default .deps/ens/ of this checkout, git-ignored; hermesd also
# looks in ~/.cache/hermesd/ens and $HERMESD_ENS_ARTIFACTS).
# Third-party bytecode is never committed.
# Idempotent: does nothing when the files are already there.
set -euo pipefail
if [ $# -gt 0 ]; then
	mkdir -p "$1"
	dest=$(cd "$1" && pwd)
	cd "$(dirname "$0")/.."
else
	cd "$(dirname "$0")/.."
	dest=.deps/ens
fi
if [ -s "$dest/ENSRegistry.json" ] && [ -s "$dest/PublicResolver.json" ] && [ -s "$dest/OffchainResolver.json" ]; then
	exit 0
fi
command -v npm >/dev/null || { echo "fetch-ens-artifacts: npm is required (apt-get install npm)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent @ensdomains/ens@0.6.2 @ensdomains/resolver@0.3.1 @ensdomains/offchain-resolver-contracts@0.2.1 >/dev/null)
mkdir -p "$tmp/ens" "$tmp/resolver" "$tmp/offchain" "$dest"
tar -xzf "$tmp"/ensdomains-ens-0.6.2.tgz -C "$tmp/ens" package/build/contracts/ENSRegistry.json
tar -xzf "$tmp"/ensdomains-resolver-0.3.1.tgz -C "$tmp/resolver" package/build/contracts/PublicResolver.json
tar -xzf "$tmp"/ensdomains-offchain-resolver-contracts-0.2.1.tgz -C "$tmp/offchain" package/artifacts/contracts/OffchainResolver.sol/OffchainResolver.json
cp "$tmp/ens/package/build/contracts/ENSRegistry.json" "$dest/ENSRegistry.json.tmp"
cp "$tmp/resolver/package/build/contracts/PublicResolver.json" "$dest/PublicResolver.json.tmp"
cp "$tmp/offchain/package/artifacts/contracts/OffchainResolver.sol/OffchainResolver.json" "$dest/OffchainResolver.json.tmp"
mv "$dest/OffchainResolver.json.tmp" "$dest/OffchainResolver.json"
mv "$dest/ENSRegistry.json.tmp" "$dest/ENSRegistry.json"
mv "$dest/PublicResolver.json.tmp" "$dest/PublicResolver.json"
echo "fetched ENS artifacts into $dest"
