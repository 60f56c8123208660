"""The session's shared memory is anonymous (a memfd): nothing of a `stallscope run` session is in
/dev/shm, and its memory is freed when the last process that maps it exits, whoever was killed
(the launcher, the training process, or both). Named arenas (`stallscope attach` makes one, and
versions before the memfd did) of dead sessions are removed by the next `stallscope run`, with one
line, and those of live sessions are left alone."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import LAUNCHER, SLEEPER, Recording, wait_for

SHM = Path("/dev/shm")


def start_session(tmp_path: Path, tag: str):
    """A `stallscope run` of a program that sleeps: (launcher, the program's pid)."""
    pidfile = tmp_path / f"{tag}.pid"
    launcher = subprocess.Popen([str(LAUNCHER), "run", "-q", "-o", str(tmp_path / f"{tag}.db"), "--",
                                 sys.executable, "-c", SLEEPER, str(pidfile)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert wait_for(lambda: pidfile.exists() and pidfile.read_text()), "the program did not start"
    return launcher, int(pidfile.read_text())


def arena_inode(pid: int) -> int | None:
    """The inode of the memfd arena process `pid` maps, if any."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        if "memfd:stallscope-arena" in line:
            return int(line.split()[4])
    return None


def mapped_anywhere(inode: int) -> list[int]:
    """The processes that still map the arena with this inode."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and arena_inode(int(d.name)) == inode:
            out.append(int(d.name))
    return out


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize("kill", ["launcher", "program", "both"])
def test_a_killed_session_leaves_nothing_behind(tmp_path, kill):
    before = set(SHM.iterdir())
    launcher, program = start_session(tmp_path, kill)
    try:
        env = Path(f"/proc/{program}/environ").read_bytes().split(b"\0")
        shm = next(e for e in env if e.startswith(b"STALLSCOPE_SHM=")).decode()
        assert shm.startswith(f"STALLSCOPE_SHM=fd:{launcher.pid}:"), shm
        assert set(SHM.iterdir()) == before, "the session made a file in /dev/shm"
        inode = arena_inode(program)
        assert inode is not None and arena_inode(launcher.pid) == inode
        if kill in ("launcher", "both"):
            launcher.send_signal(signal.SIGKILL)
            launcher.wait(timeout=30)
        if kill in ("program", "both"):
            os.kill(program, signal.SIGKILL)
        if kill == "launcher":  # the program goes on (test_faults.py); stop it as a user would
            assert alive(program)
            os.kill(program, signal.SIGTERM)
        assert wait_for(lambda: not alive(program)), "the program is still running"
        if kill == "program":
            launcher.wait(timeout=60)
        assert set(SHM.iterdir()) == before
        assert wait_for(lambda: not mapped_anywhere(inode)), f"still mapped by {mapped_anywhere(inode)}"
    finally:
        for pid in (program, launcher.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        launcher.wait(timeout=30)


def test_the_next_run_removes_named_arenas_of_dead_sessions(tmp_path):
    dead = SHM / f"stallscope-{2**22 + 7}-deadbeef"  # a pid above pid_max's default: nobody's
    live = SHM / f"stallscope-{os.getpid()}-0badcafe"
    dead.write_bytes(b"\0" * 4096)
    live.write_bytes(b"\0" * 4096)
    holder = os.open(live, os.O_RDONLY)
    try:
        fcntl.flock(holder, fcntl.LOCK_SH)  # what a live creator holds until it removes its arena
        # Arenas younger than 10 s are left alone (one being made is locked a moment later).
        time.sleep(max(0.0, 10.5 - (time.time() - dead.stat().st_ctime)))
        nxt = subprocess.Popen([str(LAUNCHER), "run", "-o", str(tmp_path / "next.db"), "--", sys.executable, "-c",
                                "pass"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _, err = nxt.communicate(timeout=120)
        assert nxt.returncode == 0, err
        lines = [ln for ln in err.splitlines() if "shared-memory arena" in ln]
        assert len(lines) == 1 and lines[0].startswith("stallscope: removed 1 shared-memory arena "), err
        assert not dead.exists()
        assert live.exists(), "a live session's arena was removed"
    finally:
        os.close(holder)
        for p in (dead, live):
            p.unlink(missing_ok=True)


SMALL_SHM = ("mount -t tmpfs -o size=64m tmpfs /dev/shm && fallocate -l 57m /dev/shm/fill && "
             'exec "$@"')


def in_small_shm(*cmd):
    """Runs cmd in a mount namespace of its own whose /dev/shm is a 64 MiB tmpfs with 7 MiB free,
    as containers give it: the DataLoader's batches need about 6 of them."""
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", SMALL_SHM, "sh", *map(str, cmd)],
                          capture_output=True, text=True, timeout=300)


def test_a_nearly_full_dev_shm_is_left_to_the_dataloader(tmp_path):
    probe = in_small_shm("true")
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a private /dev/shm here (needs root and unshare): {probe.stderr.strip()}")
    prog = Path(__file__).parent / "programs" / "big_batches.py"
    plain = in_small_shm(sys.executable, prog)
    assert plain.returncode == 0, plain.stderr
    db = tmp_path / "big.db"
    r = in_small_shm(LAUNCHER, "run", "-o", db, "--", sys.executable, prog)
    assert r.returncode == 0, r.stderr
    # The same sum, and nothing of the session in /dev/shm at the end.
    assert result_line(r.stdout) == result_line(plain.stdout)
    assert "stallscope" not in result_line(r.stdout)
    assert len(Recording(db).spans("dl.fetch")) == 24


def result_line(stdout: str) -> str:
    return next(ln for ln in stdout.splitlines() if ln.startswith("RESULT "))
