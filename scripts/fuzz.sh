#!/usr/bin/env bash
# Fuzzes every reader of outside bytes with libFuzzer (docs/robustness.md): builds the targets of
# tests/fuzz/ with clang, ASan and UBSan into build-fuzz/, then runs each for SECONDS (default 30)
# from its corpus in tests/fuzz/corpus/<target>/, as many targets at a time as there are cores
# (FUZZ_JOBS overrides). Inputs that reach new code go to build-fuzz/corpus/<target>/ (copy the
# useful ones into tests/fuzz/corpus/ to keep them: every build replays that folder under CTest,
# label `fuzz`). A crash makes the run exit non-zero, with the input saved as
# build-fuzz/crashes/<target>-crash-*: reproduce it with `build-fuzz/bin/<target> FILE`, then keep
# it in the corpus as a regression test.
#   scripts/fuzz.sh [SECONDS] [TARGET...]     targets: fuzz_npy fuzz_jpeg fuzz_tar fuzz_recording
#                                             fuzz_cli fuzz_wire, fuzz_dashboard (where the dashboard is built)
#   scripts/fuzz.sh --build-only [TARGET...]  builds them and runs none (scripts/test.sh builds them
#                                             beside other tests, then fuzzes)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BUILD_ONLY=0
case "${1:-}" in
  -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  --build-only) BUILD_ONLY=1; shift ;;
esac
EACH=30
if [ "$BUILD_ONLY" = 0 ] && [ $# -gt 0 ]; then
  case "$1" in
    *[!0-9]*|"") echo "fuzz: SECONDS must be a whole number, not '$1' (scripts/fuzz.sh [SECONDS] [TARGET...])" >&2; exit 2 ;;
  esac
  EACH=$1
  shift
fi
TARGETS=("$@")
if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ is not installed (scripts/setup.sh installs clang)" >&2
  exit 1
fi

LAUNCHER=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=true
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
# -O1 with line tables, as libFuzzer advises (and quicker to build); asserts kept.
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -gline-tables-only" \
  -DCMAKE_C_FLAGS_RELEASE="-O1 -gline-tables-only" -DSTALLSCOPE_FUZZ=ON \
  -DSTALLSCOPE_BUILD_BENCH=OFF "${LAUNCHER[@]}" >/dev/null
if [ ${#TARGETS[@]} -eq 0 ]; then
  TARGETS=(fuzz_npy fuzz_jpeg fuzz_tar fuzz_recording fuzz_cli fuzz_wire)
  # The dashboard's reader, where ImGui, GLFW and OpenGL are there to build the dashboard.
  if cmake --build build-fuzz --target help | grep -q '^fuzz_dashboard:'; then TARGETS+=(fuzz_dashboard); fi
fi
cmake --build build-fuzz --target "${TARGETS[@]}"
[ "$BUILD_ONLY" = 1 ] && exit 0
mkdir -p build-fuzz/crashes
# The targets run side by side, as many at a time as there are cores: each is one
# single-threaded process, so each still gets a core for its SECONDS.
FUZZ_JOBS=${FUZZ_JOBS:-$(nproc)}
fuzz_one() {  # fuzz_one TARGET: runs it; its status is the fuzzer's
  local t=$1
  mkdir -p "build-fuzz/corpus/$t"
  # Leaks are not what this looks for (the targets keep a decoder and a template for the process).
  "build-fuzz/bin/$t" -max_total_time="$EACH" -timeout=20 -rss_limit_mb=2048 -detect_leaks=0 \
    -print_final_stats=1 -artifact_prefix="build-fuzz/crashes/$t-" \
    "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" >"build-fuzz/$t.log" 2>&1
}
declare -A PID
for t in "${TARGETS[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$FUZZ_JOBS" ]; do wait -n || true; done
  fuzz_one "$t" &
  PID[$t]=$!
done
failed=0
for t in "${TARGETS[@]}"; do
  log="build-fuzz/$t.log"
  if ! wait "${PID[$t]}"; then
    tail -n 40 "$log" >&2
    echo "fuzz: $t crashed; the input is in build-fuzz/crashes/ (log: $log)" >&2
    failed=1
    continue
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
  echo "fuzz: $t: ${runs:-?} inputs in ${EACH} s, ${cov:-cov: ?}, no crash"
done
exit "$failed"
