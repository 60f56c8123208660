"""Shared set-up for the Python tests: where the build is, how to run a program under
`stallscope run`, and how to read the recording.

STALLSCOPE_BUILD names the CMake build directory (default <repo>/build); the tests use its
bin/stallscope and lib/libstallscope.so. Tests that run torch are skipped, with the reason, when
torch is not installed; every test is skipped when the build is missing.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("STALLSCOPE_BUILD", REPO / "build")).resolve()
LAUNCHER = BUILD / "bin" / "stallscope"
LIBRARY = BUILD / "lib" / "libstallscope.so"
PYTHON_DIR = REPO / "python"
PROGRAMS = Path(__file__).resolve().parent / "programs"
LOADER_PROG = PROGRAMS / "loader_prog.py"
# The report's recommendations about speed that name a DataLoader setting or torch's threads.
SPEED_ADVICE = {"increase_num_workers", "reduce_num_workers", "increase_prefetch_factor", "enable_persistent_workers",
                "limit_torch_threads"}
HAVE_TORCH = importlib.util.find_spec("torch") is not None
# The reference loader's native module of this build, or None when it is not built.
LOADER_MODULE = next((BUILD / "lib" / ("_stallscope_loader" + s) for s in importlib.machinery.EXTENSION_SUFFIXES
                      if (BUILD / "lib" / ("_stallscope_loader" + s)).exists()), None)


# The start of a child program that runs the reference loader in a fresh interpreter: the native
# module of this build, the package, torch's own threads started, and threads()/settle(n) to count
# the process's threads (the loader's must be joined when it stops).
LOADER_CHILD_PRELUDE = f"""
import importlib.util, os, sys, time, json, gc, threading
spec = importlib.util.spec_from_file_location("_stallscope_loader", {str(LOADER_MODULE)!r})
M = importlib.util.module_from_spec(spec); spec.loader.exec_module(M); sys.modules["_stallscope_loader"] = M
sys.path.insert(0, {str(PYTHON_DIR)!r})
import numpy as np, torch, stallscope
from stallscope import ReferenceLoader as RL, LoaderError
torch.zeros(1).sum()  # torch's own threads start now, before the counts
def threads():
    return len(os.listdir("/proc/self/task"))
def settle(n):
    for _ in range(200):
        if threads() <= n:
            return threads()
        time.sleep(0.01)
    return threads()
"""


def import_stallscope():
    """The stallscope package from python/, with the native loader module of this build. Called at
    a test module's top: skips the whole module when that module is not built or torch is absent."""
    if LOADER_MODULE is None:
        pytest.skip(f"the loader's Python module is not built in {BUILD / 'lib'}", allow_module_level=True)
    if not HAVE_TORCH:
        pytest.skip("torch is not installed", allow_module_level=True)
    if "_stallscope_loader" not in sys.modules:
        spec = importlib.util.spec_from_file_location("_stallscope_loader", LOADER_MODULE)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        sys.modules["_stallscope_loader"] = mod
    if str(PYTHON_DIR) not in sys.path:
        sys.path.insert(0, str(PYTHON_DIR))
    import stallscope
    import stallscope.reference_loader

    return stallscope


def pytest_collection_modifyitems(config, items):
    no_build = pytest.mark.skip(reason=f"stallscope build not found: {LAUNCHER} and {LIBRARY} "
                                       "(build it, or set STALLSCOPE_BUILD to the build directory)")
    no_torch = pytest.mark.skip(reason="torch is not installed: these tests run real torch DataLoader loops")
    for item in items:
        if not (LAUNCHER.exists() and LIBRARY.exists()):
            item.add_marker(no_build)
        elif "torch" in item.keywords and not HAVE_TORCH:
            item.add_marker(no_torch)


def pytest_configure(config):
    config.addinivalue_line("markers", "torch: the test runs torch")
    # scripts/test.sh runs the tests without it beside its other builds (at nice 19), and these
    # alone afterwards. A test whose outcome a busy machine could change carries it: it asserts on
    # wall or CPU time, a rate, a CPU share, a speed-up or the advice drawn from measured speeds,
    # or it races a fixed sleep.
    config.addinivalue_line("markers", "timed: the outcome depends on the machine's free CPU (run alone)")
    config.addinivalue_line("markers", "wheel: installs the wheel scripts/test.sh builds (STALLSCOPE_TEST_WHEEL)")


@pytest.fixture(scope="session", autouse=True)
def private_tmpdir(tmp_path_factory):
    """Every child program's temporary directory ($TMPDIR) is one of this test session's, removed at
    its end. Without it a run of the suite left about 44 of Python's multiprocessing `pymp-*`
    folders (DataLoader workers' sockets) in the machine's /tmp; a training run that ends normally
    leaves none, plain or under stallscope, so they come from tests that end training otherwise."""
    d = tmp_path_factory.mktemp("tmpdir")
    old = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(d)
    yield
    if old is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = old
    shutil.rmtree(d, ignore_errors=True)


def base_env(**extra) -> dict:
    """The environment for a child program: ours minus anything stallscope left over."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("STALLSCOPE_") and k not in ("LD_PRELOAD", "PYTHONPATH")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update({k: v for k, v in extra.items() if v is not None})
    return env


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str
    db: Path | None

    @property
    def result(self) -> dict:
        for line in self.stdout.splitlines():
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT "):])
        raise AssertionError(f"no RESULT line; rc={self.rc}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}")

    def stderr_without_stallscope(self) -> str:
        """stderr minus the launcher's own `stallscope:` lines."""
        return "".join(line for line in self.stderr.splitlines(keepends=True) if not line.startswith("stallscope:"))


def run_plain(args, *, env=None, timeout=120, cwd=None) -> Run:
    """Runs `python3 ARGS` without stallscope."""
    p = subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True,
                       env=env or base_env(), timeout=timeout, cwd=cwd)
    return Run(p.returncode, p.stdout, p.stderr, None)


def run_recorded(db: Path, args, *, env=None, timeout=120, cwd=None) -> Run:
    """Runs `stallscope run -o DB -- python3 ARGS`."""
    p = subprocess.run([str(LAUNCHER), "run", "-o", str(db), "--", sys.executable, *map(str, args)],
                       capture_output=True, text=True, env=env or base_env(), timeout=timeout, cwd=cwd)
    return Run(p.returncode, p.stdout, p.stderr, db)


class Recording:
    """Read access to a session database through the views of storage/schema.cc."""

    def __init__(self, path: Path):
        assert path.exists(), f"no database at {path}"
        self.con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        self.con.row_factory = sqlite3.Row

    def q(self, sql, *args):
        return [dict(r) for r in self.con.execute(sql, args)]

    def spans(self, name):
        return self.q("SELECT * FROM span_view WHERE name = ? ORDER BY start_ns, id", name)

    def instants(self, name):
        return self.q("SELECT * FROM instant_view WHERE name = ? ORDER BY ts_ns, id", name)

    def string(self, sid):
        rows = self.q("SELECT value FROM strings WHERE id = ?", sid)
        return rows[0]["value"] if rows else None

    GROUPED_BY_LOADER = ("dl.next", "dl.step", "dl.epoch_begin", "dl.epoch_end", "dl.sent", "dl.recv", "dl.pin",
                         "dl.config", "dl.worker_start", "dl.worker_stop")

    def summary_mismatches(self) -> list:
        """The summary tables (docs/schema.md, "Summaries") against the same aggregates of the detail
        rows, at every level: the rows that differ (empty when they all agree), and how many rows
        were compared."""
        grouped = ",".join(f"'{n}'" for n in self.GROUPED_BY_LOADER)
        grp = (f"(CASE WHEN (SELECT value FROM strings WHERE id = name_id) IN ({grouped}) "
               "THEN coalesce(arg0, -1) ELSE -1 END)")
        bad, compared = [], 0
        # (detail columns, detail table and filter, summary table and columns), grouped by the first
        # columns of each
        tables = [
            (f"thread_id, name_id, {grp}, count(*), sum(dur_ns), min(dur_ns), max(dur_ns)",
             "spans WHERE dur_ns IS NOT NULL AND start_ns >= 0", "start_ns", "GROUP BY 1, 2, 3, 4",
             "span_summaries", "thread_id, name_id, grp, count, total_ns, min_ns, max_ns"),
            (f"thread_id, name_id, {grp}, count(*)", "instants WHERE ts_ns >= 0", "ts_ns", "GROUP BY 1, 2, 3, 4",
             "instant_summaries", "thread_id, name_id, grp, count"),
            ("track_id, count(*), min(value), max(value)", "counters WHERE ts_ns >= 0", "ts_ns", "GROUP BY 1, 2",
             "counter_summaries", "track_id, count, min, max"),
            # hand-offs: next() calls that handed a batch, where they ended
            ("thread_id, arg0, count(*)",
             ("spans WHERE dur_ns IS NOT NULL AND arg0 >= 0 AND arg1 >= 0 AND start_ns + dur_ns >= 0 AND name_id IN "
              "(SELECT id FROM strings WHERE value = 'dl.next')"), "(start_ns + dur_ns)", "GROUP BY 1, 2, 3",
             # (a row whose interval holds only a loader start, and no hand-off, has none here)
             "(SELECT * FROM handoff_summaries WHERE batches > 0)", "thread_id, loader, batches"),
        ]
        for level in (10**9, 10**10, 10**11):
            pairs = [(f"SELECT {time} / {level}, {cols} FROM {source} {group}",
                      f"SELECT bucket, {scols} FROM {summary} WHERE level_ns = {level} AND bucket >= 0")
                     for cols, source, time, group, summary, scols in tables]
            for detail, summary in pairs:
                want = {tuple(r) for r in self.con.execute(detail)}
                got = {tuple(r) for r in self.con.execute(summary)}
                compared += len(want)
                bad += [("detail only", level, r) for r in sorted(want - got)]
                bad += [("summary only", level, r) for r in sorted(got - want)]
        assert compared > 0, "no rows to compare"
        return bad

    def configs(self) -> dict:
        """dl.config documents by loader id."""
        out = {}
        for r in self.instants("dl.config"):
            doc = json.loads(self.string(r["arg1"]))
            assert doc["loader"] == r["arg0"]
            out[r["arg0"]] = doc
        return out

    def thread_names(self) -> dict:
        """(pid, tid) -> thread name."""
        return {(r["pid"], r["tid"]): r["name"] for r in self.q(
            "SELECT p.pid, t.tid, t.name FROM threads t JOIN processes p ON p.id = t.process_id")}

    def names(self) -> set:
        return {r["name"] for r in self.q("SELECT name FROM span_view UNION SELECT name FROM instant_view")}


@pytest.fixture
def recorded(tmp_path):
    """recorded(args, name=...) runs the loader program (or ARGS) under the launcher and returns
    (Run, Recording); asserts a zero exit status unless check=False."""

    def go(args, *, name="run", check=True, env=None, timeout=120):
        db = tmp_path / f"{name}.db"
        r = run_recorded(db, args, env=env, timeout=timeout)
        if check:
            assert r.rc == 0, f"rc={r.rc}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
        return r, Recording(db)

    return go


# A program that writes its pid to the file named by its first argument, then sleeps a minute:
# something for `stallscope run` to record while a test looks at the session from outside.
SLEEPER = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"


def wait_for(cond, timeout=30.0):
    """cond()'s first true value within `timeout` seconds, polled every 50 ms; else its last."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    return cond()


@contextlib.contextmanager
def xvfb_display():
    """A private Xvfb server for a dashboard test: yields its display number ("12"), or None when
    Xvfb is not installed; the server is stopped on the way out."""
    xvfb = shutil.which("Xvfb")
    if xvfb is None:
        yield None
        return
    r, w = os.pipe()
    server = subprocess.Popen([xvfb, "-displayfd", str(w), "-screen", "0", "1600x1000x24", "-nolisten", "tcp"],
                              pass_fds=(w,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(w)
    try:
        with os.fdopen(r) as f:
            display = f.readline().strip()
        assert display.isdigit(), "Xvfb did not report its display"
        yield display
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)


# ---------------------------------------------------------------------------------------------
# A second, non-root user (test_permissions.py, test_faults.py): made once with useradd; tests
# that need it skip where the suite is not run as root.

OTHER = "stallscope-other"
NEEDS_OTHER_USER = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("useradd") is None or
                                      shutil.which("runuser") is None,
                                      reason="needs root, useradd and runuser to test as a second user")


@pytest.fixture(scope="session")
def other_user():
    if subprocess.run(["id", "-u", OTHER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER],
                       check=True, capture_output=True)
    return OTHER


def as_other(user, *cmd, env=None, timeout=60):
    return subprocess.run(["runuser", "-u", user, "--", *map(str, cmd)], capture_output=True, text=True,
                          timeout=timeout, env=env)
