"""A session whose launcher was SIGKILLed leaves its shared-memory arena in /dev/shm (nothing of
it runs to remove it). The next `stallscope run` removes it, says so in one line, and leaves the
arenas of live sessions alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import LAUNCHER, SLEEPER, wait_for

SHM = Path("/dev/shm")

def arenas_of(pid: int) -> list[Path]:
    return sorted(SHM.glob(f"stallscope-{pid}-*"))



def start_session(tmp_path: Path, tag: str):
    """A `stallscope run` of a program that sleeps: (launcher, the program's pid, its arena)."""
    pidfile = tmp_path / f"{tag}.pid"
    launcher = subprocess.Popen([str(LAUNCHER), "run", "-q", "-o", str(tmp_path / f"{tag}.db"), "--",
                                 sys.executable, "-c", SLEEPER, str(pidfile)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert wait_for(lambda: pidfile.exists() and pidfile.read_text()), "the program did not start"
    arena = arenas_of(launcher.pid)
    assert len(arena) == 1, arena
    return launcher, int(pidfile.read_text()), arena[0]


def test_the_next_run_removes_the_arena_of_a_killed_session(tmp_path):
    dead_launcher, dead_program, dead_arena = start_session(tmp_path, "dead")
    live_launcher, live_program, live_arena = start_session(tmp_path, "live")
    try:
        dead_launcher.send_signal(signal.SIGKILL)
        dead_launcher.wait(timeout=30)
        os.kill(dead_program, signal.SIGKILL)
        assert dead_arena.exists(), "the killed launcher's arena should still be there"
        # Arenas younger than 10 s are left alone (one being made is locked a moment later).
        time.sleep(max(0.0, 10.5 - (time.time() - dead_arena.stat().st_ctime)))

        nxt = subprocess.Popen([str(LAUNCHER), "run", "-o", str(tmp_path / "next.db"), "--", sys.executable, "-c",
                                "pass"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _, err = nxt.communicate(timeout=120)
        assert nxt.returncode == 0, err
        lines = [ln for ln in err.splitlines() if "shared-memory arena" in ln]
        assert len(lines) == 1 and lines[0].startswith("stallscope: removed "), err
        assert not dead_arena.exists()
        assert live_arena.exists(), "a live session's arena was removed"
        assert not arenas_of(nxt.pid), "the new run left its own arena behind"
    finally:
        try:
            os.kill(live_program, signal.SIGINT)
        except ProcessLookupError:
            pass
        live_launcher.wait(timeout=60)
    assert not live_arena.exists(), "the live session's launcher did not remove its arena at its end"
