"""The benchmarks run end to end in their reduced sizes, so that none can rot unnoticed.

bench/loader_bench.py --quick: every case makes its table, every row that can run here gives a
figure (one that cannot says why, never fails), and the Markdown file is written. bench/run: the
benchmarks' rows gather into one table, and docs/performance.md is that table and the notes.
The figures of --quick are not checked: a few batches on a shared machine measure nothing.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import BUILD, REPO, base_env

pytestmark = pytest.mark.torch

CASE_TITLES = ("in memory (TensorDataset, shuffled)", "memory-mapped .npy", "ImageFolder tree", "tar shards")
ROW = re.compile(r"^\| (?P<label>[^|]+?) \| (?P<first>[^|]*) \|")


def test_loader_bench_quick(tmp_path):
    if not list(BUILD.glob("lib/_stallscope_loader*.so")):
        pytest.skip(f"the loader's Python module is not built in {BUILD / 'lib'}")
    md = tmp_path / "loader_bench.md"
    rows_file = tmp_path / "rows.jsonl"
    r = subprocess.run([sys.executable, str(REPO / "bench" / "loader_bench.py"), "--quick", "--build", str(BUILD),
                        "--data", str(tmp_path / "data"), "--markdown", str(md)],
                       capture_output=True, text=True, timeout=240, cwd=REPO,
                       env=base_env(STALLSCOPE_BENCH_ROWS=str(rows_file)))
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    text = md.read_text()
    assert text.strip() == r.stdout.strip()
    for title in CASE_TITLES:
        assert title in text, f"no table for {title!r}:\n{text}"
    rows = {}
    section = None
    for line in text.splitlines():
        if line.startswith("### "):
            section = line
            continue
        m = ROW.match(line)
        if m and section and not line.startswith(("| loader", "|---")):
            rows[(section, m["label"])] = m["first"]
    failed = {k: v for k, v in rows.items() if v.startswith("failed")}
    assert not failed, failed
    figures = {k: v for k, v in rows.items() if re.match(r"^[\d ]+(\(|$)", v.strip())}
    skipped = {k: v for k, v in rows.items() if v.startswith("not run: ")}
    assert set(figures) | set(skipped) == set(rows), rows
    # What needs nothing beyond this project and torch runs in every case.
    for title in CASE_TITLES:
        got = [label for (section, label) in figures if title in section]
        assert any(label.startswith("ReferenceLoader, default threads") for label in got), (title, got)
        if title in CASE_TITLES[:2]:
            assert any(label.startswith("torch DataLoader, num_workers=0") for label in got), (title, got)
            assert any(label.startswith("tuned") for label in got), (title, got)
    assert any("memcpy" in label for (_, label) in figures)
    assert "no GPU" in text or "GPU (the in-memory case" in text
    # bench/run's rows: one per case, the reference loader against the best torch DataLoader.
    bench_rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    assert len(bench_rows) == len(CASE_TITLES), bench_rows
    for row, title in zip(bench_rows, CASE_TITLES, strict=True):
        assert row["row"].startswith("reference loader, ") and title in row["row"], (row, title)
        assert row["row"].endswith(" (--quick size)"), row
        assert re.match(r"^[\d ]+ samples/s, \d+\.\d\dx the best torch DataLoader$", row["value"]), row


def test_hook_cost_runs(tmp_path):
    """bench/hook_cost.py (the per-batch hooks' cost, which overhead_bench.py's tiny loop quotes)
    runs under `stallscope run` with the C hooks and gives a figure for each variant."""
    if not list(BUILD.glob("lib/_stallscope_hooks*.so")):
        pytest.skip(f"the hooks' C module is not built in {BUILD / 'lib'}")
    r = subprocess.run([str(BUILD / "bin" / "stallscope"), "run", "-q", "-o", str(tmp_path / "h.db"), "--",
                        sys.executable, "hook_cost.py", "--rounds", "3", "--batches", "50"],
                       capture_output=True, text=True, timeout=240, cwd=REPO / "bench", env=base_env())
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["rounds"] == 3
    assert set(doc["us"]) == {"torch", "C hooks", "Python hooks"}
    assert all(len(v) == 3 and all(x > 0 for x in v) for v in doc["us"].values()), doc


def load_bench_run():
    loader = importlib.machinery.SourceFileLoader("bench_run", str(REPO / "bench" / "run"))
    spec = importlib.util.spec_from_loader("bench_run", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_report_bench_runs(tmp_path):
    """bench/report_bench.py generates a recording, times its reports, an export of a minute and the
    dashboard on it, and prints the table."""
    if not (BUILD / "bin" / "ui_bench").exists():
        pytest.skip("ui_bench is not built (no dashboard libraries)")
    rows = tmp_path / "rows.jsonl"
    r = subprocess.run([sys.executable, str(REPO / "bench" / "report_bench.py"), "--build", str(BUILD), "--hours",
                        "0.02", "--reps", "1", "--all-up-to", "1", "--dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=300,
                       env={**base_env(), "STALLSCOPE_BENCH_ROWS": str(rows)})
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    assert (tmp_path / "stallscope-report-bench-0.02h.db").exists()
    lines = {ln.split("  ")[0]: ln for ln in r.stdout.splitlines() if ln.startswith("0.02 h")}
    assert set(lines) == {"0.02 h, --detail auto", "0.02 h, --detail all", "0.02 h, --detail 5 min",
                          "0.02 h, export 1 min", "0.02 h, dashboard"}, r.stdout
    assert re.search(r"\d+\.\d\d s +\d+ MB +< 10 s, < 300 MB (met|NOT met)", lines["0.02 h, --detail auto"]), r.stdout
    assert re.search(r"< 1 s, < 1 GB, < 8 ms (met|NOT met) +\(whole run shown; frame p99 whole run \d+\.\d\d ms",
                     lines["0.02 h, dashboard"]), r.stdout
    assert not (tmp_path / "stallscope-report-bench-range.json").exists()  # the export's trace, removed
    got = [json.loads(x) for x in rows.read_text().splitlines()]
    assert [g["row"].split(" ")[0] for g in got] == ["report", "export", "dashboard"], got


def test_job_bench_runs(tmp_path):
    """bench/job_bench.py generates a job of ranks with a planted slow node, times `report JOB/`, checks
    that it names the node, its ranks and the minute, and measures the dashboard's job view."""
    if not (BUILD / "bin" / "ui_bench").exists():
        pytest.skip("ui_bench is not built (no dashboard libraries)")
    rows = tmp_path / "rows.jsonl"
    r = subprocess.run([sys.executable, str(REPO / "bench" / "job_bench.py"), "--build", str(BUILD), "--ranks", "16",
                        "--nodes", "4", "--minutes", "6", "--reps", "1", "--job", str(tmp_path / "job")],
                       capture_output=True, text=True, timeout=300,
                       env={**base_env(), "STALLSCOPE_BENCH_ROWS": str(rows)})
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    assert len(list((tmp_path / "job").glob("part-*.db"))) == 16
    for name in ("names node-03, first of the nodes", "its ranks 12-15 slow, first of the ranks",
                 "the minute it began", "the slowdown first on that node"):
        line = next((ln for ln in r.stdout.splitlines() if ln.strip().startswith(name)), "")
        assert line.endswith("ok"), (name, r.stdout)
    assert re.search(r"report JOB/ \(text\): wall, median +\d+\.\d\d s +< 30 s", r.stdout), r.stdout
    assert re.search(r"drilling in / opening alone \(analysed\) +\d+\.\d\dx", r.stdout), r.stdout
    got = [json.loads(x)["row"] for x in rows.read_text().splitlines()]
    assert [g.split(",")[0] for g in got] == ["report JOB/", "job view names the planted slow node and its minute",
                                             "dashboard job view open", "dashboard job view memory",
                                             "drilling into a rank / opening it alone"], got


def test_bench_run_quick(tmp_path):
    """bench/run runs benchmarks and gathers their rows into one table, goal beside figure."""
    out = tmp_path / "results.md"
    page = tmp_path / "performance.md"
    page.write_text("before\n")
    r = subprocess.run([str(REPO / "bench" / "run"), "--quick", "--only", "collector,dashboard", "--build", str(BUILD),
                        "--out", str(out), "--page", str(page)],
                       capture_output=True, text=True, timeout=600, cwd=REPO, env=base_env())
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    text = out.read_text()
    assert "Machine: " in text and f"{os.cpu_count()} cores" in text
    table = [ln for ln in text.splitlines() if ln.startswith("| ") and not ln.startswith("| figure")]
    by_bench = {}
    for line in table:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert len(cells) == 6, line
        by_bench.setdefault(cells[5], []).append(cells)
    hot = [c for c in by_bench["collector"] if c[0].startswith("hot path")]
    assert len(hot) == 2 and all(c[2] == "< 20 ns" and c[3] in ("met", "**missed**") for c in hot), hot
    assert any(c[0] == "bytes per span on disk" for c in by_bench["collector"])
    if (BUILD / "bin" / "ui_bench").exists():
        frames = [c for c in by_bench["dashboard"] if c[0].startswith("dashboard frame")]
        assert len(frames) == 4 and all(re.match(r"^\d+\.\d\d / \d+\.\d\d ms$", c[1]) for c in frames), frames
    else:
        assert "dashboard: not built" in text
    assert page.read_text() == "before\n"  # a partial run leaves the page alone
    # The page again from that run's results: its table, then the notes on each benchmark.
    r = subprocess.run([str(REPO / "bench" / "run"), "--render-only", "--out", str(out), "--page", str(page)],
                       capture_output=True, text=True, timeout=60, env=base_env())
    assert r.returncode == 0, r.stdout + r.stderr
    rendered = page.read_text()
    assert rendered.startswith("# Performance\n")
    assert text[text.index("Measured by `bench/run --quick`"):].rstrip() in rendered
    assert rendered.rstrip().endswith((REPO / "bench" / "performance_notes.md").read_text().rstrip())


def test_bench_run_renders_the_page_on_record(tmp_path):
    """docs/performance.md is what `bench/run --render-only` makes of bench/results.md and the notes:
    nobody edited it by hand, and neither of its sources changed without it."""
    run = load_bench_run()
    results = (REPO / "bench" / "results.md").read_text()
    block = run.block_of(results)
    assert block.startswith("Measured by `bench/run` on ") and "| figure | measured | goal |" in block
    notes = (REPO / "bench" / "performance_notes.md").read_text()
    assert (REPO / "docs" / "performance.md").read_text() == run.render_page(block, notes), \
        "docs/performance.md is stale: run bench/run --render-only"
    with pytest.raises(ValueError):
        run.block_of("# Benchmark results\n\nno table\n")
    # Without a results file to read, --render-only says so in one line and writes nothing.
    page = tmp_path / "performance.md"
    r = subprocess.run([str(REPO / "bench" / "run"), "--render-only", "--out", str(tmp_path / "none.md"), "--page",
                        str(page)], capture_output=True, text=True, timeout=60, env=base_env())
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "run bench/run first" in r.stderr, r.stderr
    assert not page.exists()
