"""What a session writes is its owner's alone, checked with a real second user: the recording and
its -wal/-shm files, the shared-memory arena, and the live-session registry. The other user can
neither read them nor join the arena, and `attach` from that user to the owner's process is refused
in one line. Needs root (to make the user and to run as it); skipped otherwise."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import LAUNCHER, SLEEPER, wait_for

OTHER = "stallscope-other"
pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("useradd") is None or
                                shutil.which("runuser") is None,
                                reason="needs root, useradd and runuser to test as a second user")


@pytest.fixture(scope="module")
def other_user():
    if subprocess.run(["id", "-u", OTHER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER],
                       check=True, capture_output=True)
    return OTHER


def as_other(user, *cmd, env=None):
    return subprocess.run(["runuser", "-u", user, "--", *cmd], capture_output=True, text=True, timeout=60, env=env)



def test_a_second_user_cannot_read_or_join_a_session(other_user):
    # A folder anyone may enter and list, so that only the files' own modes stand in the way.
    work = Path(tempfile.mkdtemp(prefix="stallscope-perm-", dir="/tmp"))
    work.chmod(0o755)
    pidfile = work / "pid"
    db = work / "run.db"
    launcher = subprocess.Popen([str(LAUNCHER), "run", "-q", "-o", str(db), "--", sys.executable, "-c", SLEEPER,
                                 str(pidfile)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    program = None
    try:
        assert wait_for(lambda: pidfile.exists() and pidfile.read_text()), "the program did not start"
        program = int(pidfile.read_text())
        arenas = sorted(Path("/dev/shm").glob(f"stallscope-{launcher.pid}-*"))
        assert len(arenas) == 1, arenas
        registry = Path(os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/stallscope-{os.getuid()}")
        if os.environ.get("XDG_RUNTIME_DIR"):
            registry = registry / "stallscope"
        assert wait_for(lambda: Path(f"{db}-wal").exists()), "no WAL file while recording"
        live = [p for p in registry.iterdir() if str(launcher.pid) in p.name]
        assert live, f"no live-session entry for {launcher.pid} in {registry}"

        private = [db, Path(f"{db}-wal"), Path(f"{db}-shm"), arenas[0], *live]
        for path in private:
            mode = stat.S_IMODE(path.stat().st_mode)
            assert mode & 0o077 == 0, f"{path} is {oct(mode)}: readable or writable by others"
            r = as_other(other_user, "cat", str(path))
            assert r.returncode != 0 and "Permission denied" in r.stderr, f"{other_user} read {path}: {r.stderr}"
        assert stat.S_IMODE(registry.stat().st_mode) == 0o700, oct(registry.stat().st_mode)
        r = as_other(other_user, "ls", str(registry))
        assert r.returncode != 0, f"{other_user} listed the live sessions: {r.stdout}"

        # Joining the arena is opening it for writing: refused.
        r = as_other(other_user, "sh", "-c", 'exec 3<>"$0"', str(arenas[0]))
        assert r.returncode != 0 and "Permission denied" in r.stderr, r.stderr

        # attach from the other user to the owner's training process: one line, non-zero.
        if as_other(other_user, "test", "-x", str(LAUNCHER)).returncode == 0:
            r = as_other(other_user, str(LAUNCHER), "attach", str(program), "-o", str(work / "other.db"))
            assert r.returncode != 0, r.stdout + r.stderr
            assert len(r.stderr.strip().splitlines()) == 1, r.stderr
            assert not (work / "other.db").exists()
    finally:
        if program is not None:
            try:
                os.kill(program, 2)
            except ProcessLookupError:
                pass
        launcher.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)
