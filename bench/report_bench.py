#!/usr/bin/env python3
"""`stallscope report` on long recordings: time and peak memory against the length of the run.

Generates synthetic recordings at the dashboard benchmark's rate (build/bin/ui_bench
--generate-only: 8 persistent workers, pin memory, every /proc counter track at 20 Hz; about 10 M
events an hour) of each length asked for, kept for the next run, then times the report of each, in
interleaved turns, with its peak resident memory (the child's ru_maxrss). The report reads a long
recording's latest part (`--detail auto`) and its summaries for the whole run; `--detail all`, the
report of every event, is timed beside it on the recordings up to --all-up-to hours.

    python3 bench/report_bench.py [--hours 1,6,24] [--reps 3] [--all-up-to 1] [--dir DIR] [--build DIR]

Goal (docs/decisions.md): a 24-hour recording reports in under 10 s and 300 MB.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_rows import row  # noqa: E402

EVENTS_PER_HOUR = 10_000_000
GOAL_S, GOAL_MB = 10.0, 300.0


def generate(build: str, path: str, events: int) -> None:
    if os.path.exists(path):
        return
    print(f"generating {path} ({events / 1e6:.0f} M events) ...", flush=True)
    t0 = time.monotonic()
    subprocess.run([os.path.join(build, "bin", "ui_bench"), "--db", path, "--events", str(events), "--generate-only"],
                   check=True, stdout=subprocess.DEVNULL)
    print(f"  {os.path.getsize(path) / 1e9:.2f} GB in {time.monotonic() - t0:.0f} s", flush=True)


def timed(cmd: list[str]) -> tuple[float, float]:
    """(seconds, peak resident MB) of one run of `cmd`, which must succeed."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    elapsed = time.monotonic() - t0
    err = p.stderr.read().decode() if p.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"report_bench: {' '.join(cmd)} failed: {err.strip()}")
    return elapsed, usage.ru_maxrss / 1024.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", default="1,6,24", help="lengths of the recordings, in hours (default 1,6,24)")
    ap.add_argument("--reps", type=int, default=3, help="timed turns of each report (default 3)")
    ap.add_argument("--all-up-to", type=float, default=1.0,
                    help="also time --detail all on recordings up to this many hours (default 1)")
    ap.add_argument("--dir", default=os.environ.get("TMPDIR", "/tmp"), help="where the recordings are kept")
    ap.add_argument("--build", default=os.path.join(os.path.dirname(HERE), "build"))
    a = ap.parse_args()
    try:
        hours = [float(h) for h in a.hours.split(",") if h]
    except ValueError:
        ap.error(f"--hours needs numbers separated by commas, got {a.hours!r}")
    if not hours or min(hours) <= 0 or a.reps < 1:
        ap.error("--hours needs positive lengths and --reps at least 1")
    launcher = os.path.join(a.build, "bin", "stallscope")
    if not os.access(launcher, os.X_OK):
        ap.error(f"{launcher} is not built; build first (cmake --build build)")

    runs: list[tuple[str, float, list[str]]] = []  # (label, hours, command)
    for h in hours:
        path = os.path.join(a.dir, f"stallscope-report-bench-{h:g}h.db")
        generate(a.build, path, int(h * EVENTS_PER_HOUR))
        runs.append((f"{h:g} h, --detail auto", h, [launcher, "report", path]))
        if h <= a.all_up_to:
            runs.append((f"{h:g} h, --detail all", h, [launcher, "report", "--detail", "all", path]))
    results: dict[str, list[tuple[float, float]]] = {label: [] for label, _, _ in runs}
    for _ in range(a.reps):  # interleaved: each turn runs every report once
        for label, _, cmd in runs:
            results[label].append(timed(cmd))

    print()
    print(f"{'report of':28} {'events':>8} {'time (median)':>14} {'peak memory':>12}   goal")
    for label, h, _ in runs:
        secs = statistics.median(t for t, _ in results[label])
        mb = max(m for _, m in results[label])
        goal = f"< {GOAL_S:.0f} s, < {GOAL_MB:.0f} MB" if "auto" in label else "(every event)"
        met = secs < GOAL_S and mb < GOAL_MB
        print(f"{label:28} {h * EVENTS_PER_HOUR / 1e6:>7.0f}M {secs:>12.2f} s {mb:>9.0f} MB   {goal}"
              + (f" {'met' if met else 'NOT met'}" if "auto" in label else ""))
        if "auto" in label:
            row(f"report of a {h:g}-hour recording ({h * EVENTS_PER_HOUR / 1e6:.0f} M events)",
                f"{secs:.2f} s, {mb:.0f} MB", goal, met=met)
    print(f"({a.reps} interleaved turns; the time is the median, the memory the largest)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
