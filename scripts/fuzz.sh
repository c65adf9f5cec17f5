#!/usr/bin/env bash
# Runs every Go fuzz target in the module for $1 (default 30s) each. The
# committed seed corpora in testdata/fuzz run on every `go test` anyway.
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-30s}
# Extraction creates files per input: keep them in memory and bound
# minimisation, or the fuzzer spends its time shrinking one input.
export TMPDIR=${TMPDIR:-/dev/shm}
fail=0
for pkg in $(go list ./...); do
	for f in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "== $pkg $f ($t)"
		if ! go test -run '^$' -fuzz "^$f\$" -fuzztime "$t" -fuzzminimizetime 3s "$pkg"; then
			fail=1
		fi
	done
done
exit $fail
