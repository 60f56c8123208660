"""Slow __getitem__ in the training process: the classic data stall.

The dataset sleeps --sleep-ms per sample (think: decoding an image from a slow disk) and the
DataLoader has no workers (--workers 0), so every batch is loaded inside next(), on the training
loop's own time. A step takes --step-ms.

What stallscope should find (defaults: batch 8 x 2 ms per sample, 4 ms steps):
  - each dl.next span lasts ~ batch_size x sleep_ms = 16 ms and holds one dl.fetch and its
    dl.collate (W = -1: the main process fetches);
  - data stall fraction ~ S*bs / (S*bs + C) = 16 / (16 + 4) = 0.80;
  - the fix it should suggest: worker processes (try --workers 4: the stall drops to about
    max(0, S*bs/4 - C) / (S*bs/4) -> 0 here).

    stallscope run -o slow.db -- python examples/slow_getitem.py
"""
import argparse
import time

from torch.utils.data import DataLoader, Dataset

from _common import Trainer, add_args, loader_kwargs, report, sample, train


class SlowDataset(Dataset):
    def __init__(self, n, sleep_ms):
        self.n, self.sleep_s = n, sleep_ms / 1000.0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.sleep_s)  # the slow part: I/O wait, no CPU
        return sample(i)


def main():
    ap = add_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]),
                  epochs=2, batches=40, workers=0, sleep_ms=2.0, step_ms=4.0)
    args = ap.parse_args()
    ds = SlowDataset(args.batches * args.batch_size, args.sleep_ms)
    loader = DataLoader(ds, **loader_kwargs(args))
    fetch = args.sleep_ms * args.batch_size  # ms to load one batch
    if args.workers == 0:
        expected = fetch / (fetch + args.step_ms)
    else:
        # Workers load in parallel: per epoch the loop waits for the first batch, then only for
        # what the steps cannot hide (worker start-up comes on top of this).
        wait = fetch + (args.batches - 1) * max(0.0, fetch / args.workers - args.step_ms)
        expected = wait / (wait + args.batches * args.step_ms)
    report("slow_getitem", expected, train(loader, Trainer(args.step_ms, args.step_kind), args.epochs))


if __name__ == "__main__":
    main()
