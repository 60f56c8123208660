"""Training programs that do unusual things (programs/user_tricks.py) behave the same under
stallscope: same output, same exit status, same traceback, no hang. The recording still holds what
they did. A dataset that raises in a worker and a SIGKILLed worker are in test_robustness.py; a
user sitecustomize that raises is in test_boot.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import LAUNCHER, PROGRAMS, Recording, base_env, run_plain, run_recorded

pytestmark = pytest.mark.torch

PROG = PROGRAMS / "user_tricks.py"


def same_outcome(tmp_path, mode, *, env=None, normalize=lambda s: s, timeout=120):
    plain = run_plain([PROG, mode], env=env, timeout=timeout)
    t0 = time.monotonic()
    rec = run_recorded(tmp_path / f"{mode}.db", [PROG, mode], env=env, timeout=timeout)
    took = time.monotonic() - t0
    assert rec.rc == plain.rc, f"exit {rec.rc} under stallscope, {plain.rc} without\n{rec.stderr}"
    assert rec.stdout == plain.stdout
    a, b = normalize(plain.stderr), normalize(rec.stderr_without_stallscope())
    assert b == a, f"stderr differs.\n--- without stallscope:\n{a}\n--- with stallscope:\n{b}"
    return plain, rec, took


def next_calls_by_pid(db):
    return Counter(r["pid"] for r in Recording(db).spans("dl.next"))


def test_a_hanging_worker_times_out_the_same_way(tmp_path):
    plain, rec, took = same_outcome(tmp_path, "hang")
    assert plain.rc == 1 and "RuntimeError: DataLoader timed out after 3 seconds" in plain.stderr
    assert took < 60, f"{took:.0f} s: the timed-out loader's exit was held up"
    assert "dl.next" in Recording(rec.db).names()


def worker_exit_error(text):
    """The error line and the program's own traceback. The chained inner traceback is where torch's
    SIGCHLD handler interrupted the main process: it differs from run to run without stallscope."""
    cause = "The above exception was the direct cause of the following exception:"
    inner, _, outer = text.rpartition(cause)
    error = [ln for ln in inner.splitlines() if ln.startswith("RuntimeError: DataLoader worker")]
    return re.sub(r"pid\(?s?\)? \d+", "pid N", "\n".join(error) + cause + outer)


@pytest.mark.timed
def test_a_worker_that_exits_is_reported_the_same_way(tmp_path):
    plain, rec, _ = same_outcome(tmp_path, "exit", normalize=worker_exit_error)
    assert plain.rc == 1 and "exited unexpectedly" in plain.stderr
    assert "dl.fetch" in Recording(rec.db).names()


def test_cuda_asked_for_where_there_is_none(tmp_path):
    plain, _, _ = same_outcome(tmp_path, "cuda")
    assert plain.rc == 1 and "available False count 0" in plain.stdout
    assert "Traceback (most recent call last)" in plain.stderr


def test_a_pythonpath_the_user_set_keeps_its_order_and_modules(tmp_path):
    a, b = tmp_path / "first", tmp_path / "second"
    for d, value in ((a, 42), (b, 7)):
        d.mkdir()
        (d / "usermod.py").write_text(f"VALUE = {value}\n")  # the first one on the path wins
    env = base_env(PYTHONPATH=f"{a}:{b}", USER_DIRS=f"{a}:{b}")
    plain, rec, _ = same_outcome(tmp_path, "pythonpath", env=env)
    assert plain.rc == 0, plain.stderr
    assert "usermod 42 True" in plain.stdout
    assert f"order {[str(a), str(b)]}" in plain.stdout and "before stdlib True" in plain.stdout
    assert sum(next_calls_by_pid(rec.db).values()) == 7  # 6 batches and the StopIteration


def test_a_program_that_forks_itself(tmp_path):
    plain, rec, _ = same_outcome(tmp_path, "fork-self")
    assert plain.rc == 3 and "child exit 5" in plain.stdout
    # Parent and child each recorded their own loop: 4 and 5 batches, each with its StopIteration.
    assert sorted(next_calls_by_pid(rec.db).values()) == [5, 6]


def test_a_program_that_execs_itself(tmp_path):
    plain, rec, _ = same_outcome(tmp_path, "exec-self")
    assert plain.rc == 4 and "stage1 (4, 240.0)" in plain.stdout and "stage2 (5, 380.0)" in plain.stdout
    r = Recording(rec.db)
    # One process, one main thread, two loaders: the new image does not reuse the old one's ids.
    calls = Counter(s["arg0"] for s in r.spans("dl.next"))
    assert sorted(calls.values()) == [5, 6] and len(calls) == 2, calls
    pids = {s["pid"] for s in r.spans("dl.next")}
    assert len(pids) == 1
    main = r.q("SELECT COUNT(*) AS n FROM threads t JOIN processes p ON p.id = t.process_id "
               "WHERE p.pid = ? AND t.tid = p.pid", pids.pop())
    assert main[0]["n"] == 1
    report = subprocess.run([str(LAUNCHER), "report", str(rec.db)], capture_output=True, text=True, timeout=60)
    assert report.returncode == 0, report.stderr
    handed = sorted(int(m) for m in re.findall(r"batches handed (\d+)", report.stdout))
    assert handed == [4, 5], report.stdout


@pytest.mark.timed
@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_multiprocessing_in_user_code(tmp_path, method):
    plain, rec, _ = same_outcome(tmp_path, f"mp-{method}")
    assert plain.rc == 0, plain.stderr
    assert "process exit 9" in plain.stdout
    # Six pool tasks ran loaders of 2..7 batches in the pool's processes, not in the program's.
    by_pid = next_calls_by_pid(rec.db)
    assert sum(by_pid.values()) == sum(b + 1 for b in range(2, 8)), by_pid
    main = Recording(rec.db).q("SELECT pid FROM processes ORDER BY start_ns LIMIT 1")[0]["pid"]
    assert main not in by_pid
    # Each loop lasts about a millisecond: starting workers for it would cost more than it takes,
    # and its input wait is too short to be worth any change. No advice, and a note says why.
    rep = subprocess.run([str(LAUNCHER), "report", "--json", str(rec.db)], capture_output=True, text=True, timeout=60)
    assert rep.returncode == 0, rep.stderr
    doc = json.loads(rep.stdout)
    assert doc["recommendations"] == [], doc["recommendations"]
    assert any("too little for a change" in n for n in doc["notes"]), doc["notes"]
    w = doc["whatif"]
    assert w["inputs"]["startup_estimated"] is True and w["inputs"]["startup_s"] == 1.0, w["inputs"]  # spawn
    assert w["best"]["num_workers"] == 0, w["best"]


def cupti_lines(stderr):
    return [ln for ln in stderr.splitlines() if ln.startswith("stallscope:") and "CUPTI" in ln]


def test_cuda_starting_without_a_driver_costs_one_line(tmp_path):
    """The program calls the injection entry point as the driver does when CUDA starts. Here
    libcupti loads but there is no driver: one line, and the loops go on recorded."""
    plain, rec, _ = same_outcome(tmp_path, "cupti")
    assert plain.rc == 0
    lines = cupti_lines(rec.stderr)
    assert len(lines) == 1, rec.stderr
    assert sum(next_calls_by_pid(rec.db).values()) == 14


HIDE_CUDA = 'mount -t tmpfs none "$HIDE" && exec "$@"'


def without_cuda_toolkit(*cmd, env):
    """Runs cmd in a mount namespace of its own where the CUDA toolkit's folder is empty."""
    hide = os.path.realpath("/usr/local/cuda")
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", HIDE_CUDA, "sh",
                           *map(str, cmd)], capture_output=True, text=True, timeout=120, env={**env, "HIDE": hide})


def test_libcupti_missing_costs_one_line(tmp_path):
    if not os.path.isdir("/usr/local/cuda"):
        pytest.skip("no CUDA toolkit here: nothing to hide")
    env = base_env()
    probe = without_cuda_toolkit("true", env=env)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount over the CUDA toolkit here (needs root and unshare): {probe.stderr.strip()}")
    plain = without_cuda_toolkit(sys.executable, PROG, "cupti", env=env)
    db = tmp_path / "nocupti.db"
    rec = without_cuda_toolkit(LAUNCHER, "run", "-o", db, "--", sys.executable, PROG, "cupti", env=env)
    assert rec.returncode == plain.returncode == 0, rec.stderr
    assert rec.stdout == plain.stdout
    lines = cupti_lines(rec.stderr)
    assert len(lines) == 1 and "CUPTI (libcupti) not found" in lines[0], rec.stderr
    assert "STALLSCOPE_CUPTI=" in lines[0]  # what to do next
    assert sum(next_calls_by_pid(Path(db)).values()) == 14
