"""The GPU side's glue that runs without a GPU (tests/gpu/ has the checks that need one):
- `--gpu off` / STALLSCOPE_GPU=off leaves CUDA alone (no CUDA injection library), also for a
  program started through a shell wrapper such as a pyenv shim;
- torch.profiler asking for CUDA activity while stallscope's GPU capture holds CUPTI gets one line
  that says why its GPU view will be empty and what to do; a CPU-only profile is left untouched;
- light GPU mode (`--gpu light`) end to end on a simulated GPU (tests/programs/fake_libcuda.cc, a
  stand-in for libcuda.so.1): the hooks' marks, the reader thread, the recording and the report's
  `gpu_light` figures, in the C hooks and the Python ones; no CUDA injection; a process without
  CUDA gets CPU mode.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import BUILD, LAUNCHER, Recording, base_env, run_plain, run_recorded

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


FAKE_CUDA = BUILD / "tests" / "fake_cuda" / "libcuda.so.1"

# Each step queues 5 ms of (simulated) GPU work, then asks for the next batch, which takes 12 ms to
# load: the GPU runs dry about 5 ms into each next() and then idles about 7 ms.
LIGHT_LOOP = r"""
import ctypes, json, sys, time
import torch
from torch.utils.data import DataLoader, Dataset
import stallscope._native as N
if sys.argv[1] != "none":
    gpu = ctypes.CDLL(sys.argv[1])
    gpu.fake_gpu_queue.argtypes = [ctypes.c_uint64]
else:
    gpu = None
class Slow(Dataset):
    def __len__(self):
        return 40
    def __getitem__(self, i):
        time.sleep(0.012)
        return torch.zeros(4)
n = 0
for batch in DataLoader(Slow(), batch_size=1):
    if gpu is not None:
        gpu.fake_gpu_queue(5000)
    n += 1
print("RESULT " + json.dumps({"steps": n, "marks_bound": N.gpu_mark is not None}))
"""


def report_of(db):
    p = subprocess.run([str(LAUNCHER), "report", "--json", str(db)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.timed
@pytest.mark.torch
@pytest.mark.parametrize("hooks", ["c", "python"])
def test_light_mode_on_a_simulated_gpu(tmp_path, hooks):
    if not FAKE_CUDA.exists():
        pytest.skip(f"{FAKE_CUDA} not built")
    script = tmp_path / "loop.py"
    script.write_text(LIGHT_LOOP)
    env = base_env(STALLSCOPE_GPU="light", STALLSCOPE_PY_HOOKS="1" if hooks == "python" else None)
    r = run_recorded(tmp_path / "light.db", [script, FAKE_CUDA], env=env)
    assert r.rc == 0, r.stderr
    assert r.result == {"steps": 40, "marks_bound": True}
    rec = Recording(tmp_path / "light.db")
    kinds = {row["kind"]: row["n"] for row in rec.q("SELECT kind, count(*) AS n FROM gpu_activities GROUP BY kind")}
    assert set(kinds) == {"mark"}, kinds
    names = {rec.string(row["name_id"]) for row in rec.q("SELECT DISTINCT name_id FROM gpu_activities")}
    assert names == {"next_begin", "next_end"}, names
    rep = report_of(tmp_path / "light.db")
    assert rep["mode"] == "gpu_light"
    g = rep["gpu_light"]
    assert g["calls"] >= 40 and g["calls_marked"] >= g["calls"] - 1, g
    # At each next() the GPU still had the step's 5 ms queued; then it idled for the rest of the wait.
    assert 4.0 <= g["queued_p50_ms"] <= 5.5, g
    assert 0.2 <= g["gpu_idle_s"] / g["host_wait_s"] <= 0.65, g
    assert rep["stall"]["by_cause"]["data_wait"] == pytest.approx(g["gpu_idle_s"])
    # No CUPTI in light mode: the CUDA injection variable is left alone.
    assert injection(tmp_path, "light-env", ["--gpu", "light"], [sys.executable, "-c", SHOW]) == ""


@pytest.mark.torch
def test_light_mode_on_a_driver_that_lacks_a_function_says_so_once(tmp_path):
    """A loaded libcuda without cuEventQuery: one line names the function and what to use instead,
    the loop runs as it would, and the recording is a CPU one (no retry every second, no marks)."""
    old = BUILD / "tests" / "fake_cuda_old" / "libcuda.so.1"
    if not old.exists():
        pytest.skip(f"{old} not built")
    script = tmp_path / "loop.py"
    script.write_text(LIGHT_LOOP)
    r = run_recorded(tmp_path / "old.db", [script, old], env=base_env(STALLSCOPE_GPU="light"))
    assert r.rc == 0, r.stderr
    assert r.result == {"steps": 40, "marks_bound": True}
    said = [ln for ln in r.stderr.splitlines() if "light GPU marks" in ln]
    assert said == [("stallscope: light GPU marks off (libcuda.so.1 has no cuEventQuery); "
                     "use --gpu all or --gpu kernel")], r.stderr
    assert Recording(tmp_path / "old.db").q("SELECT count(*) AS n FROM gpu_activities")[0]["n"] == 0
    assert report_of(tmp_path / "old.db")["mode"] == "cpu"


@pytest.mark.torch
def test_light_mode_without_cuda_is_cpu_mode(tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(LIGHT_LOOP)
    r = run_recorded(tmp_path / "nocuda.db", [script, "none"], env=base_env(STALLSCOPE_GPU="light"))
    assert r.rc == 0, r.stderr
    assert r.result == {"steps": 40, "marks_bound": True}
    assert Recording(tmp_path / "nocuda.db").q("SELECT count(*) AS n FROM gpu_activities")[0]["n"] == 0
    rep = report_of(tmp_path / "nocuda.db")
    assert rep["mode"] == "cpu" and rep["gpu_light"] is None
    # Without --gpu light the hooks do not mark at all.
    r = run_recorded(tmp_path / "default.db", [script, "none"])
    assert r.rc == 0 and r.result == {"steps": 40, "marks_bound": False}, r.stderr
