"""bench/loader_bench.py runs end to end in its reduced size (--quick), so that the benchmark
cannot rot unnoticed: every case makes its table, every row that can run here gives a figure
(one that cannot says why, never fails), and the Markdown file is written. The figures of --quick
are not checked: a few batches on a shared machine measure nothing.
"""

from __future__ import annotations

import json
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
    r = subprocess.run([sys.executable, str(REPO / "bench" / "loader_bench.py"), "--quick", "--build", str(BUILD),
                        "--data", str(tmp_path / "data"), "--markdown", str(md)],
                       capture_output=True, text=True, timeout=240, cwd=REPO, env=base_env())
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
