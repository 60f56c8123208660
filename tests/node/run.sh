#!/usr/bin/env bash
# The wheel on a node as a user gets it: a minimal Debian root (mmdebstrap --variant=minbase with
# python3 and python3-venv only: no compiler, no -dev package, no X11, no OpenGL), entered with
# chroot as an ordinary user, who installs the wheel into a fresh venv and uses it on real training
# (tests/node/inside.sh). The root sees nothing of this machine: not the build tree, not its
# library folders, so a file of either that stallscope needed would fail the run here.
#   Debian 12 (Python 3.11): torch 2.13.0 installs; every recorder command on real training.
#   Debian 13 (Python 3.13): torch 2.13.0 has only a multi-GB CUDA build there, so the checks
#     that need no torch (install, modules, report and export of Debian 12's recording, ui, run).
# The roots (tarballs) and pip's files are cached in $STALLSCOPE_NODE_CACHE
# (default ${XDG_CACHE_HOME:-~/.cache}/stallscope/node); each run unpacks a fresh root.
#   tests/node/run.sh WHEEL [SUITE...]      (default suites: bookworm trixie)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -ge 1 ] && [ -f "$1" ] || { echo "usage: tests/node/run.sh WHEEL [bookworm|trixie ...]: make one with scripts/wheel.sh" >&2; exit 2; }
WHEEL=$(realpath "$1")
shift
SUITES=("$@")
[ ${#SUITES[@]} -gt 0 ] || SUITES=(bookworm trixie)
[ "$(id -u)" = 0 ] || { echo "tests/node/run.sh: needs root (mmdebstrap, chroot, mounts)" >&2; exit 2; }
CACHE=${STALLSCOPE_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stallscope/node}
MIRROR=http://deb.debian.org/debian
mkdir -p "$CACHE"
exec 8>"$CACHE/.lock"
flock 8
START=$SECONDS
say() { printf 'node: %s  [%ds]\n' "$1" $((SECONDS - START)); }

if ! command -v mmdebstrap >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null
fi

# What the user brings to the node, made here: JPEGs (an ImageFolder of 3 classes, 48 images).
IMAGES="$CACHE/images"
if [ ! -f "$IMAGES/.done" ]; then
  python3 - "$IMAGES" <<'EOF'
import os, sys, numpy as np
from PIL import Image
root, rng = sys.argv[1], np.random.default_rng(0)
for c in range(3):
    os.makedirs(f"{root}/class{c}", exist_ok=True)
    for i in range(16):
        h, w = rng.integers(80, 240, size=2)
        a = (rng.random((h, w, 3)) * 60 + c * 60).astype(np.uint8)
        Image.fromarray(a).save(f"{root}/class{c}/{i}.jpg", quality=90)
EOF
  touch "$IMAGES/.done"
fi
# pip's files for the node's Python (Debian 12 has 3.11, whose torch 2.13.0 file is on this disk).
if [ ! -f "$CACHE/pip-311/.done" ]; then
  say "pip download torch==2.13.0 numpy (Python 3.11)"
  python3 -m pip download -q -d "$CACHE/pip-311" torch==2.13.0 numpy
  touch "$CACHE/pip-311/.done"
fi
if [ ! -f "$CACHE/pip-313/.done" ]; then
  say "pip download numpy (Python 3.13)"
  python3 -m pip download -q -d "$CACHE/pip-313" --only-binary=:all: --python-version 3.13 numpy
  touch "$CACHE/pip-313/.done"
fi

# The dashboard from the wheel, where a display and OpenGL are (here: Xvfb and Mesa): it opens the
# demo recording, and its layout (panels, lanes and what they draw) is the build's.
REPO=$(cd "$HERE/../.." && pwd)
BUILD=${STALLSCOPE_BUILD:-$REPO/build}
if command -v xvfb-run >/dev/null; then
  say "the wheel's dashboard under Xvfb"
  V=$(mktemp -d /tmp/stallscope-node-ui.XXXXXX)
  python3 -m venv "$V/venv"
  "$V/venv/bin/pip" install -q --no-deps --no-index --disable-pip-version-check "$WHEEL"
  xvfb-run -a -s "-screen 0 1600x1000x24" "$V/venv/bin/stallscope" ui --screenshot "$V/wheel.png" \
    --layout-dump "$V/wheel.json" "$REPO/assets/demo.db"
  if [ -x "$BUILD/bin/stallscope" ]; then
    xvfb-run -a -s "-screen 0 1600x1000x24" "$BUILD/bin/stallscope" ui --screenshot "$V/build.png" \
      --layout-dump "$V/build.json" "$REPO/assets/demo.db"
    python3 - "$V/wheel.json" "$V/build.json" <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for d in (a, b):
    d.pop("header_stats", None)  # read and analysis times
if a != b:
    sys.exit(f"the wheel's dashboard lays out the demo recording differently from the build's: {a} != {b}")
print(f"node: the wheel's dashboard: {len(a['panels'])} panels, {len(a['lanes'])} lanes, as the build's")
EOF
  fi
  rm -rf "$V"
fi

RECORDING=""
for suite in "${SUITES[@]}"; do
  case $suite in
    bookworm) mode=FULL pip="$CACHE/pip-311" ;;
    trixie) mode=NOTORCH pip="$CACHE/pip-313" ;;
    *) echo "tests/node/run.sh: unknown suite '$suite' (bookworm or trixie)" >&2; exit 2 ;;
  esac
  tarball="$CACHE/$suite.tar"
  if [ ! -f "$tarball" ]; then
    say "making a minimal Debian $suite root"
    # (mmdebstrap picks the output's format by its name: .tar is a tarball)
    mmdebstrap -q --variant=minbase --include=python3,python3-venv "$suite" "$CACHE/$suite.part.tar" "$MIRROR"
    mv "$CACHE/$suite.part.tar" "$tarball"
  fi
  R=$(mktemp -d /tmp/stallscope-node.XXXXXX)
  trap 'rm -rf "$R"' EXIT
  tar -C "$R" -xf "$tarball"
  mkdir -p "$R/opt/check/pip" "$R/opt/out"
  cp "$WHEEL" "$R/opt/check/"
  cp "$pip"/*.whl "$R/opt/check/pip/"
  cp "$HERE"/inside.sh "$HERE"/elf_check.py "$HERE"/train.py "$HERE"/train_jpeg.py "$R/opt/check/"
  cp -r "$IMAGES" "$R/opt/check/images"
  if [ -n "$RECORDING" ]; then
    cp "$RECORDING" "$R/opt/check/run.db"
  else
    # Debian 12 reports a recording of its own (made by `stallscope run` below) as the copied one.
    printf '' >"$R/opt/check/run.db"
  fi
  chroot "$R" useradd -m -u 4242 -s /bin/bash node
  chown 4242:4242 "$R/opt/out"
  chmod -R a+rX "$R/opt/check"
  say "Debian $suite: inside, as user 'node'"
  # A mount namespace of its own: /proc, /dev and a fresh /dev/shm for the root vanish with it.
  status=0
  unshare --mount --fork bash -c '
    set -e
    R=$1; mount --make-rprivate /
    mount -t proc proc "$R/proc"
    mount --rbind /dev "$R/dev"
    mount -t tmpfs -o mode=1777 tmpfs "$R/dev/shm"
    mount -t tmpfs -o mode=1777 tmpfs "$R/tmp"
    exec chroot --userspec=4242:4242 "$R" env -i HOME=/home/node PATH=/usr/bin:/bin LANG=C.UTF-8 \
      bash /opt/check/inside.sh "$2"' _ "$R" "$mode" || status=$?
  if [ -f "$R/opt/out/run.db" ]; then
    RECORDING="$CACHE/bookworm-run.db"
    cp "$R/opt/out/run.db" "$RECORDING"
  fi
  rm -rf "$R"
  trap - EXIT
  [ "$status" = 0 ] || { echo "node: Debian $suite: failed (exit $status)" >&2; exit 1; }
done
say "all suites passed"
