"""Does `stallscope tune` find the best DataLoader setting, and in how much less time than a sweep?

For each workload (bench/advice_workload.py: a real MLP training step fed by a DataLoader whose
__getitem__ costs what the flags say), in one run:
  - `stallscope tune --json`: the baseline, the model's candidates and its climb;
  - `stallscope tune --sweep --json`: every setting of the grid (num_workers 0 to max(4, 2 x cores),
    prefetch_factor 2 and 4, persistent or not), the exhaustive benchmark.
It prints, per workload: tune's winner, its samples/s as the sweep measured it, the sweep's best,
the two run again side by side (the workload as written, each setting pasted in, interleaved pairs,
no stallscope) and their ratio (goal: >= 0.95), the time each took and the ratio (goal: tune <= 1/3
of the sweep), and then each of tune's candidates with predicted and measured samples/s.

    python3 bench/tune_bench.py [--steps 60] [--warmup 10] [--only NAME ...] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PROG = os.path.join(HERE, "advice_workload.py")
sys.path.insert(0, HERE)
import advice_bench  # noqa: E402  (the workloads and their own settings)

# The five bottlenecks the tune issue names, from advice_bench's workloads, run long enough for
# tune to stop them (it never waits for the end).
NAMES = ["cpu_getitem", "io_getitem", "heavy_step", "compute_bound", "spawn_startup"]


def stallscope_bin() -> str:
    for p in (os.environ.get("STALLSCOPE_BIN", ""), os.path.join(REPO, "build", "bin", "stallscope")):
        if p and os.access(p, os.X_OK):
            return p
    sys.exit("tune_bench: no stallscope executable; build first (scripts/test.sh) or set STALLSCOPE_BIN")


def workload_command(name: str) -> list[str]:
    _, flags, base, _ = advice_bench.WORKLOADS[name]
    flags = list(flags)
    if "--epochs" in flags:  # spawn_startup's short epochs stay short; there are just more of them
        flags[flags.index("--epochs") + 1] = "1000"
    else:
        flags += ["--epochs", "1000"]
    return [sys.executable, PROG, *flags, *advice_bench.setting_flags(base)]


def tune(exe: str, cmd: list[str], out: str, extra: list[str], a) -> dict:
    p = subprocess.run([exe, "tune", "--json", "--force", "-o", out, "--steps", str(a.steps), "--warmup",
                        str(a.warmup), "--budget", str(a.budget), *extra, "--", *cmd],
                       capture_output=True, text=True, timeout=a.budget + 300)
    if p.returncode != 0:
        raise RuntimeError(f"tune {' '.join(extra)} failed ({p.returncode}): {p.stderr.strip().splitlines()[-1:]}")
    return json.loads(p.stdout)


def plain_flags(settings: dict) -> list[str]:
    """advice_workload's flags for a setting of tune's JSON."""
    threads = ["--threads", str(settings["torch_threads"])] if settings.get("torch_threads") else []
    if settings["num_workers"] == 0:
        return ["--workers", "0", *threads]
    return ["--workers", str(settings["num_workers"]), "--prefetch", str(settings["prefetch_factor"]),
            "--persistent", str(int(settings["persistent_workers"])), *threads]


def side_by_side(name: str, a_settings: dict, b_settings: dict, pairs: int) -> tuple[float, float]:
    """Median samples/s of the workload as written (its own epochs), run without stallscope with
    each setting, in `pairs` interleaved pairs, timed by the loop's own clock."""
    _, flags, _, _ = advice_bench.WORKLOADS[name]
    a, b = [], []
    for _ in range(pairs):
        a.append(advice_bench.run_loop([*flags, *plain_flags(a_settings)]))
        b.append(advice_bench.run_loop([*flags, *plain_flags(b_settings)]))
    a.sort()
    b.sort()
    return a[len(a) // 2], b[len(b) // 2]


def key(t: dict):
    return (t["loader"], t["loader_args"])


def measured(t: dict) -> float:
    return t["measured"]["samples_per_s"] if t.get("measured") else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--budget", type=int, default=900)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--pairs", type=int, default=3, help="interleaved pairs of the side-by-side check")
    ap.add_argument("--json", help="write the rows to this file too")
    a = ap.parse_args()
    exe = stallscope_bin()
    rows, details = [], []
    with tempfile.TemporaryDirectory(prefix="tune-bench-") as tmp:
        for name in a.only or NAMES:
            cmd = workload_command(name)
            t = tune(exe, cmd, os.path.join(tmp, name + "-tune"), [], a)
            s = tune(exe, cmd, os.path.join(tmp, name + "-sweep"), ["--sweep"], a)
            sweep = {key(x): x for x in [s["baseline"], *s["candidates"]]}
            best = max(sweep.values(), key=measured)
            win = t["winner"]
            win_key = (win["loader"], win["loader_args"] if not win["is_baseline"] else t["baseline"]["loader_args"])
            in_sweep = measured(sweep[win_key]) if win_key in sweep else float("nan")
            # The two winners again, side by side, as the script would run with each pasted in.
            win_settings = t["baseline"]["settings"] if win["is_baseline"] else win["settings"]
            if win_settings == best["settings"]:
                ab = (1.0, 1.0)
            else:
                ab = side_by_side(name, win_settings, best["settings"], a.pairs)
            rows.append({
                "workload": name, "winner": win["loader_args"] or win["name"], "winner_in_tune": win["samples_per_s"],
                "winner_in_sweep": in_sweep, "sweep_best": measured(best), "sweep_best_setting": best["arguments"],
                "ratio": in_sweep / measured(best) if measured(best) else float("nan"),
                "ab_winner": ab[0], "ab_best": ab[1], "ab_ratio": ab[0] / ab[1] if ab[1] else float("nan"),
                "tune_s": t["elapsed_s"], "sweep_s": s["elapsed_s"], "runs": 1 + len(t["candidates"]),
                "sweep_runs": 1 + len(s["candidates"]),
            })
            details.append((name, t))
            print(f"  {name}: done ({t['elapsed_s']:.0f} s tune, {s['elapsed_s']:.0f} s sweep)", file=sys.stderr,
                  flush=True)
    print(f"stallscope tune against an exhaustive sweep ({a.steps} steps after {a.warmup} warm-up steps per "
          f"setting; {os.cpu_count()} CPUs)\n")
    print("| workload | tune's winner | sweep's best | winner / best, side by side (goal >= 0.95) | "
          "in the sweep's own runs | tune s | sweep s | time ratio (goal <= 0.33) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        same = r["ab_winner"] == r["ab_best"] == 1.0
        side = "the same setting" if same else f"{r['ab_winner']:.0f} / {r['ab_best']:.0f} = {r['ab_ratio']:.3f}"
        in_sweep = "not in the grid" if r["winner_in_sweep"] != r["winner_in_sweep"] else (
            f"{r['winner_in_sweep']:.0f} / {r['sweep_best']:.0f} = {r['ratio']:.3f}")
        print(f"| {r['workload']} | {r['winner']} | {r['sweep_best_setting']} | {side} | {in_sweep} | "
              f"{r['tune_s']:.0f} ({r['runs']} runs) | {r['sweep_s']:.0f} ({r['sweep_runs']} runs) | "
              f"{r['tune_s'] / r['sweep_s']:.2f} |")
    print(f"\nSide by side: the workload as written (its own epochs) with each setting pasted in, no stallscope, "
          f"median samples/s of {a.pairs} interleaved pairs by the loop's own clock.")
    print("\nTune's candidates, predicted (what-if model of the baseline) against measured samples/s:\n")
    print("| workload | setting | predicted | measured | error | status |")
    print("|---|---|---|---|---|---|")
    for name, t in details:
        for c in [t["baseline"], *t["candidates"]]:
            p = c["predicted"]["samples_per_s"] if c.get("predicted") else None
            m = measured(c)
            err = f"{(p / m - 1) * 100:+.0f} %" if p and m else "-"
            print(f"| {name} | {c['loader_args'] or c['name']} | {p:.0f} | {m:.0f} | {err} | {c['status']} |"
                  if p else f"| {name} | {c['loader_args'] or c['name']} | - | {m:.0f} | - | {c['status']} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
