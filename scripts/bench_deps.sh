#!/usr/bin/env bash
# Installs the loaders bench/loader_bench.py compares the reference loader with, without replacing
# the torch that is installed, and the resize libraries bench/resize_bench compares the loader's
# resize with: SPDL (with the FFmpeg libraries its decoder loads at run time) and
# torchdata in the main environment, and torchdata in the torchvision environment of
# scripts/venv_torchvision.sh when it exists (the JPEG rows run there). Each pip install pins the
# environment's own torch version, and the script fails if torch changed all the same. Optional:
# the benchmark says, row by row, what is missing. Safe to run again.
#   scripts/bench_deps.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}

# SPDL's wheels carry one binding per FFmpeg major version (4 to 9) and load whichever libraries
# are installed; Debian 12 has FFmpeg 5.1.
APT_PACKAGES=(libavutil57 libavcodec59 libavformat59 libavfilter8 libavdevice59 libswresample4 libswscale6
              # the resize libraries bench/resize_bench measures beside the loader's own resize
              # (OpenCV's imgproc was the loader's resize before; each is optional there)
              libopencv-imgproc-dev libyuv-dev libswscale-dev)
"$ROOT/scripts/apt_missing.sh" bench_deps "${APT_PACKAGES[@]}"

# pip_pinned PYTHON PACKAGE...: installs the packages with that environment's torch pinned.
pip_pinned() {
  local py=$1
  shift
  local before
  before=$("$py" -c "import torch; print(torch.__version__)") || {
    echo "bench_deps: $py has no torch (scripts/setup.sh installs it)" >&2
    return 1
  }
  echo "bench_deps: $py: installing $* with torch==${before%%+*} (installed: $before)"
  "$py" -m pip install -q --disable-pip-version-check "$@" "torch==${before%%+*}"
  local after
  after=$("$py" -c "import torch; print(torch.__version__)")
  if [ "$after" != "$before" ]; then
    echo "bench_deps: torch changed from $before to $after in $py" >&2
    return 1
  fi
}

pip_pinned "$PY" spdl torchdata
VENV_PY=${STALLSCOPE_TORCHVISION_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/stallscope/venv-torchvision-0.29.1}/bin/python
if [ -x "$VENV_PY" ]; then
  pip_pinned "$VENV_PY" torchdata
else
  echo "bench_deps: no torchvision environment ($VENV_PY): the JPEG rows of torch's DataLoader and torchdata" \
       "need it (scripts/venv_torchvision.sh)"
fi
"$PY" "$ROOT/bench/loader_bench.py" --help >/dev/null
