#!/usr/bin/env bash
# Installs what stallscope needs on a Debian-based machine (apt and pip packages, only those
# missing) and builds it into build/. Safe to run again. Compilers aside, nothing is assumed.
#   scripts/setup.sh [--no-build]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

APT_PACKAGES=(cmake ninja-build pkg-config g++ libsqlite3-dev sqlite3 libgtest-dev libgmock-dev libcli11-dev
              nlohmann-json3-dev python3 python3-pip
              # the dashboard: Dear ImGui, GLFW, OpenGL; Xvfb and Mesa for its tests
              libimgui-dev libstb-dev libglfw3-dev libgl-dev libopengl-dev libgl1-mesa-dri libglx-mesa0
              xvfb xauth fonts-dejavu-core
              # the reference loader: its Python module (pybind11, DLPack, Python's headers), its JPEG
              # path (libjpeg-turbo, tar shards); libturbojpeg encodes the tests' JPEGs. The resize
              # libraries bench/resize_bench compares with are in scripts/bench_deps.sh
              pybind11-dev libdlpack-dev python3-dev
              libjpeg62-turbo-dev libturbojpeg0-dev libarchive-dev
              # the metrics endpoint (--metrics-port): its HTTP server; Prometheus for its test
              libcpp-httplib-dev prometheus
              # remote recordings (stallscope serve, ui ssh://): zlib deflates the frames; a real sshd
              # and ssh client for tests/python/test_remote.py; tmux for `stallscope top`'s test
              zlib1g-dev openssh-server openssh-client tmux
              # formatting, checked by scripts/test.sh (scripts/check_format.sh)
              clang-format
              # tcmalloc: tests/python/test_page_faults.py follows the allocator advice with it
              libtcmalloc-minimal4
              # compiler cache: test.sh's build and its `pip install .` check share compiled objects
              ccache
              # clang and its libFuzzer runtime: scripts/fuzz.sh
              clang)
"$ROOT/scripts/apt_missing.sh" setup "${APT_PACKAGES[@]}"

PY=${PYTHON:-python3}
# torch 2.13.0 CPU is the version the hooks are tested on; a different installed torch is kept.
if ! "$PY" -c "import torch" 2>/dev/null; then
  echo "setup: installing torch==2.13.0"
  "$PY" -m pip install -q torch==2.13.0
fi
if ! "$PY" -c "import pytest" 2>/dev/null; then
  "$PY" -m pip install -q pytest
fi
# prometheus_client: tests/python/test_metrics.py parses the metrics endpoint's text with it.
if ! "$PY" -c "import prometheus_client" 2>/dev/null; then
  "$PY" -m pip install -q prometheus_client
fi
# numpy: the reference loader's tests read arrays and .npy files with it.
if ! "$PY" -c "import numpy" 2>/dev/null; then
  "$PY" -m pip install -q numpy
fi
# Pillow: tests/python/test_jpeg_ops.py compares the loader's JPEG transform with it.
if ! "$PY" -c "import PIL" 2>/dev/null; then
  "$PY" -m pip install -q pillow
fi

# The training frameworks tests/python/test_train_loops.py runs the report against (PyTorch
# Lightning, HF transformers' Trainer and accelerate). torch is pinned in the same command so that
# pip keeps the installed one.
if ! "$PY" -c "import pytorch_lightning, transformers, accelerate" 2>/dev/null; then
  TORCH_PIN=$("$PY" -c "import torch; print(torch.__version__.split('+')[0])" 2>/dev/null || echo 2.13.0)
  "$PY" -m pip install -q "torch==$TORCH_PIN" pytorch-lightning transformers accelerate
fi

if [ "${1:-}" != "--no-build" ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build
fi
