#!/usr/bin/env bash
# The long runs of docs/robustness.md ("Long runs"), which CI runs shortened: a fork storm of 1,000
# epochs with non-persistent workers, and a 10-minute soak of tiny batches at about 100,000 events/s.
# Each checks the training's outcome against a run without stallscope and, from /proc, that the
# training process and the launcher keep the same descriptors and threads and flat memory; the
# soak prints its event rate, drops and database bytes per hour. Needs a build (scripts/test.sh
# makes one) and torch.
#   scripts/soak.sh [SOAK_SECONDS] [STORM_EPOCHS]     defaults: 600 1000
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
if [ ! -x build/bin/stallscope ]; then
  echo "soak: build/bin/stallscope is not built; run scripts/test.sh (or cmake --build build) first" >&2
  exit 1
fi
STALLSCOPE_SOAK_S=${1:-600} STALLSCOPE_STORM_EPOCHS=${2:-1000} \
  exec python3 -m pytest -s -q -p no:cacheprovider tests/python/test_long_runs.py
