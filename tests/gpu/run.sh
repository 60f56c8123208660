#!/usr/bin/env bash
# GPU checks, for a machine with an NVIDIA GPU and a CUDA build of PyTorch:
#   tests/gpu/run.sh
# Builds stallscope, records tests/gpu/gpu_train.py in four variants under `stallscope run` (and
# the profiler variant again with STALLSCOPE_GPU=off, and three again in light GPU mode), and
# checks kernels, copies (pinned vs pageable), NVTX ranges, clock alignment, the attributed stall
# causes, torch.profiler beside stallscope, and light mode's stall against full mode's (check.py);
# then the reference loader's device path against the memory-reuse races
# (loader_race.py). STALLSCOPE_GPU_RECORDINGS=DIR keeps the recordings there.
# CTest runs it under the label `gpu` only when asked (ctest -L gpu); CI skips it.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
PY=${PYTHON:-python3}
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "tests/gpu: no GPU (torch.cuda.is_available() is false); nothing to check"
  exit 0
fi
BUILD=${STALLSCOPE_BUILD:-$ROOT/build}
[ -x "$BUILD/bin/stallscope" ] || { cmake -S . -B "$BUILD" -G Ninja >/dev/null && cmake --build "$BUILD"; }
REC=${STALLSCOPE_GPU_RECORDINGS:-$(mktemp -d)}
mkdir -p "$REC"
record() {  # record NAME VARIANT [ENV=VALUE...]: NAME.db, NAME.out and NAME.err in $REC
  local name=$1 variant=$2 rc=0
  shift 2
  env "$@" "$BUILD/bin/stallscope" run -q -o "$REC/$name.db" -- "$PY" tests/gpu/gpu_train.py --variant "$variant" \
    >"$REC/$name.out" 2>"$REC/$name.err" || rc=$?
  cat "$REC/$name.out"
  cat "$REC/$name.err" >&2
  return $rc
}
rm -f "$REC"/*.db
for v in pageable pinned compute profiler; do record "$v" "$v"; done
record profiler-gpu-off profiler STALLSCOPE_GPU=off
for v in pageable pinned compute; do record "$v-light" "$v" STALLSCOPE_GPU=light; done
"$PY" tests/gpu/check.py "$BUILD" "$REC"
if ls "$BUILD"/lib/_stallscope_loader*.so >/dev/null 2>&1; then
  "$PY" tests/gpu/loader_race.py --build "$BUILD"
else
  echo "tests/gpu: loader_race skipped: this build has no reference loader (STALLSCOPE_BUILD_LOADER=OFF)"
fi
