"""The training step on one intra-op thread against the what-if model's two estimates of it, from
the same step run on two: the floor (the process's CPU over the step, which holds libgomp's threads
spinning between regions) and the parallel regions' figure (the step's part outside torch's
parallel regions plus their bodies' time, capped at that CPU; libstallscope.so's ss_parallel_totals).
An MLP step (batch 32, 3 layers) of each width runs one thread and two in turns of 3 steps inside
one process, so that the machine's drift falls on both alike. Needs libstallscope.so preloaded:

    LD_PRELOAD=build/lib/libstallscope.so python3 bench/parallel_step_bench.py [--widths 2048 1024 512] [--rounds 40]

Prints a table (ms, medians over the steps; the estimates' error against the one-thread step).
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time

import torch


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", type=int, nargs="+", default=[2048, 1024, 512])
    ap.add_argument("--rounds", type=int, default=40)
    a = ap.parse_args()
    try:
        totals = ctypes.CDLL(None).ss_parallel_totals
    except AttributeError:
        print("parallel_step_bench: run with LD_PRELOAD=build/lib/libstallscope.so", file=sys.stderr)
        return 2
    buf = (ctypes.c_uint64 * 3)()

    def regions():
        totals(buf)
        return buf[1] / 1e9, buf[2] / 1e9  # their wall, their bodies' time (s)

    print(f"One intra-op thread against two, {a.rounds} rounds of 3 steps each, taking turns (ms, medians)")
    print("| width | one thread | two threads: step / CPU | regions / bodies | regions' figure | floor |")
    print("|---|---|---|---|---|---|")
    for width in a.widths:
        layers, d = [], 256
        for _ in range(3):
            layers += [torch.nn.Linear(d, width), torch.nn.ReLU()]
            d = width
        model = torch.nn.Sequential(*layers, torch.nn.Linear(d, 10))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x, y = torch.randn(32, 256), torch.randint(0, 10, (32,))

        def step(model=model, opt=opt, x=x, y=y):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()

        for _ in range(5):
            step()
        got = {1: [], 2: []}
        for r in range(a.rounds):
            for threads in (2, 1) if r % 2 else (1, 2):
                torch.set_num_threads(threads)
                step()
                for _ in range(3):
                    w0, b0 = regions()
                    s0, c0 = time.perf_counter(), time.process_time()
                    step()
                    s1, c1 = time.perf_counter(), time.process_time()
                    w1, b1 = regions()
                    got[threads].append((s1 - s0, c1 - c0, w1 - w0, b1 - b0))
        torch.set_num_threads(2)

        def med(v, f):
            return statistics.median(f(z) for z in v) * 1e3

        one, two = med(got[1], lambda z: z[0]), got[2]
        fig = med(two, lambda z: (z[0] - z[2]) + min(z[3], z[1] - (z[0] - z[2])))
        floor = med(two, lambda z: z[1])
        print(f"| {width} | {one:.2f} | {med(two, lambda z: z[0]):.2f} / {floor:.2f} | "
              f"{med(two, lambda z: z[2]):.2f} / {med(two, lambda z: z[3]):.2f} | "
              f"{fig:.2f} ({100 * (fig / one - 1):+.1f} %) | {floor:.2f} ({100 * (floor / one - 1):+.1f} %) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
