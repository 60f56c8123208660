#!/usr/bin/env bash
# Sets up and builds stallscope, records a bundled example (a training loop whose DataLoader
# fetches in the main process from a slow dataset) and prints stallscope's report on it.
#   scripts/demo.sh [EXAMPLE.py [ARGS...]]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
scripts/setup.sh
PY=${PYTHON:-python3}
mkdir -p demo-output
DB=demo-output/demo-$(date +%Y%m%d-%H%M%S).db
if [ $# -gt 0 ]; then
  build/bin/stallscope run -o "$DB" -- "$PY" "$@"
else
  build/bin/stallscope run -o "$DB" -- "$PY" examples/slow_getitem.py
fi
echo
build/bin/stallscope report "$DB"
echo
echo "The recording is $DB: open it with 'sqlite3 $DB' (docs/schema.md has queries to paste),"
echo "or 'build/bin/stallscope report --json $DB'."
