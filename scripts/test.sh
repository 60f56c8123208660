#!/usr/bin/env bash
# Sets up, builds and runs every test: C++ unit and end-to-end tests (CTest); the self-contained
# wheel, built and installed on bare Debian roots (tests/node/run.sh); the Python tests (pytest,
# real PyTorch training under stallscope; the reference loader against torchvision in the
# environment scripts/venv_torchvision.sh makes, which is made in the background during the build;
# those not marked `timed` beside the wheel, the roots and the sanitizer and fuzzing builds, then
# the timed ones alone); and, in the same chain as those builds, every C++ test again under
# AddressSanitizer+UndefinedBehaviorSanitizer, and the collector's
# rings, the drainer, the recorder, the dashboard's reader/analysis threads and the reference loader
# (all its tests: its threads, pool and copy watcher) under ThreadSanitizer, and the readers of
# outside bytes under libFuzzer for 20 s each (scripts/fuzz.sh; their corpora replay under CTest in
# every build). GPU tests are skipped here (CTest label `gpu`; see tests/gpu/).
#   scripts/test.sh [--quick | --no-sanitizers]
# --quick: the loop while changing code: lint, format, build, the C++ tests and the Python tests
# that need no other environment and take seconds each (QUICK_PY below); no wheel, torchvision,
# sanitizers or fuzzing. 4:03 with a warm ccache on the shared 2-core VM (load 7), 87 s of it pytest.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
SANITIZERS=1 QUICK=0
case "${1:-}" in
  --no-sanitizers) SANITIZERS=0 ;;
  --quick) QUICK=1 ;;
  "") ;;
  -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "test.sh: unknown argument '$1' (scripts/test.sh [--quick | --no-sanitizers])" >&2; exit 2 ;;
esac
# The Python tests of --quick: no torchvision environment, no wheel, no Lightning or transformers,
# nothing that trains for long or measures speed (the start-up hooks, the package, the recording's
# permissions, export, the headless dashboard, the collector's stale arenas, the reference loader).
QUICK_PY=(tests/python/test_boot.py tests/python/test_package.py tests/python/test_permissions.py
          tests/python/test_export.py tests/python/test_headless.py tests/python/test_stale_arenas.py
          tests/python/test_reference_loader.py)

START=$SECONDS
# Each stage's start, with the minutes since the script began (CI's time is bounded).
stage() { printf '== %s  [%d:%02d]\n' "$1" $(((SECONDS - START) / 60)) $(((SECONDS - START) % 60)); }

scripts/setup.sh --no-build
PY=${PYTHON:-python3}

TORCHVISION_PID=
if [ "$QUICK" = 0 ]; then
  # Mostly downloading and unpacking (once per machine): beside the build, not after it.
  mkdir -p build
  scripts/venv_torchvision.sh >build/venv_torchvision.log 2>&1 &
  TORCHVISION_PID=$!
fi

stage "lint (ruff)"
"$PY" -m ruff --version >/dev/null 2>&1 || "$PY" -m pip install -q ruff
"$PY" -m ruff check python tests bench examples

stage "format (clang-format)"
scripts/check_format.sh

stage "build"
# Through ccache, with paths relative to the repository: the sanitizer builds reuse nothing, but
# tests/python/test_pip_install.py run alone (without the wheel this script hands it) builds the
# same sources again with the same settings (pip install ., into build-pip/) and reuses the objects.
LAUNCHER=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=true
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTALLSCOPE_WERROR=ON "${LAUNCHER[@]}" >/dev/null
cmake --build build

stage "C++ tests"
(cd build && ctest --output-on-failure -j2 -LE gpu)

if [ "$QUICK" = 1 ]; then
  stage "Python tests (quick)"
  STALLSCOPE_BUILD="$ROOT/build" "$PY" -m pytest -q --durations=10 "${QUICK_PY[@]}"
  stage "quick tests passed (scripts/test.sh runs every test)"
  exit 0
fi

# Beside the Python tests that a busy machine cannot change (not marked `timed`, conftest.py), at
# the lowest priority, one after another (build/beside.log):
# - the dashboard alone (build-dash/): stallscope-ui with SQLite, GLFW, ImGui and the remote
#   transport only, which must build and start without the collector, inject, loader, ptrace or
#   CUPTI code (docs/dashboard.md, "Remote nodes");
# - the self-contained wheel (scripts/wheel.sh: zig for glibc 2.28, its libraries built from
#   Debian's sources, cached in ~/.cache/stallscope/wheel);
# - a user's node: fresh minimal Debian 12 and 13 roots in which an ordinary user installs it and
#   records real training (tests/node/run.sh);
# - the sanitizer and fuzzing builds, then their tests and the fuzzing (sanitizer_tests).
# The Python tests leave about a core idle (they wait on their children, sleep and read), and these
# are about half an hour of compiling on two cores: the chain ends after the Python tests, so the
# sanitizers' tests and the fuzzing mostly run after them, at the chain's end, rather than after
# the timed tests. The tests marked `timed` then run alone, on an idle machine, with
# test_pip_install.py (marked `wheel`: it installs this wheel, built from this tree through
# pyproject.toml, rather than building the tree once more).
# The sanitizer builds keep line tables only (-g1): their reports name files and lines, and the
# compiling is shorter than with full debug information.
sanitizer_builds() {
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSTALLSCOPE_SANITIZE=address,undefined \
        -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCMAKE_C_FLAGS_DEBUG=-g1 -DSTALLSCOPE_BUILD_BENCH=OFF "${LAUNCHER[@]}" >/dev/null
  # Only what CTest runs (target ctest_programs): not the loader's Python module and the programs
  # that only the Python tests use.
  cmake --build build-asan --target ctest_programs
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSTALLSCOPE_SANITIZE=thread \
        -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCMAKE_C_FLAGS_DEBUG=-g1 -DSTALLSCOPE_BUILD_BENCH=OFF "${LAUNCHER[@]}" >/dev/null
  # unit_thread_tests and ui_thread_tests: the test files below, in programs of their own (not the
  # whole unit_tests and ui_tests, whose other tests need the command-line tool and the dashboard).
  cmake --build build-tsan --target unit_thread_tests ui_thread_tests loader_tests
  scripts/fuzz.sh --build-only
}
# The sanitizers' tests and the fuzzing, once their builds are made: in the same chain (the compiling
# takes longer than the untimed Python tests, so these mostly run after them, on an idle machine).
sanitizer_tests() {
  stage "C++ tests under ASan+UBSan"
  # The preloaded, instrumented libstallscope.so comes before the ASan runtime in the load order.
  (cd build-asan && ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0 ctest --output-on-failure -j2 -LE gpu)
  stage "collector tests under TSan"
  (cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ./bin/unit_thread_tests --gtest_filter='RingTest.*:IngestTest.*:RecorderTest.*:GpuLightTest.*')
  stage "dashboard reader and analysis threads under TSan"
  (cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ./bin/ui_thread_tests --gtest_filter='LiveTest.*:SimTest.ALargeFirstRead*:LongRecordingTest.*')
  stage "reference loader threads under TSan"
  (cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ./bin/loader_tests)
  stage "fuzzing (libFuzzer with ASan+UBSan, 20 s a target; docs/robustness.md)"
  scripts/fuzz.sh 20
}
dashboard_only() {
  cmake -S . -B build-dash -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTALLSCOPE_WERROR=ON -DSTALLSCOPE_DASHBOARD_ONLY=ON \
        -DSTALLSCOPE_BUILD_TESTS=OFF -DSTALLSCOPE_BUILD_BENCH=OFF "${LAUNCHER[@]}" >/dev/null
  cmake --build build-dash
  build-dash/bin/stallscope-ui --help >/dev/null
  if nm -C build-dash/bin/stallscope-ui | grep -q -i -e 'stallscope::Collector' -e 'cupti' -e 'ptrace'; then
    echo "test.sh: the dashboard-only build links collector, CUPTI or ptrace code" >&2
    return 1
  fi
}
beside() {
  stage "the dashboard alone (STALLSCOPE_DASHBOARD_ONLY: a laptop's build)"
  dashboard_only
  stage "the self-contained wheel (scripts/wheel.sh)"
  scripts/wheel.sh --out build-dist
  stage "the wheel on bare Debian 12 and 13 roots (tests/node/run.sh)"
  tests/node/run.sh "$(ls -t build-dist/stallscope-*.whl | head -1)"
  if [ "$SANITIZERS" = 1 ]; then
    stage "the sanitizer and fuzzing builds"
    sanitizer_builds
    sanitizer_tests
  fi
  stage "done"
}
# In a process group of its own (set -m), so that a failing test stops all of it.
set -m
(renice -n 19 -p "$BASHPID" >/dev/null && beside) >build/beside.log 2>&1 &
BESIDE_PID=$!
set +m
trap 'kill -- "-$BESIDE_PID" 2>/dev/null || true' EXIT

# torchvision's tests run in an environment of their own (torch 2.14.1 + torchvision 0.29.1, made
# once per machine; test_torchvision_parity.py starts them): the main one keeps torch 2.13.0 CPU.
stage "torchvision environment"
wait "$TORCHVISION_PID" || { cat build/venv_torchvision.log >&2; exit 1; }
PYTEST=(env STALLSCOPE_BUILD="$ROOT/build" "$PY" -m pytest -q)
stage "Python tests not marked timed or wheel, beside the builds (nice 19; build/beside.log)"
# The 25 slowest tests of each part are listed at its end: where CI's time goes.
"${PYTEST[@]}" --durations=25 -m "not timed and not wheel" tests/python
stage "the dashboard alone, the wheel, the roots, the sanitizers and the fuzzing: their end (their log: build/beside.log)"
if ! wait "$BESIDE_PID"; then
  # From the stage that failed on (a failing CTest prints each failure's output, then its list).
  awk '/^== /{buf=""} {buf=buf $0 "\n"} END{printf "%s", buf}' build/beside.log | tail -n 400 >&2
  echo "test.sh: the dashboard-only build, the wheel, the roots' test, a sanitizer build or test, or the fuzzing failed (its stage's log is above; all of it: build/beside.log)" >&2
  exit 1
fi
trap - EXIT
grep -e '^== ' -e '^node: ' build/beside.log || true
WHEEL=$(ls -t build-dist/stallscope-*.whl | head -1)
stage "Python tests marked timed or wheel, alone"
STALLSCOPE_TEST_WHEEL="$ROOT/$WHEEL" "${PYTEST[@]}" --durations=25 -m "timed or wheel" tests/python

stage "all tests passed"
