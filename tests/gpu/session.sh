#!/usr/bin/env bash
# Everything a GPU machine is needed for, in one command, for a session that is lent one for a few
# minutes:
#   tests/gpu/session.sh [OUT_DIR]
# 1. builds stallscope there (Release, no tests; build-gpu/), unless STALLSCOPE_BUILD names a build;
# 2. tests/gpu/run.sh: the GPU checks (full and light mode);
# 3. build-gpu/bin/cupti_cost: CUPTI's cost per CUDA operation, mode by mode (bench/cupti_cost.cc);
# 4. bench/gpu_overhead_bench.py: full, light and off against plain and torch.profiler.
# Each step's output goes to OUT_DIR (default: $OUT, else a temporary folder) and to the terminal;
# a step that fails does not stop the others. Exit status: the number of steps that failed.
#
# Build dependencies the machine may lack (SQLite's, CLI11's and nlohmann-json's headers) can travel
# as Debian packages: `tests/gpu/session.sh --fetch-deps` here downloads them into .gpu-deps/
# (ignored by git); carry that folder and this script unpacks them into /tmp/gpu-deps there.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
if [ "${1:-}" = "--fetch-deps" ]; then
  mkdir -p .gpu-deps && cd .gpu-deps && apt-get download libcli11-dev nlohmann-json3-dev libsqlite3-dev libsqlite3-0 &&
    echo "tests/gpu/session.sh: packages in .gpu-deps/; carry .gpu-deps to the GPU machine"
  exit $?
fi
OUTDIR=${1:-${OUT:-$(mktemp -d)}}
mkdir -p "$OUTDIR"
PY=${PYTHON:-python3}
failed=0
step() {  # step NAME SECONDS COMMAND...: runs it under a time limit, logs to OUTDIR/NAME.log
  local name=$1 limit=$2
  shift 2
  echo "=== $name ($(date -u +%H:%M:%S))"
  timeout "$limit" "$@" 2>&1 | tee "$OUTDIR/$name.log"
  local rc=${PIPESTATUS[0]}
  echo "=== $name: exit $rc"
  [ "$rc" -eq 0 ] || failed=$((failed + 1))
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -2
BUILD=${STALLSCOPE_BUILD:-$ROOT/build-gpu}
if [ ! -x "$BUILD/bin/stallscope" ]; then
  prefix=()
  if [ -d .gpu-deps ]; then
    mkdir -p /tmp/gpu-deps
    for f in .gpu-deps/*.deb; do dpkg -x "$f" /tmp/gpu-deps; done
    prefix=(-DCMAKE_PREFIX_PATH=/tmp/gpu-deps/usr -DCMAKE_INCLUDE_PATH=/tmp/gpu-deps/usr/include
      -DCMAKE_LIBRARY_PATH=/tmp/gpu-deps/usr/lib/x86_64-linux-gnu)
  fi
  # Without the reference loader's libraries (libjpeg-turbo, libarchive) it is left out:
  # everything but tests/gpu/loader_race.py still runs.
  step build 400 bash -c "cmake -S . -B '$BUILD' -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTALLSCOPE_BUILD_TESTS=OFF \
    ${prefix[*]} >/dev/null 2>'$OUTDIR/configure.err' || { echo 'configuring without the reference loader:'; \
    tail -3 '$OUTDIR/configure.err'; rm -rf '$BUILD'; cmake -S . -B '$BUILD' -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DSTALLSCOPE_BUILD_TESTS=OFF -DSTALLSCOPE_BUILD_LOADER=OFF ${prefix[*]} >/dev/null; } && cmake --build '$BUILD'"
fi
export STALLSCOPE_BUILD=$BUILD
# cupti_cost opens libcupti itself: where the loader does not find it, the copy beside torch.
if [ -z "${STALLSCOPE_CUPTI:-}" ] && ! ldconfig -p | grep -q libcupti.so; then
  STALLSCOPE_CUPTI=$("$PY" -c 'import glob, os, site
for d in site.getsitepackages():
    for p in sorted(glob.glob(os.path.join(d, "nvidia", "**", "libcupti.so*"), recursive=True)):
        print(p); raise SystemExit' 2>/dev/null)
  [ -n "$STALLSCOPE_CUPTI" ] && export STALLSCOPE_CUPTI && echo "libcupti: $STALLSCOPE_CUPTI"
fi
step gpu_checks 300 env STALLSCOPE_GPU_RECORDINGS="$OUTDIR/recordings" tests/gpu/run.sh
step cupti_cost 240 "$BUILD/bin/cupti_cost" --rounds 3 --json "$OUTDIR/cupti_cost.json"
step gpu_overhead 300 "$PY" bench/gpu_overhead_bench.py --build "$BUILD" --reps 3
echo "tests/gpu/session.sh: $failed step(s) failed; logs in $OUTDIR"
exit "$failed"
