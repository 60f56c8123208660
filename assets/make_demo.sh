#!/bin/sh
# Records assets/demo.db, the dashboard's demo recording: examples/oversubscribed.py (8 DataLoader
# workers doing CPU-heavy samples, re-created every epoch) under `stallscope run`. On a machine
# with few cores the workers wait in the run queue and every epoch pays for new workers, so the
# recording shows data stalls, queue-depth drops, worker contention and two recommendations.
# Then takes docs/images/dashboard.png from it (needs Xvfb, or a display).
# docs/images/dashboard.png in the tree was taken from the assets/demo.db in the tree.
#
#   assets/make_demo.sh [BUILD_DIR]     (default: build)
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
bin="$build/bin/stallscope"
rm -f assets/demo.db assets/demo.db-wal assets/demo.db-shm
"$bin" run -q -o assets/demo.db -- python3 examples/oversubscribed.py --workers 8 --epochs 3 --batches 40
chmod 0644 assets/demo.db  # recordings are private by default; this one ships with the sources
ls -l assets/demo.db

# The screenshot: the whole run, the mouse on a worker's fetch to show a batch's life.
if [ -z "${DISPLAY:-}" ] && command -v Xvfb >/dev/null; then
  Xvfb :97 -screen 0 1600x1000x24 -nolisten tcp >/dev/null 2>&1 &
  xvfb=$!
  trap 'kill $xvfb' EXIT
  sleep 1
  export DISPLAY=:97
fi
# DEMO_MOUSE: where the pointer rests (x,y); the default lands on a fetch of worker 2 in the second
# epoch of the recording made here. Check the picture and move it if the run came out differently.
"$bin" ui --screenshot docs/images/dashboard.png --layout-dump /tmp/stallscope-demo-layout.json \
  --mouse "${DEMO_MOUSE:-533,285}" assets/demo.db
ls -l docs/images/dashboard.png
