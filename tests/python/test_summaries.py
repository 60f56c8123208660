"""Summaries (docs/schema.md, "Summaries") of real recordings: a recording made before they were
kept gets them on its first `report`, the same as the writer keeps them, with a line on stderr, and
the report reads the same; one that cannot be written is left as it is and reported all the same."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import LAUNCHER, LOADER_PROG, NEEDS_OTHER_USER, Recording, as_other, base_env, run_recorded

pytestmark = pytest.mark.torch
TABLES = ("span_summaries", "instant_summaries", "counter_summaries", "gpu_summaries", "handoff_summaries",
          "queue_summaries")


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
    # 26 samples in batches of 4: each epoch's last batch holds 2, which only the workers' collates tell
    r = run_recorded(db, [LOADER_PROG, "--workers", "2", "--two-loaders", "--epochs", "2", "--samples", "26"])
    assert r.rc == 0, r.stderr
    assert version(db) == 2
    rows = summary_rows(db)
    assert rows["span_summaries"] and rows["counter_summaries"]
    assert Recording(db).summary_mismatches() == []
    rep = report(db, "--json")
    assert rep.returncode == 0 and rep.stderr == "", rep.stderr
    return db, rows, rep.stdout


def test_the_report_over_time_agrees_with_the_rows(recording):
    """report --json's `over_time` (docs/report.md), read from the summaries, against the same counts
    from the detail rows: every next() call and step of the training loader in one period, the
    waits summed, the fetches of its workers counted."""
    db, _, json_report = recording
    rep = json.loads(json_report)
    ot = rep["over_time"]
    loader, pid = rep["training_loader"]["loader"], rep["training_pid"]
    assert ot is not None and ot["loader"] == loader
    periods = ot["periods"]
    assert periods and periods[0]["start_ns"] == rep["window"]["start_ns"]
    assert periods[-1]["end_ns"] == rep["window"]["end_ns"]
    assert all(a["end_ns"] == b["start_ns"] for a, b in itertools.pairwise(periods))
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        train_threads = ("thread_id IN (SELECT t.id FROM threads t JOIN processes p ON p.id = t.process_id "
                         f"WHERE p.pid = {pid})")
        calls, wait_ns = con.execute(
            "SELECT count(*), sum(dur_ns) FROM spans WHERE name_id = (SELECT id FROM strings WHERE value = 'dl.next') "
            f"AND arg0 = {loader} AND dur_ns IS NOT NULL AND {train_threads}").fetchone()
        steps = con.execute(
            "SELECT count(*) FROM instants WHERE name_id = (SELECT id FROM strings WHERE value = 'dl.step') "
            f"AND arg0 = {loader} AND {train_threads}").fetchone()[0]
        worker_pids = [w["pid"] for w in rep["workers"] if w["loader"] == loader and not w["thread"]]
        fetches = con.execute(
            "SELECT count(*) FROM spans WHERE name_id = (SELECT id FROM strings WHERE value = 'dl.fetch') "
            "AND dur_ns IS NOT NULL AND thread_id IN (SELECT t.id FROM threads t JOIN processes p "
            f"ON p.id = t.process_id WHERE p.pid IN ({','.join(map(str, worker_pids))}))").fetchone()[0]
    finally:
        con.close()
    # 2 workers in each of the 2 epochs; no optimizer here: steps are 0 both ways
    assert calls > 0 and fetches > 0 and len(worker_pids) == 4
    assert sum(p["next_calls"] for p in periods) == calls
    assert sum(p["wait_s"] for p in periods) == pytest.approx(wait_ns / 1e9, abs=1e-6)
    assert sum(p["steps"] for p in periods) == steps == rep["optimizer_steps"]
    assert sum(p["fetches"] for p in periods) == fetches
    assert all(p["fetch_p50_ms"] is None or 0 < p["fetch_p50_ms"] <= p["fetch_p99_ms"] for p in periods)


def test_report_detail_reads_the_latest_part_and_the_whole_run_from_the_summaries(recording):
    """`report --detail DURATION` (the way a day-long recording is read by default, docs/report.md):
    the figures cover the latest part, from an epoch's start, and the over-time totals, from the
    summaries, are the whole run's, the same as the report of every event gives."""
    db, _, json_report = recording
    whole = json.loads(json_report)
    assert whole["detail_from_ns"] is None
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        last_drain = con.execute("SELECT max(ts_ns) FROM flushes").fetchone()[0]
    finally:
        con.close()
    # The latest part from two thirds into the training window: the detail is measured back from
    # the latest drain.
    start, end = whole["window"]["start_ns"], whole["window"]["end_ns"]
    r = report(db, "--json", "--detail", f"{(last_drain - (start + 2 * (end - start) // 3)) / 1e9:.6f}s")
    assert r.returncode == 0, r.stderr
    part = json.loads(r.stdout)
    cut = part["detail_from_ns"]
    assert cut is not None and whole["window"]["start_ns"] < cut < whole["window"]["end_ns"], (cut, whole["window"])
    assert part["window"]["start_ns"] >= cut and part["window"]["end_ns"] == whole["window"]["end_ns"]
    assert any("a long recording" in n for n in part["notes"]), part["notes"]
    assert 0 < part["steps"] < whole["steps"]
    # The loaders' settings, recorded before the cut, are still known.
    settings = ("config_recorded", "batch_size", "num_workers", "persistent_workers", "prefetch_factor", "name")
    def chosen(rep):
        return [{k: x[k] for k in settings} for x in rep["loaders"]]

    assert chosen(part) == chosen(whole)
    assert part["loaders"][0]["config_recorded"]
    keys = ("next_calls", "wait_s", "steps", "fetches", "fetch_p50_ms", "fetch_p99_ms")
    assert {k: part["over_time"]["total"][k] for k in keys} == {k: whole["over_time"]["total"][k] for k in keys}
    assert whole["over_time"]["total"]["next_calls"] == sum(p["next_calls"] for p in whole["over_time"]["periods"])
    # The text says so in its headline, with the whole run's own figures beside the part's.
    detail = f"{(last_drain - (start + 2 * (end - start) // 3)) / 1e9:.6f}s"
    text = report(db, "--detail", detail).stdout
    window_line = next(ln for ln in text.splitlines() if ln.startswith("  Training window"))
    assert "the latest part, from " in window_line, window_line
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("  Whole run"))
    whole_line, stall_line, times_line = lines[at], lines[at + 1], lines[at + 2]
    total = whole["over_time"]["total"]
    assert f"next() calls {total['next_calls']:,}" in whole_line, whole_line
    assert f"waiting {100 * total['wait_fraction']:.1f}%" in whole_line, whole_line
    # The training loader's batches, samples and step times from the hand-off summaries: the whole
    # run's, as the report of every event counts them (the last batch of each epoch is 2 of 26).
    assert total["batches"] == whole["steps"] == 2 * 7, (total, whole["steps"])
    assert total["samples"] == whole["samples"] == 2 * 26 and total["samples_unknown"] == 0
    assert part["steps"] < whole["steps"]
    # Step times: the gaps between the training loader's hand-offs (next() calls that handed a
    # batch), each quantile within the sketch's 1 % of the exact value of its rank.
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        ends = [e for (e,) in con.execute(
            "SELECT start_ns + dur_ns FROM spans WHERE name_id = (SELECT id FROM strings WHERE value = 'dl.next') "
            "AND arg0 = ? AND arg1 >= 0 AND dur_ns IS NOT NULL ORDER BY 1", (whole["training_loader"]["loader"],))]
    finally:
        con.close()
    gaps = sorted((b - a) / 1e6 for a, b in itertools.pairwise(ends))
    assert len(ends) == total["batches"]
    for q, key in ((0.5, "step_p50_ms"), (0.9, "step_p90_ms"), (0.99, "step_p99_ms")):
        exact = gaps[int(q * (len(gaps) - 1))]
        assert total[key] == pytest.approx(exact, rel=0.01, abs=1e-6), (key, total[key], gaps)
    assert f"batches {total['batches']:,}, samples {total['samples']:,}" in whole_line, whole_line
    assert times_line.startswith(" " * 19 + "step p50 ") and "fetch p50 " in times_line, times_line
    # The training loader's queue, from queue_summaries: the report's Queue section of every event.
    q, exact = total["queue"], whole["queue"]
    assert exact["available"] and q is not None, (q, exact)
    assert q["active_s"] == pytest.approx(exact["active_s"], abs=1e-6), (q, exact)
    for key in ("mean_ready", "empty_fraction", "mean_in_flight"):
        assert q[key] == pytest.approx(exact[key], abs=1e-6), (key, q, exact)
    assert q["max_ready"] == exact["max_ready"] and 0 <= q["min_ready"] <= q["max_ready"], (q, exact)
    assert lines[at + 3].startswith(" " * 19 + f"queue ready {q['mean_ready']:.2f} batches on average ("), \
        lines[at + 3]
    # The data stall: waiting in next() and inside DataLoader.__iter__ (to the epoch's first next()
    # call), the same seconds as the report of every event gives (it counts the workers' start-up
    # inside that first call as starting the loader; the sum is the same).
    causes = whole["stall"]["by_cause"]
    assert total["loader_starts"] == 2, total
    assert 0 < total["loader_start_s"] <= causes["loader_start"]
    assert total["wait_s"] + total["loader_start_s"] == pytest.approx(whole["stall"]["seconds"], abs=1e-6), \
        (total, whole["stall"])
    assert stall_line.startswith(" " * 19 + f"data stall {100 * total['stall_fraction']:.1f}% (waiting in next() "), \
        stall_line
    assert "Whole run" not in report(db).stdout  # read whole: its figures are the whole run's
    # all: every event, the same document as the default for a recording this short
    assert json.loads(report(db, "--json", "--detail", "all").stdout) == whole


@pytest.mark.timed
def test_the_queue_of_a_loop_that_leaves_an_epoch_early_agrees_with_the_rows(tmp_path):
    """queue_summaries of a real loop whose first epoch is left after 20 batches (its workers, shut
    down, put batches after the next epoch began): the whole run's queue from the summaries is the
    report's Queue section of every event (the active time may differ by the moments between the
    abandoned epoch's last next() call and the next epoch's start)."""
    db = tmp_path / "run.db"
    r = run_recorded(db, [LOADER_PROG, "--workers", "2", "--samples", "400", "--epochs", "2", "--break-after", "20",
                          "--sleep-ms", "1"])
    assert r.rc == 0, r.stderr
    rep = report(db, "--json")
    assert rep.returncode == 0, rep.stderr
    whole = json.loads(rep.stdout)
    q, exact = whole["over_time"]["total"]["queue"], whole["queue"]
    assert exact["available"] and q is not None, (q, exact)
    assert q["active_s"] == pytest.approx(exact["active_s"], rel=1e-3), (q, exact)
    for key in ("mean_ready", "mean_in_flight"):
        assert q[key] == pytest.approx(exact[key], rel=1e-3, abs=1e-4), (key, q, exact)
    # Those moments have nothing ready: the time with the queue empty differs by them at most (a
    # share of the active time would differ by 0.3 ms / 0.59 s x (1 - 0.28): 4e-4, seen once).
    extra = abs(q["active_s"] - exact["active_s"])
    empty_s = q["empty_fraction"] * q["active_s"], exact["empty_fraction"] * exact["active_s"]
    assert abs(empty_s[0] - empty_s[1]) <= extra + 1e-5, (empty_s, extra, q, exact)
    assert q["max_ready"] == exact["max_ready"], (q, exact)


def test_report_detail_window_reads_that_window_and_the_whole_run_from_the_summaries(recording):
    """`report --detail T0:T1` (what the dashboard analyses when it shows a window of the past): the
    figures cover that window of the training, the over-time totals are the whole run's still."""
    db, _, json_report = recording
    whole = json.loads(json_report)
    start, end = whole["window"]["start_ns"], whole["window"]["end_ns"]
    a, b = start + (end - start) // 4, start + (end - start) // 2
    r = report(db, "--json", "--detail", f"{a / 1e9:.9f}:{b / 1e9:.9f}")
    assert r.returncode == 0, r.stderr
    part = json.loads(r.stdout)
    assert abs(part["detail_from_ns"] - a) <= 1 and abs(part["detail_to_ns"] - b) <= 1, (part["detail_from_ns"], a, b)
    assert part["window"]["start_ns"] >= a - 1 and part["window"]["end_ns"] < end, part["window"]
    assert any("a window of a long recording" in n for n in part["notes"]), part["notes"]
    assert 0 < part["steps"] < whole["steps"]
    keys = ("next_calls", "wait_s", "steps", "fetches", "fetch_p50_ms", "fetch_p99_ms", "start_ns", "end_ns")
    assert {k: part["over_time"]["total"][k] for k in keys} == {k: whole["over_time"]["total"][k] for k in keys}
    text = report(db, "--detail", f"{a / 1e9:.9f}:{b / 1e9:.9f}").stdout
    assert "the part from " in next(ln for ln in text.splitlines() if ln.startswith("  Training window")), text


@pytest.mark.parametrize("value", ["soon", "-5m", "0", "", "5:2", "1:x"])
def test_report_detail_rejects_what_is_not_auto_all_or_a_duration(recording, value):
    db, _, _ = recording
    r = report(db, "--detail", value)
    assert r.returncode == 2 and r.stdout == "", r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--detail" in lines[0] and "auto, all, a duration" in lines[0], r.stderr


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


def test_keep_detail_keeps_the_latest_events_and_the_summaries_of_the_whole_run(tmp_path):
    """`run --keep-detail 10s` on a loop of about 18 s: the events older than the window are deleted
    while it runs (the loader's description stays), the summaries count every batch, and the report
    says which part its figures cover while its over-time table covers the whole run."""
    db = tmp_path / "run.db"
    prog = [sys.executable, str(LOADER_PROG), "--workers", "2", "--samples", "600", "--batch-size", "4",
            "--sleep-ms", "60"]
    p = subprocess.run([str(LAUNCHER), "run", "--keep-detail", "10s", "-o", str(db), "--", *prog],
                       capture_output=True, text=True, env=base_env(), timeout=180)
    assert p.returncode == 0, p.stderr
    result = json.loads(next(line for line in p.stdout.splitlines() if line.startswith("RESULT "))[7:])
    batches = result["epochs"][0]["batches"]
    assert batches == 150
    rec = Recording(db)
    meta = {r["key"]: r["value"] for r in rec.q("SELECT key, value FROM meta")}
    assert meta["keep_detail_ns"] == str(10 * 10**9)
    detail_from = int(meta["detail_from_ns"])
    nexts = rec.spans("dl.next")
    assert nexts and min(s["start_ns"] for s in nexts) >= detail_from - 10**9, (detail_from, nexts[0])
    assert len(nexts) < batches  # some were deleted
    assert rec.instants("dl.config")  # what describes the loader stays
    summarised = rec.q("SELECT sum(count) AS n FROM span_summaries WHERE level_ns = ? AND grp = 0 AND name_id = "
                       "(SELECT id FROM strings WHERE value = 'dl.next')", 10**11)[0]["n"]
    assert summarised == batches + 1  # and the StopIteration call

    rep = report(db, "--json")
    assert rep.returncode == 0 and rep.stderr == "", rep.stderr
    doc = json.loads(rep.stdout)
    assert doc["detail_from_ns"] == detail_from
    assert 0 < doc["steps"] < batches
    assert doc["loader"]["num_workers"] == 2
    assert any("--keep-detail" in n for n in doc["notes"])
    periods = doc["over_time"]["periods"]
    assert sum(q["next_calls"] for q in periods) == batches + 1
    # The window starts at the first next() call left (one that ended after the cut may start before it).
    assert periods[0]["start_ns"] < detail_from - 10**9 < doc["window"]["start_ns"]
    text = report(db)
    assert text.returncode == 0 and "recorded with --keep-detail" in text.stdout


def test_keep_detail_rejects_what_is_not_a_duration(tmp_path):
    for bad, why in (("soon", "needs a duration"), ("5s", "at least 10s"), ("-1h", "needs a duration")):
        p = subprocess.run([str(LAUNCHER), "run", "--keep-detail", bad, "-o", str(tmp_path / "x.db"), "--", "true"],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 2, p.stderr
        lines = p.stderr.strip().splitlines()
        assert len(lines) >= 1 and why in lines[0], p.stderr
        assert not (tmp_path / "x.db").exists()
