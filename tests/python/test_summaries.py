"""Summaries (docs/schema.md, "Summaries") of real recordings: a recording made before they were
kept gets them on its first `report`, the same as the writer keeps them, with a line on stderr, and
the report reads the same; one that cannot be written is left as it is and reported all the same."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import LAUNCHER, LOADER_PROG, NEEDS_OTHER_USER, Recording, as_other, run_recorded

pytestmark = pytest.mark.torch
TABLES = ("span_summaries", "instant_summaries", "counter_summaries", "gpu_summaries")


def summary_rows(db):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {t: sorted(con.execute(f"SELECT * FROM {t}").fetchall()) for t in TABLES}
    finally:
        con.close()


def as_version_1(db):
    """What a recording made before summaries were kept looks like."""
    con = sqlite3.connect(db)
    con.executescript("".join(f"DROP TABLE {t};" for t in TABLES) +
                      "DELETE FROM units WHERE table_name LIKE '%_summaries'; PRAGMA user_version = 1;")
    con.commit()
    con.close()


def version(db):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("PRAGMA user_version").fetchone()[0]
    finally:
        con.close()


def report(db, *args, runner=subprocess.run):
    return runner([str(LAUNCHER), "report", *args, str(db)], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """A real loop with workers, recorded once: (path, its summary rows, its report --json)."""
    db = tmp_path_factory.mktemp("summaries") / "run.db"
    r = run_recorded(db, [LOADER_PROG, "--workers", "2", "--two-loaders", "--epochs", "2"])
    assert r.rc == 0, r.stderr
    assert version(db) == 2
    rows = summary_rows(db)
    assert rows["span_summaries"] and rows["counter_summaries"]
    assert Recording(db).summary_mismatches() == []
    rep = report(db, "--json")
    assert rep.returncode == 0 and rep.stderr == "", rep.stderr
    return db, rows, rep.stdout


def test_an_older_recording_gets_the_same_summaries_on_its_first_report(recording, tmp_path):
    original, rows, json_report = recording
    db = tmp_path / "run.db"
    shutil.copy(original, db)
    as_version_1(db)
    first = report(db, "--json")
    assert first.returncode == 0, first.stderr
    assert first.stdout.replace(str(db), str(original)) == json_report
    lines = first.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"stallscope: built the summaries of {db} (an older recording;"), \
        first.stderr
    assert version(db) == 2
    assert summary_rows(db) == rows
    again = report(db, "--json")
    assert again.returncode == 0 and again.stderr == ""
    assert again.stdout.replace(str(db), str(original)) == json_report


def test_an_older_recording_still_being_written_is_left_alone(recording, tmp_path):
    original, _, _ = recording
    db = tmp_path / "run.db"
    shutil.copy(original, db)
    as_version_1(db)
    con = sqlite3.connect(db)
    con.execute("UPDATE meta SET value = '0' WHERE key = 'complete'")
    con.commit()
    con.close()
    r = report(db)
    assert r.returncode == 0, r.stderr
    assert "summaries" not in r.stderr
    assert version(db) == 1


@NEEDS_OTHER_USER
def test_an_older_recording_that_cannot_be_written_is_reported_as_it_is(recording, other_user):
    original, _, json_report = recording
    folder = Path(tempfile.mkdtemp(prefix="stallscope-theirs-"))  # a folder another user can reach
    try:
        db = folder / "run.db"
        shutil.copy(original, db)
        as_version_1(db)
        os.chmod(db, 0o644)
        os.chmod(folder, 0o755)
        before = db.read_bytes()
        r = report(db, "--json", runner=lambda cmd, **kw: as_other(other_user, *cmd))
        assert r.returncode == 0, r.stderr
        assert r.stderr == ""
        assert r.stdout.replace(str(db), str(original)) == json_report
        assert db.read_bytes() == before and version(db) == 1
    finally:
        shutil.rmtree(folder)
