"""The per-batch hooks' work counted in instructions, which a noisy machine does not change: the
tiny-batch loop of bench/overhead_train.py (batches of 4 from memory, no workers, an empty step)
runs under valgrind's callgrind plain, under `stallscope run` with the hooks in C, and with their
Python twins (STALLSCOPE_PY_HOOKS=1), each at two lengths. The difference between the lengths,
over the batches between them, is the loop's instructions per batch with the start-up (imports,
the hooks' installation) taken out. Only the training process runs under callgrind; the launcher
and its drain run natively and are not counted (bench/overhead_bench.py measures the whole cost in
time). Each run takes a minute or more: callgrind runs the program about 50 times slower.

    python3 bench/hook_instructions.py [--build DIR] [--batches 2000,6000] [--jobs 2]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

from bench_rows import row

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
GOAL_PCT = 3.0  # the hardening goal: at most 3 % on the tiny-batch loop


def instructions(variant: str, batches: int, launcher: str, tmp: str) -> int:
    """Instructions (callgrind's Ir) of one run of the loop under `variant`."""
    out = os.path.join(tmp, f"cg-{variant}-{batches}.out")
    loop = [shutil.which("valgrind") or "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
            sys.executable, os.path.join(HERE, "overhead_train.py"), "--mode", "tiny", "--batches", str(batches)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("STALLSCOPE_")}
    if variant == "plain":
        cmd = loop
    else:
        cmd = [launcher, "run", "-q", "-o", os.path.join(tmp, f"{variant}-{batches}.db"), "--", *loop]
        if variant == "Python hooks":
            env["STALLSCOPE_PY_HOOKS"] = "1"
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if p.returncode != 0:
        sys.exit(f"hook_instructions: {variant} at {batches} batches failed: {p.stderr.strip()[-400:]}")
    with open(out) as f:
        m = re.search(r"^summary: (\d+)", f.read(), re.M)
    if not m:
        sys.exit(f"hook_instructions: no summary line in {out}")
    return int(m[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--batches", default="2000,6000", help="the two lengths, comma-separated")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("hook_instructions: needs valgrind (apt-get install valgrind)")
    small, large = (int(x) for x in args.batches.split(","))
    if not 0 < small < large:
        sys.exit("hook_instructions: --batches wants two lengths, the smaller first (e.g. 2000,6000)")
    launcher = os.path.join(args.build, "bin", "stallscope")
    variants = ["plain", "C hooks", "Python hooks"]
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        runs = {(v, n): pool.submit(instructions, v, n, launcher, tmp) for v in variants for n in (small, large)}
        per = {v: (runs[v, large].result() - runs[v, small].result()) / (large - small) for v in variants}
    base = per["plain"]
    print(f"Instructions per batch, tiny-batch loop ({small:,} and {large:,} batches under callgrind; "
          f"the training process only)")
    print(f"{'variant':<14} {'per batch':>11} {'added':>9} {'share':>8}  goal")
    for v in variants:
        added = per[v] - base
        share = 100 * added / base
        goal = "" if v == "plain" else (f"<= {GOAL_PCT:.0f} %" if v == "C hooks" else "(the fallback)")
        print(f"{v:<14} {per[v]:>11,.0f} {added:>+9,.0f} {share:>+7.1f}%  {goal}")
    c_share = 100 * (per["C hooks"] - base) / base
    py_share = 100 * (per["Python hooks"] - base) / base
    row("per-batch hooks, instructions added (callgrind, tiny loop)",
        f"{c_share:+.1f} % ({per['C hooks'] - base:+,.0f})", f"<= {GOAL_PCT:.0f} %",
        f"Python hooks {py_share:+.1f} %", c_share <= GOAL_PCT)


if __name__ == "__main__":
    main()
