"""Runs torchvision_parity.py (ReferenceLoader over JPEGs against real torchvision: the mapping
on torchvision's own classes, batches against torch's DataLoader over torchvision's ImageFolder,
sample-by-sample agreement) in the torchvision environment that scripts/venv_torchvision.sh
makes: the main environment's torch 2.13.0 CPU has no torchvision that imports beside it, and the
pair that does (torch 2.14.1, torchvision 0.29.1) is a 5.5 GB CUDA build. Skipped, saying so,
when that environment is absent; scripts/test.sh makes it first.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD, REPO, base_env

HERE = Path(__file__).resolve().parent


def venv_dir() -> Path:
    """Where scripts/venv_torchvision.sh puts the environment (the same rule)."""
    given = os.environ.get("STALLSCOPE_TORCHVISION_VENV")
    if given:
        return Path(given)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "stallscope" / "venv-torchvision-0.29.1"


def test_torchvision_parity_in_its_own_environment():
    venv = venv_dir()
    python = venv / "bin" / "python"
    if not python.exists():
        pytest.skip(f"no torchvision environment at {venv}: scripts/venv_torchvision.sh makes it "
                    "(torch 2.14.1 + torchvision 0.29.1, about 5.5 GB)")
    r = subprocess.run([str(python), "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                        str(HERE / "torchvision_parity.py")],
                       capture_output=True, text=True, timeout=1200, cwd=REPO,
                       env=base_env(STALLSCOPE_BUILD=str(BUILD)))
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    summary = [line for line in r.stdout.splitlines() if " passed" in line]
    assert summary and "failed" not in summary[-1] and "error" not in summary[-1], out[-3000:]
    # The only test that may skip is the GPU one, on a machine without CUDA.
    skips = [line for line in r.stdout.splitlines() if line.startswith("SKIPPED")]
    assert all("no CUDA device" in line for line in skips), "\n".join(skips)
    print(r.stdout[-1500:])
