#!/usr/bin/env bash
# Makes the virtual environment in which the tests that need torchvision run
# (tests/python/torchvision_parity.py, started by test_torchvision_parity.py): torch 2.14.1 and
# torchvision 0.29.1, the pair that installs here from the machine's own wheel store (a CUDA
# build, about 5.5 GB, that runs on the CPU), with pytest, numpy and Pillow. The main environment
# keeps torch 2.13.0 CPU, for which PyPI has no torchvision that imports. The environment lives
# outside the work tree, so that clones and CI runs on one machine share it; one that already
# imports everything is kept (about 2 minutes to make otherwise).
#   scripts/venv_torchvision.sh [DIR]
# DIR: $STALLSCOPE_TORCHVISION_VENV, else ${XDG_CACHE_HOME:-~/.cache}/stallscope/venv-torchvision-0.29.1
# (tests/python/test_torchvision_parity.py looks in the same place). Prints its python last.
set -euo pipefail
VENV=${1:-${STALLSCOPE_TORCHVISION_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/stallscope/venv-torchvision-0.29.1}}
PY=${PYTHON:-python3}
PACKAGES=(torch==2.14.1 torchvision==0.29.1 pytest numpy pillow)

ready() { [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import torch, torchvision, PIL, numpy, pytest" 2>/dev/null; }

mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9  # two runs at once (two clones, CI beside a session) make it once
if ! ready; then
  echo "venv_torchvision: making $VENV (${PACKAGES[*]})" >&2
  rm -rf "$VENV"
  # The loader's native module is built for the main interpreter: the environment is the same Python.
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${PACKAGES[@]}" >&2
  ready || { echo "venv_torchvision: $VENV does not import torch and torchvision" >&2; exit 1; }
fi
echo "$VENV/bin/python"
