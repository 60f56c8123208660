#!/usr/bin/env bash
# GPU checks, for a machine with an NVIDIA GPU and a CUDA build of PyTorch:
#   tests/gpu/run.sh
# Builds stallscope, records tests/gpu/gpu_train.py in three variants under `stallscope run`,
# and checks kernels, copies (pinned vs pageable) and the attributed stall causes (check.py).
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
OUT=$(mktemp -d)
for v in pageable pinned compute; do
  "$BUILD/bin/stallscope" run -q -o "$OUT/$v.db" -- "$PY" tests/gpu/gpu_train.py --variant "$v"
done
"$PY" tests/gpu/check.py "$BUILD" "$OUT"
