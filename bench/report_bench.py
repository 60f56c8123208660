#!/usr/bin/env python3
"""Long recordings: `stallscope report`, the dashboard and `export` against the length of the run.

Generates synthetic recordings at the dashboard benchmark's rate (build/bin/ui_bench
--generate-only: 8 persistent workers, pin memory, every /proc counter track at 20 Hz; about 10 M
events an hour) of each length asked for, kept for the next run, then times on each, in
interleaved turns, with its peak resident memory (the child's ru_maxrss):
  - the report (`--detail auto`: the latest part and the summaries for the whole run), and
    `--detail all`, the report of every event, on the recordings up to --all-up-to hours;
  - the report of a 5-minute window half-way through (`--detail T0:T1`);
  - `export --range` of a minute half-way through (a Perfetto trace);
  - the dashboard, headless (`ui_bench --db`, once per turn): the whole run shown, its peak memory,
    and frames of the whole run and of a minute (p99).

    python3 bench/report_bench.py [--hours 1,6,24] [--reps 3] [--all-up-to 1] [--dir DIR] [--build DIR]

Goals (docs/decisions.md): on a 24-hour recording, the report in under 10 s and 300 MB; the
dashboard's whole run shown in under 1 s, in under 1 GB, frames under 8 ms.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
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


def timed(cmd: list[str], out: list[str] | None = None) -> tuple[float, float]:
    """(seconds, peak resident MB) of one run of `cmd`, which must succeed; its output to `out`."""
    with tempfile.TemporaryFile() as so, tempfile.TemporaryFile() as se:
        t0 = time.monotonic()
        # The rows of bench/run's table are this script's: a child's own (ui_bench's) are not.
        env = {k: v for k, v in os.environ.items() if k != "STALLSCOPE_BENCH_ROWS"}
        p = subprocess.Popen(cmd, stdout=so if out is not None else subprocess.DEVNULL, stderr=se, env=env)
        _, status, usage = os.wait4(p.pid, 0)
        elapsed = time.monotonic() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            se.seek(0)
            raise SystemExit(f"report_bench: {' '.join(cmd)} failed: {se.read().decode().strip()}")
        if out is not None:
            so.seek(0)
            out.append(so.read().decode())
    return elapsed, usage.ru_maxrss / 1024.0


def dashboard_figures(text: str) -> dict[str, float]:
    """What ui_bench printed: the whole run shown (ms; the first timeline where the recording is read
    whole), the peak memory (MiB), and the p99 of moving frames of the whole run and of a minute."""
    pats = {"shown_ms": r"open: (?:whole run shown|first timeline shown)[^\n]*?([\d.]+) ms",
            "frame_whole_p99": r"frame, whole run, moving: p99[^\n]*?\)\s+([\d.]+) ms",
            "frame_minute_p99": r"frame, 1 minute, moving: p99[^\n]*?\)\s+([\d.]+) ms"}
    got = {}
    for key, pat in pats.items():
        m = re.search(pat, text)
        if not m:
            raise SystemExit(f"report_bench: ui_bench printed no {key}:\n{text[-2000:]}")
        got[key] = float(m.group(1))
    return got


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

    ui_bench = os.path.join(a.build, "bin", "ui_bench")
    runs: list[tuple[str, float, list[str]]] = []  # (label, hours, command)
    trace = os.path.join(a.dir, "stallscope-report-bench-range.json")
    for h in hours:
        path = os.path.join(a.dir, f"stallscope-report-bench-{h:g}h.db")
        generate(a.build, path, int(h * EVENTS_PER_HOUR))
        mid = h * 3600 / 2
        runs.append((f"{h:g} h, --detail auto", h, [launcher, "report", path]))
        if h <= a.all_up_to:
            runs.append((f"{h:g} h, --detail all", h, [launcher, "report", "--detail", "all", path]))
        runs.append((f"{h:g} h, --detail 5 min", h, [launcher, "report", "--detail", f"{mid:g}:{mid + 300:g}", path]))
        runs.append((f"{h:g} h, export 1 min", h,
                     [launcher, "export", "-q", "--force", "--range", f"{mid:g}:{mid + 60:g}", path, "-o", trace]))
        runs.append((f"{h:g} h, dashboard", h, [ui_bench, "--db", path, "--frames", "60"]))
    results: dict[str, list[tuple[float, float]]] = {label: [] for label, _, _ in runs}
    shown: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in runs}
    for _ in range(a.reps):  # interleaved: each turn runs every command once
        for label, _, cmd in runs:
            out: list[str] = []
            results[label].append(timed(cmd, out if "dashboard" in label else None))
            if "dashboard" in label:
                shown[label].append(dashboard_figures(out[0]))
    if os.path.exists(trace):
        os.remove(trace)

    print()
    print(f"{'':28} {'events':>8} {'time (median)':>14} {'peak memory':>12}   goal")
    for label, h, _ in runs:
        secs = statistics.median(t for t, _ in results[label])
        mb = max(m for _, m in results[label])
        events = f"{h * EVENTS_PER_HOUR / 1e6:>7.0f}M"
        if "dashboard" in label:
            f = shown[label]
            ms = statistics.median(x["shown_ms"] for x in f)
            whole = max(x["frame_whole_p99"] for x in f)
            minute = max(x["frame_minute_p99"] for x in f)
            met = ms < 1000 and mb < 1024 and whole < 8 and minute < 8
            goal = "< 1 s, < 1 GB, < 8 ms"
            print(f"{label:28} {events} {ms / 1e3:>12.2f} s {mb:>9.0f} MB   {goal} {'met' if met else 'NOT met'}"
                  f"  (whole run shown; frame p99 whole run {whole:.2f} ms, a minute {minute:.2f} ms)")
            row(f"dashboard of a {h:g}-hour recording: whole run shown, peak memory, frame p99 (whole run / a minute)",
                f"{ms / 1e3:.2f} s, {mb:.0f} MB, {whole:.2f} / {minute:.2f} ms", goal, met=met)
            continue
        auto = "auto" in label
        goal = f"< {GOAL_S:.0f} s, < {GOAL_MB:.0f} MB" if auto else "(every event)" if "all" in label else ""
        met = secs < GOAL_S and mb < GOAL_MB
        verdict = f" {'met' if met else 'NOT met'}" if auto else ""
        print(f"{label:28} {events} {secs:>12.2f} s {mb:>9.0f} MB   {goal}{verdict}")
        if auto:
            row(f"report of a {h:g}-hour recording ({h * EVENTS_PER_HOUR / 1e6:.0f} M events)",
                f"{secs:.2f} s, {mb:.0f} MB", goal, met=met)
        elif "export" in label:
            row(f"export of a minute of a {h:g}-hour recording (--range)", f"{secs:.2f} s, {mb:.0f} MB")
    print(f"({a.reps} interleaved turns; the time is the median, the memory the largest; a dashboard's time is the "
          "whole run shown, in ui_bench's own process)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
