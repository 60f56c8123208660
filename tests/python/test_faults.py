"""Faults at random moments (docs/robustness.md, "Faults during a run"): SIGKILL of the training
process at 10 random moments, and SIGKILL of the `stallscope run` launcher itself. Each recording
must pass `PRAGMA integrity_check` and hold every step the program had finished; the training's
outcome is compared with a run without stallscope."""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import LAUNCHER, NEEDS_OTHER_USER, PROGRAMS, Recording, as_other, base_env, run_plain, wait_for

pytestmark = pytest.mark.torch
PROG = PROGRAMS / "fault_train.py"


def finished_steps(progress: Path) -> list[tuple[int, int]]:
    """The (step, monotonic ns) lines the program wrote, whole lines only."""
    if not progress.exists():
        return []
    out = []
    for line in progress.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:
            out.append((int(parts[0]), int(parts[1])))
    return out


def integrity(db: Path) -> str:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def handed_steps(db: Path) -> int:
    """next() calls of the training loop that handed a batch, as recorded."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        # arg1: the batch handed, -1 for StopIteration (docs/events.md); one loader here.
        return con.execute("SELECT count(*) FROM span_view WHERE name = 'dl.next' AND arg1 >= 0 AND "
                           "dur_ns IS NOT NULL").fetchone()[0]
    finally:
        con.close()


def program_pid(launcher: subprocess.Popen) -> int | None:
    """The launcher's child: the program."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == launcher.pid:
            return int(d.name)
    return None


@pytest.mark.timed
def test_sigkill_of_the_training_process_at_random_moments(tmp_path):
    rng = random.Random(int(os.environ.get("STALLSCOPE_FAULT_SEED", "20261126")))
    # 3 moments in the start-up (torch's import, the workers' start: a few seconds here), 7 after
    # the first step, up to 2 s into the loop.
    moments = [("launch", rng.uniform(0.2, 2.0)) for _ in range(3)] + \
              [("first step", rng.uniform(0.0, 2.0)) for _ in range(7)]
    seen_steps = []
    for i, (since, after) in enumerate(moments):
        db, progress = tmp_path / f"k{i}.db", tmp_path / f"k{i}.progress"
        launcher = subprocess.Popen([str(LAUNCHER), "run", "-q", "-o", str(db), "--", sys.executable, str(PROG),
                                     str(progress), "100000"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    text=True, env=base_env())
        try:
            assert wait_for(lambda lc=launcher: program_pid(lc) is not None, 30), "the program did not start"
            if since == "first step":
                assert wait_for(lambda pr=progress: finished_steps(pr), 120), "the loop did not start"
            time.sleep(after)
            pid = program_pid(launcher)
            assert pid is not None and launcher.poll() is None, f"the program ended before {since} + {after:.2f} s"
            os.kill(pid, signal.SIGKILL)
            _, err = launcher.communicate(timeout=60)
        finally:
            if launcher.poll() is None:
                launcher.kill()
                launcher.wait()
        # The launcher ends the way the program ended, and the recording is sound and complete.
        when = f"{since} + {after:.2f} s"
        assert launcher.returncode == -signal.SIGKILL, (when, launcher.returncode, err)
        assert integrity(db) == "ok", when
        assert not Path(f"{db}-wal").exists() and not Path(f"{db}-shm").exists(), when
        steps = finished_steps(progress)
        done = steps[-1][0] if steps else 0
        # Every step the program had finished is in the recording: the rings are shared memory,
        # and the launcher drains what they held after the program died.
        assert handed_steps(db) >= done, (when, handed_steps(db), done)
        seen_steps.append(done)
    # The moments fell before the loop, in its first steps and well into it.
    assert min(seen_steps) == 0 and max(seen_steps) > 30, seen_steps


def test_sigkill_of_the_launcher_leaves_training_running_to_the_same_result(tmp_path):
    """The launcher's death does not reach the program: it goes on to the end, with the same result
    as without stallscope, and what was drained before the death is a sound recording. (A terminal
    that closes sends SIGHUP to the whole foreground process group, program included, so there the
    program stops as it would have without stallscope.)"""
    plain = run_plain([PROG, tmp_path / "plain.progress", "600"], timeout=300)
    assert plain.rc == 0, plain.stderr
    db, progress, out = tmp_path / "l.db", tmp_path / "l.progress", tmp_path / "l.out"
    with open(out, "w") as stdout:
        launcher = subprocess.Popen([str(LAUNCHER), "run", "-q", "-o", str(db), "--", sys.executable, str(PROG),
                                     str(progress), "600"], stdout=stdout, stderr=subprocess.STDOUT,
                                    env=base_env(), start_new_session=True)
        assert wait_for(lambda: len(finished_steps(progress)) >= 50, 120), out.read_text()
        pid = program_pid(launcher)
        assert pid is not None
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(timeout=30)
        killed_at = len(finished_steps(progress))
        assert killed_at < 600, "the program finished before the launcher was killed"
    # The program goes on by itself and ends with the same result.
    assert wait_for(lambda: "RESULT " in out.read_text(), 300), out.read_text()[-2000:]
    assert wait_for(lambda: not Path(f"/proc/{pid}").exists() or
                    Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z", 60)
    result = [ln for ln in out.read_text().splitlines() if ln.startswith("RESULT ")]
    assert result == [ln for ln in plain.stdout.splitlines() if ln.startswith("RESULT ")]
    assert integrity(db) == "ok"
    assert handed_steps(db) > 0
    # Cut off mid-run: the summaries agree with the detail rows drained until then.
    assert Recording(db).summary_mismatches() == []


def test_recording_deleted_mid_run(tmp_path):
    """The recording removed while the run writes it: training goes on to the same result and exit
    status, and stallscope says in one line that the recording is lost, not that it was saved."""
    plain = run_plain([PROG, tmp_path / "plain.progress", "300"], timeout=300)
    assert plain.rc == 0, plain.stderr
    db, progress = tmp_path / "d.db", tmp_path / "d.progress"
    launcher = subprocess.Popen([str(LAUNCHER), "run", "-o", str(db), "--", sys.executable, str(PROG), str(progress),
                                 "300"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=base_env())
    try:
        assert wait_for(lambda: finished_steps(progress), 120), "the loop did not start"
        for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
            p.unlink(missing_ok=True)
        out, err = launcher.communicate(timeout=300)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert launcher.returncode == 0, err
    assert [ln for ln in out.splitlines() if ln.startswith("RESULT ")] == \
        [ln for ln in plain.stdout.splitlines() if ln.startswith("RESULT ")]
    said = [ln for ln in err.splitlines() if ln.startswith("stallscope:") and "recording to" not in ln]
    assert len(said) == 1 and "was deleted or replaced during the run" in said[0], err
    assert not db.exists()


READ_ONLY_PROG = """
import sys, time
for i in range(30):
    time.sleep(0.05)
    if i == 10:
        open(sys.argv[1], "w").write("go")
print("RESULT " + str(sum(range(1000))), flush=True)
sys.exit(3)
"""


@pytest.mark.timed
@NEEDS_OTHER_USER
def test_the_recordings_folder_made_read_only_mid_run(other_user):
    """As a second user (root ignores a folder's mode): the folder of the recording becomes
    read-only while the run writes it. The program's output and exit status are unchanged; the
    recording is complete and sound; one line says that -wal and -shm are left beside it."""
    work = Path(tempfile.mkdtemp(prefix="stallscope-ro-", dir="/tmp"))
    try:
        work.chmod(0o755)
        prog = work / "prog.py"
        prog.write_text(READ_ONLY_PROG)
        prog.chmod(0o644)
        out, plain_dir = work / "out", work / "plain"
        for d in (out, plain_dir):
            d.mkdir()
            shutil.chown(d, user=other_user)
        python = shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3"
        plain = as_other(other_user, python, prog, plain_dir / "go")
        launcher = subprocess.Popen(["runuser", "-u", other_user, "--", str(LAUNCHER), "run", "-o", str(out / "run.db"),
                                     "--", python, str(prog), str(out / "go")],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert wait_for(lambda: (out / "go").exists()), "the program did not reach its mark"
            out.chmod(0o555)
            stdout, stderr = launcher.communicate(timeout=60)
        finally:
            if launcher.poll() is None:
                launcher.kill()
                launcher.wait()
        assert launcher.returncode == plain.returncode == 3, stderr + plain.stderr
        assert stdout == plain.stdout == f"RESULT {sum(range(1000))}\n"
        said = [ln for ln in stderr.splitlines() if "became read-only during the run" in ln]
        assert len(said) == 1 and f"{out}/run.db-wal and -shm are left" in said[0], stderr
        assert integrity(out / "run.db") == "ok"
        con = sqlite3.connect(f"file:{out / 'run.db'}?mode=ro", uri=True)
        try:
            assert con.execute("SELECT value FROM meta WHERE key = 'complete'").fetchone()[0] == "1"
        finally:
            con.close()
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(work)], check=False)
        shutil.rmtree(work, ignore_errors=True)
