"""`stallscope export` of real recordings: a torch DataLoader loop with worker processes recorded by
`stallscope run`, written as a Perfetto/Chrome JSON trace and as CSV files, and checked against the
database: every span and instant once, the tracks named like the dashboard's lanes, a flow from a
worker's fetch to the main thread for every batch handed, the stall series adding up to the time in
next(), and the CSV files row for row."""

from __future__ import annotations

import csv
import itertools
import json
import sqlite3
import subprocess

import pytest

from conftest import LAUNCHER, REPO, run_recorded

pytestmark = pytest.mark.torch


def count(db, sql):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchone()[0]
    finally:
        con.close()


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    db = tmp_path_factory.mktemp("export") / "run.db"
    r = run_recorded(db, [REPO / "examples" / "slow_getitem.py", "--workers", "2", "--epochs", "2", "--batches", "12",
                          "--sleep-ms", "3", "--step-ms", "2"], timeout=180)
    assert r.rc == 0, r.stderr
    return db


def test_perfetto_trace_holds_every_row_named_like_the_dashboard(recording, tmp_path):
    out = tmp_path / "run.json"
    p = subprocess.run([str(LAUNCHER), "export", str(recording), "-o", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    events = doc["traceEvents"]
    by_ph = {}
    for e in events:
        by_ph.setdefault(e["ph"], []).append(e)
    assert len(by_ph["X"]) == count(recording, "SELECT count(*) FROM spans")
    assert len(by_ph["i"]) == count(recording, "SELECT count(*) FROM instants")

    procs = {e["pid"]: e["args"]["name"] for e in by_ph["M"] if e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in by_ph["M"] if e["name"] == "thread_name"}
    train = [pid for pid, name in procs.items() if name.startswith("training (pid ")]
    assert len(train) == 1, procs
    workers = sorted(name.split(" (pid")[0] for name in procs.values() if name.startswith("worker "))
    assert workers == ["worker 0", "worker 0", "worker 1", "worker 1"], procs  # two epochs, new workers each
    assert threads[(train[0], train[0])] == "main thread"

    # Every batch handed to the loop is a flow ending on the main thread, coming from a worker.
    handed = count(recording, "SELECT count(*) FROM span_view WHERE name = 'dl.next' AND arg1 >= 0 "
                              "AND dur_ns IS NOT NULL")
    ends = by_ph["f"]
    assert len(ends) == handed == 24
    assert all(e["pid"] == train[0] and e["tid"] == train[0] for e in ends)
    starts = {e["id"]: e for e in by_ph["s"]}
    steps = {e["id"]: e for e in by_ph.get("t", [])}
    for e in ends:
        fetch = steps.get(e["id"], starts[e["id"]])
        assert procs[fetch["pid"]].startswith("worker "), fetch

    # The stall series adds up to the time the loop spent in next().
    stalled = sorted((e["ts"], e["args"]["value"]) for e in by_ph["C"]
                     if e["name"] == "stalled (waiting for data)")
    in_next_us = sum(b[0] - a[0] for a, b in itertools.pairwise(stalled) if a[1] == 1)
    want_us = count(recording, "SELECT sum(dur_ns) FROM span_view WHERE name = 'dl.next'") / 1000
    assert in_next_us == pytest.approx(want_us, rel=1e-6)
    assert any(e["name"] == "loader 0 batches ready" for e in by_ph["C"])


def test_csv_files_hold_the_tables_row_for_row(recording, tmp_path):
    out = tmp_path / "csv"
    p = subprocess.run([str(LAUNCHER), "export", "--format", "csv", str(recording), "-o", str(out)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    for name, table in [("spans", "spans"), ("instants", "instants"), ("counters", "counters"),
                        ("processes", "processes")]:
        with open(out / f"{name}.csv", newline="") as f:
            rows = list(csv.reader(f))
        assert len(rows) - 1 == count(recording, f"SELECT count(*) FROM {table}"), name
        assert all(len(r) == len(rows[0]) for r in rows), name
    with open(out / "spans.csv", newline="") as f:
        spans = list(csv.DictReader(f))
    nexts = [s for s in spans if s["name"] == "dl.next"]
    assert nexts and {s["thread"] for s in nexts} == {"main thread"}
    assert {s["thread"] for s in spans if s["name"] == "dl.fetch"} == {"worker 0", "worker 1"}
