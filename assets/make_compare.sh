#!/bin/sh
# Takes docs/images/compare.png, the compare view's picture: examples/slow_getitem.py recorded twice
# under `stallscope run`, with no DataLoader workers (A: every batch loaded inside next(), the loop
# stalls ~80 % of the time) and with 2 workers (B: loading overlaps the steps, about 2.4x the
# samples/s), then `stallscope ui A.db B.db --screenshot`. The recordings go to a temporary folder
# (pass KEEP=DIR to keep them there). Needs Xvfb, or a display.
#
#   assets/make_compare.sh [BUILD_DIR]     (default: build)
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
bin="$build/bin/stallscope"
dir=${KEEP:-$(mktemp -d)}
mkdir -p "$dir"
rm -f "$dir/workers0.db" "$dir/workers2.db"
# 2 x 150 steps: enough for `stallscope compare` to give a verdict (50 steps and 2 s at least).
"$bin" run -q -o "$dir/workers0.db" -- python3 examples/slow_getitem.py --workers 0 --epochs 2 --batches 150
"$bin" run -q -o "$dir/workers2.db" -- python3 examples/slow_getitem.py --workers 2 --epochs 2 --batches 150

if [ -z "${DISPLAY:-}" ] && command -v Xvfb >/dev/null; then
  Xvfb :96 -screen 0 1600x1000x24 -nolisten tcp >/dev/null 2>&1 &
  xvfb=$!
  trap 'kill $xvfb' EXIT
  sleep 1
  export DISPLAY=:96
fi
"$bin" ui --screenshot docs/images/compare.png --layout-dump /tmp/stallscope-compare-layout.json \
  "$dir/workers0.db" "$dir/workers2.db"
"$bin" compare "$dir/workers0.db" "$dir/workers2.db" | sed -n '1,7p'
ls -l docs/images/compare.png
[ -n "${KEEP:-}" ] || rm -rf "$dir"
