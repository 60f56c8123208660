"""torch's parallel regions beside busy processes: a small MLP training step (batch 32, 2 hidden
layers of 256, SGD; the light step of bench/advice_workload.py) on torch's intra-op threads,
after a pause like a next() that waits for a batch, while other processes keep the cores busy:
continuously (a worker whose __getitem__ computes) or in 0.5-ms slices between 0.5-ms sleeps (one
that computes and waits). Each configuration runs in its own process; libstallscope.so's
ss_parallel_totals gives the regions' count and wall per step. It shows what the what-if model
cannot price from a recording without workers: how long the regions wait for their threads when
the cores are shared, which moves with the number of busy processes and how they use the CPU, not
with an even share of the cores (docs/decisions.md, "The intra-op threads' wait beside busy
workers, measured").

    python3 bench/region_wait.py [--build DIR] [--busy 0 1 2 3] [--steps 200] [--gap-ms 30]

Prints a table (ms): the step's median and mean, the regions' wall per step, torch on its default
intra-op threads and on one.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def busy_loop(sliced: bool, stop) -> None:
    import numpy as np

    base = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    a = base
    while not stop.is_set():
        end = time.thread_time() + (0.0005 if sliced else 0.05)
        while time.thread_time() < end:
            a = np.tanh(a @ base * 0.01)
        if sliced:
            time.sleep(0.0005)


def child(busy: int, sliced: bool, threads: int, steps: int, gap_s: float) -> dict:
    ctx = mp.get_context("fork")
    stop = ctx.Event()
    procs = [ctx.Process(target=busy_loop, args=(sliced, stop), daemon=True) for _ in range(busy)]
    for p in procs:
        p.start()
    import torch

    if threads:
        torch.set_num_threads(threads)
    totals = ctypes.CDLL(None).ss_parallel_totals
    buf = (ctypes.c_uint64 * 3)()
    torch.manual_seed(0)
    layers, d = [], 256
    for _ in range(2):
        layers += [torch.nn.Linear(d, 256), torch.nn.ReLU()]
        d = 256
    model = torch.nn.Sequential(*layers, torch.nn.Linear(d, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 256), torch.randint(0, 10, (32,))
    walls, regions, region_wall = [], [], []
    try:
        for i in range(steps + 20):
            if gap_s:
                time.sleep(gap_s)
            totals(buf)
            r0, w0 = buf[0], buf[1]
            t0 = time.perf_counter()
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            t1 = time.perf_counter()
            totals(buf)
            if i >= 20:  # after a warm-up
                walls.append((t1 - t0) * 1e3)
                regions.append(buf[0] - r0)
                region_wall.append((buf[1] - w0) / 1e6)
    finally:
        stop.set()
        for p in procs:
            p.join(timeout=5)
    return {"threads": torch.get_num_threads(), "p50": statistics.median(walls), "mean": statistics.mean(walls),
            "regions": statistics.median(regions), "region_wall": statistics.mean(region_wall)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--busy", type=int, nargs="+", default=[0, 1, 2, 3], help="busy processes beside the step")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--gap-ms", type=float, default=30.0, help="pause before each step (a next() waiting)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        busy, sliced, threads = json.loads(a.child)
        print(json.dumps(child(busy, sliced, threads, a.steps, a.gap_ms / 1e3)))
        return 0
    lib = os.path.join(os.path.abspath(a.build), "lib", "libstallscope.so")
    if not os.path.exists(lib):
        print(f"region_wait: {lib} not found; build first or pass --build", file=sys.stderr)
        return 2
    env = {**os.environ, "LD_PRELOAD": lib}
    print(f"The light MLP step after a {a.gap_ms:g}-ms pause, beside busy processes ({os.cpu_count()} cores); "
          f"{a.steps} steps each, ms")
    print("| busy processes | how they use the CPU | torch threads | step p50 | step mean | regions per step "
          "| regions' wall per step |")
    print("|---|---|---|---|---|---|---|")
    configs = [(n, False, 0) for n in a.busy] + [(n, True, 0) for n in a.busy if n] + [(n, False, 1) for n in a.busy]
    for busy, sliced, threads in configs:
        out = subprocess.run([sys.executable, __file__, "--steps", str(a.steps), "--gap-ms", str(a.gap_ms),
                              "--child", json.dumps([busy, sliced, threads])],
                             capture_output=True, text=True, env=env, timeout=600)
        if out.returncode != 0:
            print(f"region_wait: a run failed: {out.stderr.strip()[-400:]}", file=sys.stderr)
            return 1
        r = json.loads(out.stdout.strip().splitlines()[-1])
        how = "-" if busy == 0 else ("0.5 ms on, 0.5 ms asleep" if sliced else "continuously")
        print(f"| {busy} | {how} | {r['threads']} | {r['p50']:.2f} | {r['mean']:.2f} | {r['regions']:.0f} "
              f"| {r['region_wall']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
