"""The job view at scale: a generated data-parallel job of 256 ranks on 32 nodes, an hour each, one
node's input planted 3x slower from the 40th minute (build/bin/ui_bench --job, generated once and
kept in $TMPDIR), read where it lies:

  report    `stallscope report JOB/` and `report --json JOB/`: wall time and peak memory of each
            (goals: under 30 s and 1 GB), and whether it names the planted node, its ranks and
            the minute it began (within a minute), first among the nodes and ranks
  dashboard build/bin/ui_bench --job JOB/: the job view opened headlessly (goal under 3 s), its
            peak memory (goal under 2 GB), drilling into the slowest rank against opening its
            recording alone (goal: no slower, 1.1x)

--reps N runs each report N times (interleaved text and JSON; the table gives the median and the
largest peak). --cold drops the page cache before each report and before the dashboard's open
(root only: the first read of the 820 MB of recordings from the disk).

    python3 bench/job_bench.py [--build DIR] [--job DIR] [--ranks N] [--nodes N] [--minutes M] [--reps N] [--cold]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from bench_rows import row as bench_row  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--job", default=os.path.join(tempfile.gettempdir(), "stallscope-job-bench-256"))
    ap.add_argument("--ranks", type=int, default=256)
    ap.add_argument("--nodes", type=int, default=32)
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cold", action="store_true")
    a = ap.parse_args()
    bin_dir = os.path.join(a.build, "bin")
    ui_bench, stallscope = os.path.join(bin_dir, "ui_bench"), os.path.join(bin_dir, "stallscope")
    slow_node, slow_from = min(7, a.nodes - 1), a.minutes * 2 / 3
    gen = [ui_bench, "--job", a.job, "--generate-only", "--ranks", str(a.ranks), "--nodes", str(a.nodes),
           "--minutes", str(a.minutes), "--slow-node", str(slow_node), "--slow-from-min", str(slow_from)]
    t0 = time.perf_counter()
    subprocess.run(gen, check=True)
    print(f"job ready in {time.perf_counter() - t0:.1f} s: {a.job}")
    size = sum(os.path.getsize(os.path.join(a.job, f)) for f in os.listdir(a.job))
    print(f"  {a.ranks} ranks on {a.nodes} nodes, {a.minutes:g} min each, {size / 2**20:.0f} MiB of recordings; "
          f"node-{slow_node:02d}'s input 3x slower from minute {slow_from:g}")

    # Each report in a process of its own; its peak from a fresh Python that only waits for it, so
    # that RUSAGE_CHILDREN holds that one child alone.
    def one(args: list[str]) -> tuple[float, float, str]:
        probe = ("import resource, subprocess, sys, time\n"
                 "t0 = time.perf_counter()\n"
                 "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
                 "w = time.perf_counter() - t0\n"
                 "sys.stderr.write(p.stderr)\n"
                 "print(repr((w, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, p.returncode, "
                 "p.stdout)))\n")
        if a.cold:
            subprocess.run(["sync"], check=False)
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
        q = subprocess.run([sys.executable, "-c", probe, stallscope, *args], capture_output=True, text=True,
                           check=True)
        wall, peak, rc, out = ast.literal_eval(q.stdout)
        if rc != 0:
            raise SystemExit(f"stallscope {' '.join(args)} exited {rc}: {q.stderr}")
        return wall, peak, out

    text_runs, json_runs = [], []
    text = doc = ""
    for _ in range(a.reps):
        w, m, text = one(["report", a.job])
        text_runs.append((w, m))
        w, m, doc = one(["report", "--json", a.job])
        json_runs.append((w, m))
    v = json.loads(doc)
    want_node = f"node-{slow_node:02d}"
    per_node = a.ranks // a.nodes
    want_ranks = list(range(slow_node * per_node, (slow_node + 1) * per_node))
    at_s = v["slowdown"]["at_s"] if v["slowdown"] else None
    named = v["slow_nodes"] == [want_node] and v["nodes"][0]["node"] == want_node
    ranks_ok = (sorted(v["slow_ranks"]) == want_ranks
                and sorted(r["rank"] for r in v["ranks"][:per_node]) == want_ranks)
    minute_ok = at_s is not None and abs(at_s - slow_from * 60) <= 60
    first_ok = v["slowdown"] is not None and v["slowdown"]["first_nodes"] == [want_node]

    def med(runs, i):
        return statistics.median(r[i] for r in runs)

    print(f"\nreport of the job folder ({a.reps} runs each, interleaved{', cold page cache' if a.cold else ''})")
    print(f"  {'measure':<52} {'result':>12} {'goal':>12}")
    rows = [
        ("report JOB/ (text): wall, median", f"{med(text_runs, 0):.2f} s", "< 30 s", med(text_runs, 0) < 30),
        ("report JOB/ (text): peak memory", f"{max(m for _, m in text_runs):.0f} MiB", "< 1024 MiB",
         max(m for _, m in text_runs) < 1024),
        ("report --json JOB/: wall, median", f"{med(json_runs, 0):.2f} s", "< 30 s", med(json_runs, 0) < 30),
        ("report --json JOB/: peak memory", f"{max(m for _, m in json_runs):.0f} MiB", "< 1024 MiB",
         max(m for _, m in json_runs) < 1024),
        (f"names {want_node}, first of the nodes", want_node if named else str(v["slow_nodes"]), want_node, named),
        (f"its ranks {want_ranks[0]}-{want_ranks[-1]} slow, first of the ranks", "yes" if ranks_ok else "no", "yes",
         ranks_ok),
        ("the minute it began", f"{at_s / 60:.1f}" if at_s is not None else "none", f"{slow_from:g} +- 1",
         minute_ok),
        ("the slowdown first on that node", "yes" if first_ok else "no", "yes", first_ok),
    ]
    for name, value, goal, ok in rows:
        print(f"  {name:<52} {value:>12} {goal:>12}  {'ok' if ok else 'MISSED'}")
    print("\n" + text.split("\n\nRanks")[0])

    at = f"{a.ranks} ranks x {a.minutes:g} min"
    bench_row(f"report JOB/, {at}", f"{med(text_runs, 0):.2f} s, {max(m for _, m in text_runs):.0f} MiB",
              "< 30 s, < 1 GB", "", med(text_runs, 0) < 30 and max(m for _, m in text_runs) < 1024)
    bench_row(f"job view names the planted slow node and its minute, {at}",
              "yes" if named and ranks_ok and minute_ok and first_ok else "no", "yes", "",
              named and ranks_ok and minute_ok and first_ok)
    if a.cold:
        subprocess.run(["sync"], check=False)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    d = subprocess.run([ui_bench, "--job", a.job, "--reps", str(a.reps)], check=False)
    return 0 if d.returncode == 0 else d.returncode


if __name__ == "__main__":
    raise SystemExit(main())
