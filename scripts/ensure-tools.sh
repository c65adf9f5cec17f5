#!/usr/bin/env bash
# Makes sure the programs the tests drive as real peers are on PATH, and
# installs the Debian package of each one that is missing (nothing is
# installed when all are present): the age CLI (the handover interop tests
# decrypt hermesd's handovers with it) and python3 with its sqlite3 module
# (a real SQLite writer for the live-database tests), GNU time (the
# peak memory of the processes the attack test runs), and the sqlite3 CLI
# and curl, which the documentation's commands use (make run's example
# brain; the first hour's health and metrics), run as written by the
# tests. Node and npm are
# needed already to fetch the pinned npm packages. Fails with one clear
# line when it cannot install.
set -euo pipefail
missing=()
command -v age >/dev/null && command -v age-keygen >/dev/null || missing+=(age)
python3 -c 'import sqlite3' >/dev/null 2>&1 || missing+=(python3)
[ -x /usr/bin/time ] || missing+=(time)
command -v sqlite3 >/dev/null || missing+=(sqlite3)
command -v curl >/dev/null || missing+=(curl)
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null; then
	echo "ensure-tools: the tests need ${missing[*]}; install them with your package manager" >&2
	exit 1
fi
sudo=
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || { echo "ensure-tools: installing ${missing[*]} needs root: apt-get install -y ${missing[*]}" >&2; exit 1; }
	sudo=sudo
fi
$sudo apt-get install -y -q "${missing[@]}" >/dev/null || {
	$sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q "${missing[@]}" >/dev/null
} || { echo "ensure-tools: apt-get install ${missing[*]} failed; install them and retry" >&2; exit 1; }
command -v age >/dev/null || { echo "ensure-tools: age is still not on PATH after installing" >&2; exit 1; }
python3 -c 'import sqlite3' || { echo "ensure-tools: python3 with sqlite3 is still missing after installing" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "ensure-tools: /usr/bin/time is still missing after installing" >&2; exit 1; }
command -v sqlite3 >/dev/null || { echo "ensure-tools: sqlite3 is still not on PATH after installing" >&2; exit 1; }
command -v curl >/dev/null || { echo "ensure-tools: curl is still not on PATH after installing" >&2; exit 1; }
echo "installed ${missing[*]}"
