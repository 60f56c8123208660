"""What a session writes is its owner's alone, checked with a real second user: the recording and
its -wal/-shm files, the shared-memory arena (a memfd, reached as /proc/PID/fd/FD), and the
live-session registry. The other user can neither read them nor join the arena, and `attach` from
that user to the owner's process is refused in one line. Needs root (to make the user and to run
as it); skipped otherwise."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from conftest import LAUNCHER, NEEDS_OTHER_USER, SLEEPER, as_other, wait_for

pytestmark = NEEDS_OTHER_USER


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
        # The arena is anonymous (a memfd): the launcher's descriptor, named in the environment.
        env = Path(f"/proc/{program}/environ").read_bytes().split(b"\0")
        shm = next(e for e in env if e.startswith(b"STALLSCOPE_SHM=")).decode().split("=", 1)[1]
        _, holder, fd = shm.split(":")
        arenas = [Path(f"/proc/{holder}/fd/{fd}")]
        assert int(holder) == launcher.pid and arenas[0].exists(), shm
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
