"""`stallscope top` on a real PyTorch training loop recorded live (programs/top_train.py: DataLoader
workers whose samples sleep, a seeded model), watched in a real terminal: a tmux pane of 80x24.
The frame shows samples/s above zero, the stall, the queue and a line per worker, and its figures
move from one refresh to the next; it fits the pane (the header stays on the first row, nothing
wraps), also after a resize; `q` and Ctrl-C quit with exit status 0 and the terminal's settings as
they were; top never traces the training process, whose exit status and result are those of the
same program run without stallscope. Then the finished recording (`--once`, and stdout not a
terminal), and the bad input: each a single line and a non-zero exit.

Every test has its own session registry ($XDG_RUNTIME_DIR), so that sessions of other users of
the machine are not seen.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import HAVE_TORCH, LAUNCHER, PROGRAMS, SLEEPER, base_env, run_plain, wait_for

TRAIN = PROGRAMS / "top_train.py"
STEPS = 1000  # at 2 workers x 4 samples x 10 ms, about 20 ms a step: 20 s of training

pytestmark = [pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed"),
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]


@pytest.fixture
def env(tmp_path):
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    return base_env(XDG_RUNTIME_DIR=str(runtime), LANG="C.UTF-8", LC_ALL="C.UTF-8")


def top(*args, env, timeout=60, stdin=subprocess.DEVNULL):
    return subprocess.run([str(LAUNCHER), "top", *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=timeout, stdin=stdin)


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def training_pid(launcher_pid: int) -> int | None:
    for c in children(launcher_pid):
        try:
            if "top_train.py" in Path(f"/proc/{c}/cmdline").read_text():
                return c
        except OSError:
            pass
    return None


class Pane:
    """A detached tmux session of its own server (-L), running `command` in a COLSxROWS pane."""

    def __init__(self, name: str, command: str, env: dict, cols=80, rows=24):
        self.base = ["tmux", "-L", f"stallscope-top-{os.getpid()}-{name}", "-f", "/dev/null"]
        self.target = name
        subprocess.run([*self.base, "new-session", "-d", "-x", str(cols), "-y", str(rows), "-s", name,
                        "sh", "-c", command], env=env, check=True, timeout=30)

    def lines(self) -> list[str]:
        out = subprocess.run([*self.base, "capture-pane", "-p", "-t", self.target], capture_output=True, text=True,
                             timeout=30).stdout
        return out.split("\n")

    def keys(self, *keys):
        subprocess.run([*self.base, "send-keys", "-t", self.target, *keys], check=True, timeout=30)

    def resize(self, cols, rows):
        subprocess.run([*self.base, "resize-window", "-t", self.target, "-x", str(cols), "-y", str(rows)],
                       check=True, timeout=30)

    def close(self):
        subprocess.run([*self.base, "kill-server"], capture_output=True, timeout=30)


def frame_figures(lines: list[str]) -> dict | None:
    """The figures of a top frame in a pane, or None when the pane does not hold one."""
    if not lines or not lines[0].startswith("stallscope top"):
        return None
    text = "\n".join(lines)
    speed = re.search(r"^speed\s+([\d.]+) samples/s .* ([\d,]+) steps", text, re.M)
    stall = re.search(r"^stall\s+([\d.]+)% of the last 10 s waiting for data", text, re.M)
    workers = re.findall(r"^\s+worker (\d+)\s+(\d+)\s+(\d+)%\s+([\d.]+)%", text, re.M)
    return {
        "samples_per_s": float(speed.group(1)) if speed else None,
        "steps": int(speed.group(2).replace(",", "")) if speed else None,
        "stall": float(stall.group(1)) if stall else None,
        "queue": re.search(r"^queue\s+(\d+) batch(es)? ready", text, re.M) is not None,
        "workers": workers,
        "footer": any(line.startswith("q quit") for line in lines),
        "text": text,
    }


@pytest.mark.timed
def test_top_follows_a_live_training_in_a_terminal(tmp_path, env):
    plain = run_plain([TRAIN, STEPS], env=env, timeout=300)
    assert plain.rc == 0, plain.stderr
    db = tmp_path / "live.db"
    launcher = subprocess.Popen([str(LAUNCHER), "run", "-o", str(db), "--", sys.executable, str(TRAIN), str(STEPS)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    panes = []
    try:
        assert launcher.stdout.readline().strip() == "training"
        pid = wait_for(lambda: training_pid(launcher.pid), timeout=30)
        assert pid, "the training process was not found under the launcher"
        before, after, rc_file = tmp_path / "stty.before", tmp_path / "stty.after", tmp_path / "top.rc"
        pane = Pane("live", f"stty -g > {before}; {LAUNCHER} top {pid}; echo $? > {rc_file}; stty -g > {after}; "
                            "sleep 600", env)
        panes.append(pane)

        # A frame with the live figures: samples/s above zero, the stall, the queue, both workers.
        def ready():
            f = frame_figures(pane.lines())
            return f if f and f["samples_per_s"] and len(f["workers"]) == 2 and f["stall"] is not None else None

        first = wait_for(ready, timeout=30)
        assert first, "no complete frame:\n" + "\n".join(pane.lines())
        assert first["queue"] and first["footer"], first["text"]
        assert first["samples_per_s"] > 0
        # The worker lines are the training process's DataLoader workers (its children).
        assert {int(w[1]) for w in first["workers"]} <= set(children(pid)), (first["workers"], children(pid))
        # The frame fits 80x24: the header on the first row (nothing scrolled it away), every line in
        # the pane's width, the footer shown.
        lines = pane.lines()
        assert len([ln for ln in lines if ln]) <= 24 and all(len(ln) <= 80 for ln in lines)
        # top reads the recording only: nobody traces the training process.
        status = Path(f"/proc/{pid}/status").read_text()
        assert re.search(r"^TracerPid:\s+0$", status, re.M), status

        # It moves: a later frame has more steps.
        later = wait_for(lambda: (f := frame_figures(pane.lines())) and f["steps"] and f["steps"] > first["steps"]
                         and f, timeout=10)
        assert later, f"the steps did not move from {first['steps']}:\n" + "\n".join(pane.lines())
        # The analysis's cause and advice arrive (its first run is at start, then every 5 s).
        def analysed():
            text = "\n".join(pane.lines())
            return ("analysed" in text and re.search(r"^cause\s+data_wait \d+%", text, re.M)
                    and re.search(r"^advice\s+(\[(high|medium|low)\] |none)", text, re.M) and text)

        assert wait_for(analysed, timeout=20), "\n".join(pane.lines())

        # A narrower, shorter terminal: lines cut, the header still on top, the footer kept.
        pane.resize(50, 14)
        narrow = wait_for(lambda: (ln := pane.lines()) and len(ln[0]) <= 50 and ln[0].startswith("stallscope top")
                          and any(x.startswith("q quit") for x in ln) and ln, timeout=10)
        assert narrow, "\n".join(pane.lines())
        assert all(len(ln) <= 50 for ln in narrow) and len([ln for ln in narrow if ln]) <= 14

        # q quits: exit status 0, the terminal's settings restored, the frame gone (alternate screen left).
        pane.keys("q")
        assert wait_for(lambda: rc_file.exists() and after.exists(), timeout=10), "\n".join(pane.lines())
        assert rc_file.read_text().strip() == "0"
        assert wait_for(lambda: after.read_text().strip(), timeout=5) == before.read_text().strip()
        assert not any(ln.startswith("stallscope top") for ln in pane.lines())

        # Ctrl-C quits the same way.
        rc2, after2 = tmp_path / "top2.rc", tmp_path / "stty2.after"
        pane2 = Pane("ctrlc", f"{LAUNCHER} top {db}; echo $? > {rc2}; stty -g > {after2}; sleep 600", env)
        panes.append(pane2)
        assert wait_for(lambda: frame_figures(pane2.lines()), timeout=30), "\n".join(pane2.lines())
        pane2.keys("C-c")
        assert wait_for(lambda: rc2.exists() and after2.exists() and after2.read_text().strip(), timeout=10)
        assert rc2.read_text().strip() == "0"
        assert after2.read_text().strip() == before.read_text().strip()
    finally:
        for p in panes:
            p.close()
        out, err = launcher.communicate(timeout=300)
    # The training: its exit status and result as without stallscope and top.
    assert launcher.returncode == 0, err
    result = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
    assert result == [ln for ln in plain.stdout.splitlines() if ln.startswith("RESULT ")], (out, plain.stdout)

    # The finished recording: one plain frame, that says it is finished, with --once and without a
    # terminal alike.
    for args in (["--once", db], [db]):
        r = top(*args, env=env)
        assert r.returncode == 0, r.stderr
        assert "\x1b" not in r.stdout
        lines = r.stdout.splitlines()
        assert lines[0].startswith("stallscope top") and "finished" in lines[0], r.stdout
        f = frame_figures(lines)
        assert f["steps"] == STEPS, r.stdout
        assert all(len(ln) <= 80 for ln in lines), r.stdout


def one_line_error(r, rc: int, *words: str):
    assert r.returncode == rc, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("stallscope: "), r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


def test_top_refuses_bad_input_in_one_line(tmp_path, env):
    one_line_error(top(env=env), 2, "no live session", "stallscope run", "see 'stallscope top --help'")
    one_line_error(top(tmp_path / "absent.db", env=env), 1, "absent.db")
    text = tmp_path / "notes.txt"
    text.write_text("not a recording\n" * 100)
    one_line_error(top(text, env=env), 1, "notes.txt")
    one_line_error(top("987654321", env=env), 1, "no process 987654321", "pass the pid")
    one_line_error(top("a.db", "b.db", env=env), 2, "one process or recording at a time")
    one_line_error(top("-n", "0", env=env), 2, "--interval needs a number of seconds")
    one_line_error(top("--bogus", env=env), 2, "--bogus")
    # A process that runs but that no session records: this test's own.
    one_line_error(top(os.getpid(), env=env), 1, f"process {os.getpid()}", "stallscope attach")


def test_top_without_argument_picks_the_one_live_session(tmp_path, env):
    sleepers = []
    try:
        for i in range(2):
            pidfile = tmp_path / f"pid{i}"
            p = subprocess.Popen([str(LAUNCHER), "run", "-q", "-o", str(tmp_path / f"s{i}.db"), "--", sys.executable,
                                  "-c", SLEEPER, str(pidfile)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 env=env)
            sleepers.append(p)
            assert wait_for(lambda f=pidfile: f.exists() and f.read_text(), timeout=30)
            if i == 0:
                # One live session: `top` picks it (a frame of s0.db; its program has no DataLoader).
                r = top("--once", env=env)
                assert r.returncode == 0, r.stderr
                assert "s0.db" in r.stdout.splitlines()[0] and "live" in r.stdout.splitlines()[0], r.stdout
                assert "no DataLoader training loop seen yet" in r.stdout
                # And its pid finds it too, as does the launcher's.
                for pid in (pidfile.read_text(), p.pid):
                    r = top("--once", pid, env=env)
                    assert r.returncode == 0 and "s0.db" in r.stdout, r.stderr
        # Two: one line that lists them and says what to type.
        r = top(env=env)
        one_line_error(r, 2, "2 live sessions", str(sleepers[0].pid), str(sleepers[1].pid), "stallscope top ")
    finally:
        for p in sleepers:
            p.terminate()
            p.communicate(timeout=60)
