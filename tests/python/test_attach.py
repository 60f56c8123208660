"""`stallscope attach PID` on real training processes started without stallscope: the running
iterator and the workers that exist already are followed, the training's result, output,
traceback and exit status are those of a run without the attach, Ctrl-C detaches, and bad targets
get one line and a non-zero status."""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import LAUNCHER, PROGRAMS, Recording, base_env

TARGET = PROGRAMS / "attach_target.py"


def _ptrace_blocked() -> str | None:
    """Why `stallscope attach` cannot trace a process that is not its child here, or None."""
    try:
        scope = int(Path("/proc/sys/kernel/yama/ptrace_scope").read_text())
    except (OSError, ValueError):
        return None
    if scope >= 3:
        return f"kernel.yama.ptrace_scope={scope}: ptrace is disabled on this machine"
    if scope >= 1 and os.geteuid() != 0:
        return f"kernel.yama.ptrace_scope={scope}: only root may attach to a process that is not its child"
    return None


pytestmark = [pytest.mark.torch,
              pytest.mark.skipif(_ptrace_blocked() is not None, reason=_ptrace_blocked() or "")]


class Target:
    """attach_target.py running without stallscope, stopped at READY until go()."""

    def __init__(self, tmp: Path, *args, name="t", wait_ready=True):
        self.go_file = tmp / f"{name}.go"
        self.stop_file = tmp / f"{name}.stop"
        self.p = subprocess.Popen([sys.executable, str(TARGET), "--go", str(self.go_file), "--stop",
                                   str(self.stop_file), *map(str, args)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=base_env())
        if wait_ready:
            self.ready()

    def ready(self):
        line = self.p.stdout.readline()
        assert line.strip() == "READY", f"target did not start: {line!r} {self.p.stderr.read()}"

    def go(self):
        self.go_file.touch()

    def stop(self):
        self.stop_file.touch()

    def finish(self, timeout=120):
        out, err = self.p.communicate(timeout=timeout)
        return self.p.returncode, out, err

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.communicate()


def reference(tmp: Path, *args):
    """The same program without stallscope, not waiting: (rc, stdout, stderr)."""
    go = tmp / "ref.go"
    go.touch()
    p = subprocess.run([sys.executable, str(TARGET), "--go", str(go), *map(str, args)], capture_output=True,
                       text=True, env=base_env(), timeout=120)
    return p.returncode, p.stdout.replace("READY\n", ""), p.stderr


class Attach:
    """`stallscope attach` in the background; lines of its stderr read as they come."""

    def __init__(self, pid: int, db: Path, *extra):
        self.p = subprocess.Popen([str(LAUNCHER), "attach", "-o", str(db), *map(str, extra), str(pid)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=base_env())
        self.lines: list[str] = []
        self._sel = selectors.DefaultSelector()
        self._sel.register(self.p.stderr, selectors.EVENT_READ)

    def wait_line(self, prefix: str, timeout=30.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            for line in self.lines:
                if line.startswith(prefix):
                    return line
            left = deadline - time.monotonic()
            if left <= 0 or not self._sel.select(timeout=left):
                raise AssertionError(f"no line starting {prefix!r} from attach; so far: {self.lines}")
            line = self.p.stderr.readline()
            if not line:
                raise AssertionError(f"attach ended (rc={self.p.wait()}) before {prefix!r}: {self.lines}")
            self.lines.append(line.rstrip("\n"))

    def finish(self, timeout=120):
        _, err = self.p.communicate(timeout=timeout)
        self.lines += err.splitlines()
        return self.p.returncode


def without_tracker_noise(err: str) -> str:
    """stderr without the resource tracker's leaked-semaphore warnings, which multiprocessing
    prints at exit after spawned workers in about 1 run in 10 without stallscope as well."""
    out, skip = [], False
    for line in err.splitlines(keepends=True):
        if "multiprocessing/resource_tracker.py" in line and "UserWarning: resource_tracker" in line:
            skip = True
            continue
        if skip and line.startswith("  warnings.warn("):
            skip = False
            continue
        skip = False
        out.append(line)
    return "".join(out)


def run_attached(t: Target, db: Path, wait_for: str, *extra):
    """Attaches to `t`, waits for the attach's line starting `wait_for`, lets the training go, and
    waits for both to end (the attach must succeed). Returns (rc, stdout, stderr, Attach)."""
    try:
        a = Attach(t.p.pid, db, *extra)
        a.wait_line(wait_for)
        t.go()
        rc, out, err = t.finish()
        assert a.finish() == 0, a.lines
    finally:
        t.kill()
    return rc, out, err, a


def handed_batches(rec: Recording) -> int:
    return sum(1 for s in rec.spans("dl.next") if s["arg1"] is not None and s["arg1"] >= 0 and s["dur_ns"])


def worker_pids(rec: Recording) -> set:
    return {r["arg2"] for r in rec.instants("dl.worker_start")}


def pids_with(rec: Recording, name: str, kind="span") -> dict:
    """pid -> number of spans (or instants) called `name` its threads recorded."""
    view = "span_view" if kind == "span" else "instant_view"
    return {r["pid"]: r["n"] for r in rec.q(f"SELECT pid, COUNT(*) AS n FROM {view} WHERE name = ? GROUP BY pid", name)}


def test_attach_follows_the_running_epoch_and_the_workers_that_exist(tmp_path):
    args = ["--workers", 2, "--epochs", 2]
    ref_rc, ref_out, ref_err = reference(tmp_path, *args)
    t = Target(tmp_path, *args)
    db = tmp_path / "a.db"
    old_workers = set(_children(t.p.pid))
    assert len(old_workers) >= 2, old_workers
    rc, out, err, a = run_attached(t, db, "stallscope: instrumented 2 DataLoader worker processes")
    assert a.wait_line("stallscope: attached to process")
    hooks = a.wait_line("stallscope: DataLoader hooks installed")
    assert "following 1 running iterator" in hooks and "2 worker processes" in hooks, hooks
    # The training ran as it would have without stallscope.
    assert (rc, out, err) == (ref_rc, ref_out, ref_err)
    assert any(line.startswith(f"stallscope: process {t.p.pid} ended") for line in a.lines), a.lines
    rec = Recording(db)
    meta = {r["key"]: r["value"] for r in rec.q("SELECT key, value FROM meta")}
    assert meta.get("mode") == "attach" and meta.get("attached_pid") == str(t.p.pid)
    # Every batch handed after the attach: 40 per epoch, the first one was taken before.
    assert handed_batches(rec) == 79
    # The workers that existed before the attach fetched and put the rest of epoch 0; the next
    # epoch's workers were started after it.
    announced = worker_pids(rec)
    assert old_workers <= announced and len(announced) == 4, (old_workers, announced)
    fetches = pids_with(rec, "dl.fetch")
    puts = pids_with(rec, "dl.put", "instant")
    for pid in announced:
        assert fetches.get(pid, 0) > 0 and puts.get(pid, 0) > 0, (pid, fetches, puts)
    # Every batch put after the attach is labelled; of the 4 sent ahead before it (prefetch_factor
    # 2 x 2 workers), those the workers had put already are not.
    assert 79 - 4 <= sum(puts.values()) <= 79
    config = rec.configs()
    assert config and next(iter(config.values()))["num_workers"] == 2
    # The report reads it like any recording.
    rep = subprocess.run([str(LAUNCHER), "report", "--json", str(db)], capture_output=True, text=True)
    assert rep.returncode == 0, rep.stderr
    doc = json.loads(rep.stdout)
    assert doc["steps"] == 79
    assert doc["recorded_by"] == "attach"
    assert any("recorded by `stallscope attach`" in n for n in doc["notes"]), doc["notes"]


def test_attach_to_persistent_spawned_workers_follows_them_across_epochs(tmp_path):
    t = Target(tmp_path, "--workers", 2, "--persistent", "--start-method", "spawn", "--epochs", 3)
    db = tmp_path / "p.db"
    rc, out, err, _ = run_attached(t, db, "stallscope: instrumented 2 DataLoader worker processes")
    assert rc == 0 and without_tracker_noise(err) == "", err
    assert json.loads(out.split("RESULT ", 1)[1])["handed"] == 120
    rec = Recording(db)
    workers = worker_pids(rec)
    assert len(workers) == 2  # persistent: the same two processes all along
    # Their fetches in all three epochs: dl.worker_ready marks each epoch's resume in a worker.
    ready = pids_with(rec, "dl.worker_ready", "instant")
    assert all(ready.get(pid, 0) >= 2 for pid in workers), ready
    # Every batch put after the attach is labelled; of the 4 sent ahead before it (prefetch_factor
    # 2 x 2 workers), those already put are not (a spawned worker may still have been starting).
    assert 119 - 4 <= sum(pids_with(rec, "dl.put", "instant").values()) <= 119
    assert handed_batches(rec) == 119


@pytest.mark.timed
def test_workers_still_starting_up_are_joined_when_they_reach_the_worker_loop(tmp_path):
    # Spawned workers spend 3 s importing the script; the attach comes while they do, with the
    # training's first next() waiting for them.
    t = Target(tmp_path, "--workers", 2, "--start-method", "spawn", "--epochs", 1, "--slow-child-import", 3,
               wait_ready=False)
    db = tmp_path / "s.db"
    try:
        deadline = time.monotonic() + 30
        while len([c for c in _children(t.p.pid) if "spawn_main" in _cmdline(c)]) < 2:
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.05)
        time.sleep(0.5)
        a = Attach(t.p.pid, db)
        hooks = a.wait_line("stallscope: DataLoader hooks installed")
        assert "following 1 running iterator" in hooks, hooks
        a.wait_line("stallscope: instrumented 2 DataLoader worker processes")
        t.ready()
        t.go()
        rc, _, err = t.finish()
        assert a.finish() == 0, a.lines
    finally:
        t.kill()
    assert rc == 0 and without_tracker_noise(err) == "", err
    rec = Recording(db)
    # The next() that waited for the first batch had begun before the attach: not a span.
    assert handed_batches(rec) == 39
    # The workers were joined while starting up and instrumented within ~10 ms of reaching the
    # worker loop: at most each one's first batch went by unlabelled.
    puts = pids_with(rec, "dl.put", "instant")
    assert set(puts) == worker_pids(rec) and len(puts) == 2
    assert 40 - 2 <= sum(puts.values()) <= 40, puts


@pytest.mark.parametrize("workers", [0, 2])
def test_an_iterator_whose_epoch_ended_is_not_followed(tmp_path, workers):
    # The attach comes between epochs: the loop holds the first epoch's finished iterator (with
    # persistent workers, the loader keeps it for the next epoch). The recording has one epoch,
    # the next, not an extra one of no batches.
    args = ["--workers", workers, "--epochs", 2, "--first-epoch-done", *(["--persistent"] if workers else [])]
    t = Target(tmp_path, *args)
    db = tmp_path / "e.db"
    rc, out, err, a = run_attached(t, db, "stallscope: DataLoader hooks installed")
    assert rc == 0 and without_tracker_noise(err) == "", err
    assert json.loads(out.split("RESULT ", 1)[1])["handed"] == 80
    hooks = next(line for line in a.lines if line.startswith("stallscope: DataLoader hooks installed"))
    assert "no DataLoader iterator runs now" in hooks, hooks
    rec = Recording(db)
    assert len(rec.instants("dl.epoch_begin")) == 1
    assert handed_batches(rec) == 40
    rep = subprocess.run([str(LAUNCHER), "report", "--json", str(db)], capture_output=True, text=True)
    assert rep.returncode == 0, rep.stderr
    doc = json.loads(rep.stdout)
    assert doc["loader"]["epochs"] == 1 and doc["steps"] == 40, doc["loader"]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.mark.timed
def test_ctrl_c_detaches_and_training_goes_on_as_before(tmp_path):
    t = Target(tmp_path, "--workers", 2, "--epochs", 0, "--child")
    db1, db2 = tmp_path / "d1.db", tmp_path / "d2.db"
    try:
        a = Attach(t.p.pid, db1)
        a.wait_line("stallscope: instrumented 2")
        t.go()
        time.sleep(1.5)
        a.p.send_signal(signal.SIGINT)
        assert a.finish() == 0, a.lines
        assert any(f"detached from process {t.p.pid}" in line for line in a.lines), a.lines
        n1 = handed_batches(Recording(db1))
        assert n1 > 20
        time.sleep(0.5)
        assert t.p.poll() is None, "the training stopped after the detach"
        # A second attach to the same process records again, loader settings included.
        b = Attach(t.p.pid, db2, "--duration", 1)
        assert b.finish() == 0, b.lines
        rec2 = Recording(db2)
        assert handed_batches(rec2) > 10
        assert rec2.configs(), "the loader's dl.config is missing from the second recording"
        t.stop()
        rc, out, err = t.finish()
    finally:
        t.kill()
    assert rc == 0
    assert err == "", err  # nothing from stallscope in the program's own output
    child = json.loads(out.split("RESULT ", 1)[1])["child"]
    # After the detach a new child process sees the environment it would have seen without it.
    assert child == {"env": [None, None], "stderr": ""}, child


def test_the_traceback_and_exit_status_are_unchanged(tmp_path):
    # One worker: with two, which of torch's code paths re-raises the error (and so the traceback's
    # line numbers) depends on the order results arrive in, run to run.
    args = ["--workers", 1, "--epochs", 2, "--fail-at", 200]
    ref_rc, ref_out, ref_err = reference(tmp_path, *args)
    assert ref_rc == 1 and "ValueError: item 200 is broken" in ref_err
    assert reference(tmp_path, *args) == (ref_rc, ref_out, ref_err), "the reference itself varies"
    t = Target(tmp_path, *args)
    rc, out, err, _ = run_attached(t, tmp_path / "f.db", "stallscope: instrumented 1 DataLoader worker process ")
    assert (rc, out, err) == (ref_rc, ref_out, ref_err)

    args = ["--workers", 0, "--epochs", 1, "--exit-code", 3]
    ref = reference(tmp_path, *args)
    t = Target(tmp_path, *args, name="x")
    *got, a = run_attached(t, tmp_path / "x.db", "stallscope: DataLoader hooks installed")
    assert "following 1 running iterator" in a.wait_line("stallscope: DataLoader hooks installed")
    assert tuple(got) == ref and got[0] == 3
    rec = Recording(tmp_path / "x.db")
    assert handed_batches(rec) == 39
    assert len(rec.spans("dl.fetch")) == 39  # the single-process fetcher, instrumented in place
    rows = rec.q("SELECT exit_code FROM processes WHERE pid = ?", t.p.pid)
    assert rows and rows[0]["exit_code"] == 3


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


def _attach_rc(*args, env=None):
    p = subprocess.run([str(LAUNCHER), "attach", *map(str, args)], capture_output=True, text=True,
                       env=env or base_env(), timeout=60)
    return p.returncode, p.stdout, p.stderr


def test_bad_targets_get_one_line_and_a_non_zero_status(tmp_path):
    rc, out, err = _attach_rc("--help")
    assert rc == 0 and "Usage: stallscope attach" in out
    for args in ([], ["abc"], ["1", "2"], ["--duration", "0", "1"], ["--bogus", "1"]):
        rc, out, err = _attach_rc(*args)
        assert rc == 2 and len(err.splitlines()) == 1, (args, err)

    gone = subprocess.Popen(["true"])
    gone.wait()
    rc, _, err = _attach_rc("-o", tmp_path / "n.db", gone.pid)
    assert rc == 1 and err.splitlines() == [f"stallscope: no process {gone.pid} (check the pid with `ps`)"]
    assert not (tmp_path / "n.db").exists()

    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        rc, _, err = _attach_rc("-o", tmp_path / "s.db", sleeper.pid)
        assert rc == 1 and len(err.splitlines()) == 1 and "is not a Python program" in err, err
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()

    # A library that cannot be loaded: the reason from the target's dlerror, the target unharmed.
    t = Target(tmp_path, "--workers", 0, "--epochs", 1)
    try:
        rc, _, err = _attach_rc("-o", tmp_path / "l.db", t.p.pid, env=base_env(STALLSCOPE_LIBRARY="/etc/hostname"))
        assert rc == 1 and len(err.splitlines()) == 1, err
        assert "cannot load /etc/hostname into process" in err, err
        assert not (tmp_path / "l.db").exists()
        t.go()
        trc, out, terr = t.finish()
    finally:
        t.kill()
    assert trc == 0 and terr == "" and json.loads(out.split("RESULT ", 1)[1])["handed"] == 40

    # A process that `stallscope run` records already.
    go = tmp_path / "r.go"
    run = subprocess.Popen([str(LAUNCHER), "run", "-q", "-o", str(tmp_path / "r.db"), "--", sys.executable,
                            str(TARGET), "--workers", "0", "--epochs", "1", "--go", str(go)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=base_env())
    try:
        assert run.stdout.readline().strip() == "READY"
        child = _children(run.pid)
        assert len(child) == 1
        rc, _, err = _attach_rc("-o", tmp_path / "r2.db", child[0])
        assert rc == 1 and len(err.splitlines()) == 1 and "already recorded by stallscope" in err, err
        go.touch()
        out, rerr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, rerr

    # Another user's process, for a user who is not root.
    setpriv = shutil.which("setpriv")
    if os.geteuid() == 0 and setpriv:
        t = Target(tmp_path, "--workers", 0, "--epochs", 1, name="u")
        try:
            p = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", str(LAUNCHER), "attach",
                                "-o", "/tmp/never.db", str(t.p.pid)], capture_output=True, text=True, timeout=60)
            assert p.returncode == 1 and "belongs to another user" in p.stderr and len(p.stderr.splitlines()) == 1, \
                p.stderr
            t.go()
            assert t.finish()[0] == 0
        finally:
            t.kill()


LATE_IMPORT = """
import os, sys, time
print("READY", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
import torch
from torch.utils.data import DataLoader
n = sum(1 for _ in DataLoader(list(range(64)), batch_size=4, num_workers=2))
print("RESULT", n, flush=True)
"""


def test_attach_before_torch_is_imported_installs_the_hooks_at_the_import(tmp_path):
    go = tmp_path / "late.go"
    p = subprocess.Popen([sys.executable, "-c", LATE_IMPORT, str(go)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=base_env())
    try:
        assert p.stdout.readline().strip() == "READY"
        a = Attach(p.pid, tmp_path / "late.db")
        line = a.wait_line("stallscope: torch's DataLoader is not imported yet")
        assert "the hooks install when it is" in line
        go.touch()
        out, err = p.communicate(timeout=120)
        assert a.finish() == 0, a.lines
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 0 and out.strip() == "RESULT 16" and err == "", err
    rec = Recording(tmp_path / "late.db")
    assert handed_batches(rec) == 16
    assert len(worker_pids(rec)) == 2  # workers started after the attach: joined as under `run`
    assert sum(pids_with(rec, "dl.put", "instant").values()) == 16


def test_list_shows_the_training_processes_to_attach_to(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=base_env())
    t = Target(tmp_path, "--workers", 2, "--epochs", 1)
    try:
        rc, out, err = _attach_rc("--list")
        assert rc == 0, err
        rows = {int(line.split()[0]): line for line in out.splitlines()[1:]}
        assert out.splitlines()[0].split() == ["PID", "CHILDREN", "RUNNING", "COMMAND"]
        assert t.p.pid in rows and "attach_target.py" in rows[t.p.pid], out
        assert int(rows[t.p.pid].split()[1]) >= 2  # its two workers, listed under it, not as rows
        for child in _children(t.p.pid):
            assert child not in rows, out
        assert sleeper.pid not in rows  # Python, but no torch
        assert _attach_rc("--list", t.p.pid)[0] == 2
        t.go()
        assert t.finish()[0] == 0
    finally:
        t.kill()
        sleeper.kill()
        sleeper.wait()


def test_list_shows_a_training_process_whose_parent_has_torch_loaded(tmp_path):
    """torchrun's agent, a notebook or a test runner imports torch and starts the training process:
    that child is a training process of its own, listed; its DataLoader workers are still not."""
    go, stop = tmp_path / "t.go", tmp_path / "t.stop"
    parent = subprocess.Popen(
        [sys.executable, "-c", "import sys, subprocess, torch; sys.exit(subprocess.run(sys.argv[1:]).returncode)",
         sys.executable, str(TARGET), "--go", str(go), "--stop", str(stop), "--workers", "2", "--epochs", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=base_env(), start_new_session=True)
    try:
        assert parent.stdout.readline().strip() == "READY", parent.stderr.read()
        children = _children(parent.pid)
        assert len(children) == 1, children
        target = children[0]
        rc, out, err = _attach_rc("--list")
        assert rc == 0, err
        rows = {int(line.split()[0]): line for line in out.splitlines()[1:]}
        assert target in rows and "attach_target.py" in rows[target], out
        assert parent.pid in rows, out  # it has torch loaded too: a candidate of its own
        for worker in _children(target):
            assert worker not in rows, out
        go.touch()
        assert parent.wait(timeout=120) == 0, parent.stderr.read()
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)  # the target and its workers too: they hold the pipes
        parent.communicate(timeout=60)
