#!/usr/bin/env bash
# Installs those of the Debian packages named that are not installed yet (apt-get, through sudo
# when not root), saying which on one line; nothing when all are there. scripts/setup.sh,
# scripts/bench_deps.sh and scripts/wheel.sh use it.
#   scripts/apt_missing.sh WHO PACKAGE...      (WHO starts the line: "WHO: installing ...")
set -euo pipefail
who=$1
shift
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -gt 0 ] || exit 0
echo "$who: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
