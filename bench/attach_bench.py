"""What `stallscope attach` costs a training loop that is already running.

Starts bench/overhead_train.py (data-bound and compute-bound, as in overhead_bench.py) without
stallscope, attaches to it for a few seconds, detaches, and reads the loop's own step times: the
throughput before the attach, while attached and after the detach (all in the same process, so
the comparison is side by side; the cost is taken against the mean of before and after, which
cancels a steady drift), the longest step around the attach (the one-off pause: the
stopped thread, then the Python side holding the GIL) against the median step, and what the attach
command itself reports. Then what `stallscope attach --list` costs, with a training process to
find (it reads every process's /proc files).
    python3 bench/attach_bench.py [--reps N] [--build DIR]
"""
import argparse
import itertools
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from bench_rows import row as bench_row

HERE = os.path.dirname(os.path.abspath(__file__))
BEFORE, ATTACHED, AFTER = 3.0, 4.0, 2.5  # seconds of each phase


def rate(ends, bs, lo, hi):
    n = sum(1 for t in ends if lo <= t < hi)
    return bs * n / (hi - lo)


def one(launcher, mode, tmp, rep):
    log = os.path.join(tmp, f"{mode}-{rep}.json")
    total = BEFORE + ATTACHED + AFTER + 1.5
    p = subprocess.Popen([sys.executable, os.path.join(HERE, "overhead_train.py"), "--mode", mode, "--seconds",
                          str(total), "--step-log", log], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "TRAINING":
        sys.exit(f"attach_bench: the training loop did not start: {p.stderr.read()[-500:]}")
    time.sleep(BEFORE + 0.5)
    t_a = time.perf_counter()
    a = subprocess.run([launcher, "attach", "-o", os.path.join(tmp, f"{mode}-{rep}.db"), "--duration", str(ATTACHED),
                        str(p.pid)], capture_output=True, text=True)
    t_d = time.perf_counter()
    _, err = p.communicate()
    if a.returncode != 0 or p.returncode != 0:
        sys.exit(f"attach_bench: attach rc={a.returncode} ({a.stderr.strip()}), train rc={p.returncode} ({err[-500:]})")
    d = json.load(open(log))
    ends, bs = d["ends"], d["batch_size"]
    start = ends[0]
    steps = [b - a_ for a_, b in itertools.pairwise(ends)]
    before = [s for e, s in zip(ends[1:], steps, strict=True) if start + 0.5 <= e < t_a]
    around = [s for e, s in zip(ends[1:], steps, strict=True) if t_a <= e < t_a + 1.5]
    stopped = re.search(r"stopped ([0-9.]+) ms", a.stderr)
    gil = re.search(r"\(([0-9.]+) ms holding the GIL\)", a.stderr)
    return {
        "before": rate(ends, bs, start + 0.5, t_a),
        "attached": rate(ends, bs, t_a + 1.5, t_d - 0.3),
        "after": rate(ends, bs, t_d + 0.3, ends[-1]),
        "median_step_ms": statistics.median(before) * 1e3,
        "longest_at_attach_ms": max(around) * 1e3 if around else float("nan"),
        "stopped_ms": float(stopped.group(1)) if stopped else float("nan"),
        "gil_ms": float(gil.group(1)) if gil else float("nan"),
    }


def list_cost(launcher, reps):
    """`attach --list` while a training process runs: median (wall s, CPU s) over `reps` runs."""
    p = subprocess.Popen([sys.executable, os.path.join(HERE, "overhead_train.py"), "--mode", "compute", "--seconds",
                          "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if p.stdout.readline().strip() != "TRAINING":
            sys.exit(f"attach_bench: the training loop did not start: {p.stderr.read()[-500:]}")
        runs = []
        for _ in range(reps):
            r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
            out = subprocess.run([launcher, "attach", "--list"], capture_output=True, text=True)
            wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
            if str(p.pid) not in out.stdout:
                sys.exit(f"attach_bench: attach --list did not list the training process: {out.stdout}{out.stderr}")
            runs.append((wall, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime))
    finally:
        p.kill()
        p.communicate()
    return statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    args = ap.parse_args()
    launcher = os.path.join(args.build, "bin", "stallscope")
    if not os.access(launcher, os.X_OK):
        sys.exit(f"attach_bench: {launcher} not found; build first (scripts/setup.sh)")
    tmp = tempfile.mkdtemp(prefix="stallscope-attach-")
    print(f"stallscope attach on a running CPU training loop ({os.cpu_count()} cores), median of {args.reps} runs;")
    print(f"each run: {BEFORE:.0f} s before, attached {ATTACHED:.0f} s, {AFTER:.1f} s after the detach, in one process")
    print("| loop | before samples/s | attached samples/s | after detach samples/s | before -> after | "
          "cost attached (vs mean of before and after) | median step | longest step at attach | thread stopped | "
          "GIL held | goal (cost attached) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for mode in ("data", "compute"):
        runs = [one(launcher, mode, tmp, r) for r in range(args.reps)]
        m = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        # Against the mean of before and after: a loop whose speed drifts over the run (warm-up,
        # the machine's other load) drifts through the attached window too.
        around = (m["before"] + m["after"]) / 2
        cost = (around - m["attached"]) / around * 100
        drift = (m["before"] - m["after"]) / m["before"] * 100
        verdict = "met" if cost < 2 else "MISSED"
        print(f"| {mode}-bound | {m['before']:.0f} | {m['attached']:.0f} | {m['after']:.0f} | {drift:+.1f} % | "
              f"{cost:+.1f} % | {m['median_step_ms']:.1f} ms | {m['longest_at_attach_ms']:.0f} ms | "
              f"{m['stopped_ms']:.1f} ms | {m['gil_ms']:.0f} ms | < 2 % ({verdict}) |")
        bench_row(f"attach, {mode}-bound loop: cost while attached", f"{cost:+.1f} %", "< 2 %", "", cost < 2)
        bench_row(f"attach, {mode}-bound loop: pause (thread stopped; GIL held)",
                  f"{m['stopped_ms']:.1f} ms; {m['gil_ms']:.0f} ms", "", "")
    wall, cpu = list_cost(launcher, max(args.reps, 3))
    print()
    print(f"`stallscope attach --list` ({len(os.listdir('/proc'))} entries in /proc, one training process): "
          f"{wall * 1e3:.0f} ms wall, {cpu * 1e3:.0f} ms CPU (median)")


if __name__ == "__main__":
    main()
