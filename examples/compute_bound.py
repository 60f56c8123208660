"""A training loop whose input pipeline keeps up: the step, not the data, is the bottleneck.

Samples are cheap (--sleep-ms per sample, default 0.1 ms) and 2 workers prefetch; each step takes
--step-ms (default 50 ms). This is the control case: stallscope must not blame the DataLoader.

What stallscope should find (defaults: 2 epochs x 30 batches, batch 8):
  - short dl.next waits once the first batch of the epoch is there (taking a ready batch off the
    result queue: about a millisecond);
  - data stall fraction ~ 0 (only each epoch's first batch is waited for: ~ bs*S + worker start,
    a few ms against 30 x 50 ms of steps -> < 0.02 plus start-up);
  - the result queue full: "ready" batches (put, not yet handed) at prefetch_factor x workers = 4
    most of the time; workers mostly idle (proc.cpu near 0);
  - no recommendation to change the DataLoader (speed up the step instead).

    stallscope run -o compute.db -- python examples/compute_bound.py
"""
import argparse
import time

from torch.utils.data import DataLoader, Dataset

from _common import Trainer, add_args, loader_kwargs, report, sample, train


class FastDataset(Dataset):
    def __init__(self, n, sleep_ms):
        self.n, self.sleep_s = n, sleep_ms / 1000.0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return sample(i)


def main():
    ap = add_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]),
                  epochs=2, batches=30, workers=2, sleep_ms=0.1, step_ms=50.0)
    args = ap.parse_args()
    ds = FastDataset(args.batches * args.batch_size, args.sleep_ms)
    loader = DataLoader(ds, **loader_kwargs(args))
    fetch = args.batch_size * args.sleep_ms
    per_worker = fetch / max(1, args.workers) if args.workers else fetch
    wait = fetch + (args.batches - 1) * max(0.0, per_worker - args.step_ms if args.workers else fetch)
    expected = wait / (wait + args.batches * args.step_ms)
    report("compute_bound", expected, train(loader, Trainer(args.step_ms, args.step_kind), args.epochs),
           note="expected value excludes worker start-up at each epoch")


if __name__ == "__main__":
    main()
