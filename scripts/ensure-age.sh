#!/usr/bin/env bash
# Makes sure the age CLI (https://age-encryption.org) is on PATH: the
# handover interop tests decrypt hermesd's handovers with it and encrypt
# files for hermesd to open. Installs the Debian package only when age is
# missing; fails with one clear line when it cannot.
set -euo pipefail
if command -v age >/dev/null && command -v age-keygen >/dev/null; then
	exit 0
fi
if ! command -v apt-get >/dev/null; then
	echo "ensure-age: the age CLI is required for the tests; install it (https://age-encryption.org)" >&2
	exit 1
fi
sudo=
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || { echo "ensure-age: age is missing and installing it needs root: apt-get install -y age" >&2; exit 1; }
	sudo=sudo
fi
$sudo apt-get install -y -q age >/dev/null || {
	$sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q age >/dev/null
} || { echo "ensure-age: apt-get install age failed; install the age CLI and retry" >&2; exit 1; }
command -v age >/dev/null || { echo "ensure-age: age is still not on PATH after installing" >&2; exit 1; }
echo "installed $(age --version 2>/dev/null || echo age)"
