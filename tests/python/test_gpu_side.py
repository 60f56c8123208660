"""The GPU side's glue that runs without a GPU (tests/gpu/ has the checks that need one):
- `--gpu off` / STALLSCOPE_GPU=off leaves CUDA alone (no CUDA injection library), also for a
  program started through a shell wrapper such as a pyenv shim;
- torch.profiler asking for CUDA activity while stallscope's GPU capture holds CUPTI gets one line
  that says why its GPU view will be empty and what to do; a CPU-only profile is left untouched.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import LAUNCHER, base_env, run_plain, run_recorded

SHOW = "import os; print('inj=' + os.environ.get('CUDA_INJECTION64_PATH', ''))"
WARNING = "torch.profiler asks for CUDA activity"


def injection(tmp_path, name, launcher_args, cmd, env=None):
    p = subprocess.run([str(LAUNCHER), "run", "-q", *launcher_args, "-o", str(tmp_path / f"{name}.db"), "--", *cmd],
                       capture_output=True, text=True, env=env or base_env(), timeout=60)
    assert p.returncode == 0, p.stderr
    return next(line for line in p.stdout.splitlines() if line.startswith("inj="))[len("inj="):]


def test_gpu_off_leaves_cuda_alone(tmp_path):
    direct = [sys.executable, "-c", SHOW]
    shim = ["bash", "-c", f'exec "{sys.executable}" -c "$0"', SHOW]  # bash has its own getenv/setenv
    if not injection(tmp_path, "default", [], direct):
        pytest.skip("built without the CUDA toolkit: there is no CUDA injection to turn off")
    assert injection(tmp_path, "default-shim", [], shim).endswith("libstallscope.so")
    for name, args, env in (("flag", ["--gpu", "off"], None), ("env", [], base_env(STALLSCOPE_GPU="off"))):
        assert injection(tmp_path, f"{name}-direct", args, direct, env) == "", name
        assert injection(tmp_path, f"{name}-shim", args, shim, env) == "", name


CHECK = r"""
import sys
import torch
from torch.autograd import profiler as ap
from torch.autograd.profiler import ProfilerActivity
import stallscope._native as N
assert getattr(ap._prepare_profiler, "_stallscope_check", False), "the profiler check is not installed"
if sys.argv[1] == "holds":
    N.gpu_capture_on = lambda: True  # as on a GPU machine once stallscope's CUPTI capture runs
for acts in [{ProfilerActivity.CPU}] + [{ProfilerActivity.CPU, ProfilerActivity.CUDA}] * int(sys.argv[2]):
    for f in (ap._prepare_profiler, ap._enable_profiler):
        try:
            f(None, acts)  # the check runs first; torch then refuses the None config
        except Exception:
            pass
print("done")
"""


@pytest.mark.torch
def test_profiler_with_cuda_is_told_once(tmp_path):
    script = tmp_path / "check.py"
    script.write_text(CHECK)
    r = run_recorded(tmp_path / "holds.db", [script, "holds", 3])
    assert r.rc == 0 and "done" in r.stdout, r.stderr
    assert r.stderr.count(WARNING) == 1, r.stderr
    assert "STALLSCOPE_GPU=off" in r.stderr  # says what to do
    r = run_recorded(tmp_path / "cpu-only.db", [script, "holds", 0])
    assert r.rc == 0 and WARNING not in r.stderr, r.stderr
    r = run_recorded(tmp_path / "free.db", [script, "free", 3])  # no GPU capture in this process
    assert r.rc == 0 and WARNING not in r.stderr, r.stderr


PROFILE = r"""
import torch
from torch.profiler import ProfilerActivity, profile
x = torch.ones(64, 64)
with profile(activities=[ProfilerActivity.CPU]) as p:
    for _ in range(5):
        x = x @ x / 64
print("events", sum(1 for e in p.events() if e.name == "aten::mm"), float(x.sum()))
"""


@pytest.mark.torch
def test_cpu_profile_is_the_same_under_stallscope(tmp_path):
    script = tmp_path / "profile.py"
    script.write_text(PROFILE)
    plain = run_plain([script])
    rec = run_recorded(tmp_path / "p.db", [script])
    assert plain.rc == 0 and rec.rc == 0, rec.stderr
    line = [x for x in plain.stdout.splitlines() if x.startswith("events")]
    assert line and line == [x for x in rec.stdout.splitlines() if x.startswith("events")]
    assert line[0].split()[1] == "5"
    assert WARNING not in rec.stderr
