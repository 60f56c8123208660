"""What collating a batch costs inside a DataLoader worker beyond what it costs in the training
process, by the batch's layout.

In a worker, torch's default_collate puts each output tensor in shared memory of its own (one
segment per tensor, made, sized and mapped), so that the training process can map it instead of
copying it; in the training process it allocates ordinary memory. This times default_collate of
the same samples both ways (the thread's CPU time, the median of `--calls` calls, the lowest of
`--runs` runs) and prints, per layout, the difference per output tensor. The what-if model takes
off a fetch recorded in a worker what the training process would not pay fetching for itself
(docs/decisions.md, "A worker's collate into shared memory, taken off for no workers").

    python3 bench/collate_cost.py [--runs 3] [--calls 100]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch.utils.data import DataLoader, Dataset, default_collate

# (tensors per sample, floats per tensor, batch size)
LAYOUTS = [(1, 8, 16), (2, 256, 32), (8, 8, 16), (32, 4, 16), (32, 8, 16), (1, 8192, 32), (1, 3 * 224 * 224, 32)]


def samples(k: int, numel: int, bs: int) -> list:
    return [tuple(torch.full((numel,), float(i + j)) for j in range(k)) for i in range(bs)]


def collate_ms(batch: list, calls: int) -> float:
    """Median thread CPU ms of default_collate(batch)."""
    out = []
    for _ in range(calls):
        t = time.thread_time()
        default_collate(batch)
        out.append(time.thread_time() - t)
    return statistics.median(out) * 1e3


class InWorker(Dataset):
    """One item: the timing, taken inside the worker process (where default_collate shares)."""

    def __init__(self, layout, calls):
        self.layout, self.calls = layout, calls

    def __len__(self):
        return 1

    def __getitem__(self, i):
        return collate_ms(samples(*self.layout), self.calls)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="runs per layout; the lowest figure of each is kept")
    ap.add_argument("--calls", type=int, default=100, help="collate calls timed per run (median)")
    args = ap.parse_args()
    print(f"torch {torch.__version__}; thread CPU ms per default_collate, the lowest of {args.runs} runs of "
          f"the median of {args.calls} calls")
    print("| tensors per sample | floats per tensor | batch | output tensors | MB | in the training process "
          "| in a worker | more in the worker, per output tensor |")
    print("|---|---|---|---|---|---|---|---|")
    for k, numel, bs in LAYOUTS:
        here, there = [], []
        for _ in range(args.runs):
            here.append(collate_ms(samples(k, numel, bs), args.calls))
            loader = DataLoader(InWorker((k, numel, bs), args.calls), batch_size=None, num_workers=1)
            there.append(next(iter(loader)))
        a, b = min(here), min(there)
        mb = k * numel * bs * 4 / 1e6
        print(f"| {k} | {numel} | {bs} | {k} | {mb:.2f} | {a:.3f} | {b:.3f} | {(b - a) / k:.3f} |")


if __name__ == "__main__":
    main()
