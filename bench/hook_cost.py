"""What the per-batch DataLoader hooks add on the training thread, measured inside one process under
`stallscope run` (bench/overhead_bench.py runs it): the tiny-batch loop (batches of 4 from memory,
no workers, an empty step) with torch's own __next__ and fetcher, with the hooks in C
(_stallscope_hooks) and with their Python twins, in rounds that take turns. One process and the
loop thread's CPU time keep the launcher, the start-up and the machine's other load out of the
figure; the fastest round of each is the one least disturbed (a shared machine only adds time).
Prints one JSON line: {"rounds": N, "us": {variant: [us per batch of each round]}}.
"""

import argparse
import functools
import json
import sys
import time

import torch
from torch.utils.data import DataLoader
from torch.utils.data import dataloader as dl

from overhead_train import FastDataset


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--batches", type=int, default=1500)
    args = ap.parse_args()
    torch.set_num_threads(1)
    ds = FastDataset(4 * args.batches, dim=8)
    for _ in DataLoader(ds, batch_size=4):  # installs the hooks (first DataLoader use)
        break
    from stallscope.hooks import _main
    from stallscope.hooks import _state as S

    if S._fast_module is None or S._orig_next is None:
        sys.exit(f"hook_cost: run under `stallscope run` with the C hooks built ({S._fast_why})")
    base = dl._BaseDataLoaderIter
    kind = dl._DatasetKind
    c_next, hooked_create = base.__next__, kind.__dict__["create_fetcher"]
    py_next = functools.wraps(S._orig_next)(_main._it_next)
    torch_create = staticmethod(S._orig_create_fetcher)
    fast = S._fast_module
    variants = {
        "torch": (S._orig_next, torch_create, fast),
        "C hooks": (c_next, hooked_create, fast),
        "Python hooks": (py_next, hooked_create, None),
    }
    us = {name: [] for name in variants}
    names = list(variants)
    for r in range(args.rounds):
        for name in names[r % 3:] + names[:r % 3]:
            nxt, create, S._fast_module = variants[name]
            base.__next__ = nxt
            kind.create_fetcher = create
            n = 0
            c0 = time.thread_time()
            for _ in DataLoader(ds, batch_size=4):
                n += 1
            us[name].append((time.thread_time() - c0) / n * 1e6)
    base.__next__, kind.create_fetcher, S._fast_module = c_next, hooked_create, fast
    print(json.dumps({"rounds": args.rounds, "us": us}))


if __name__ == "__main__":
    main()
