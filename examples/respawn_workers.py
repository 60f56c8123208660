"""Workers that are costly to start, re-started every epoch (persistent_workers=False).

Each worker's worker_init_fn sleeps --init-ms (think: opening a dataset index, loading a
tokenizer, connecting to storage). Without persistent workers torch starts new workers at every
`for batch in loader`, so every epoch begins with a long wait. Epochs are short (--batches), which
makes this the dominant cost.

What stallscope should find (defaults: 6 epochs x 10 batches, 2 workers, init 250 ms, batch 8 x
1 ms per sample, 10 ms steps):
  - dl.worker_start for both workers in every epoch (new pids each time), each followed ~250 ms
    later by dl.worker_ready from that pid;
  - the first dl.next of every epoch lasts ~ init + bs*S = 258 ms; the others are short (2 workers
    make a batch every 4 ms, a step takes 10 ms);
  - data stall fraction ~ 258 / (258 + 10 x 10) = 0.72;
  - the fix it should suggest: persistent_workers=True. Run with --persistent to compare: only
    the first epoch pays, stall ~ 258 / (258 + 6 x 100) = 0.30.

    stallscope run -o respawn.db -- python examples/respawn_workers.py
    stallscope run -o persistent.db -- python examples/respawn_workers.py --persistent
"""
import argparse
import time

from torch.utils.data import DataLoader, Dataset

from _common import Trainer, add_args, loader_kwargs, report, sample, train


class SlowStartDataset(Dataset):
    def __init__(self, n, sleep_ms):
        self.n, self.sleep_s = n, sleep_ms / 1000.0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.sleep_s)
        return sample(i)


class SlowInit:
    """worker_init_fn: a fixed start-up cost per worker (a class, so spawn can pickle it)."""

    def __init__(self, ms):
        self.s = ms / 1000.0

    def __call__(self, worker_id):
        time.sleep(self.s)


def main():
    ap = add_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]),
                  epochs=6, batches=10, workers=2, sleep_ms=1.0, step_ms=10.0)
    ap.add_argument("--init-ms", type=float, default=250.0, help="worker start-up cost in ms (default 250)")
    args = ap.parse_args()
    ds = SlowStartDataset(args.batches * args.batch_size, args.sleep_ms)
    loader = DataLoader(ds, **loader_kwargs(args, worker_init_fn=SlowInit(args.init_ms)))
    fetch = args.batch_size * args.sleep_ms
    if args.workers == 0:  # no workers to start: every batch is loaded inside next()
        wait = args.epochs * args.batches * fetch
    else:
        first = args.init_ms + fetch  # wait for an epoch's first batch
        steady = max(0.0, fetch / args.workers - args.step_ms)
        starts = 1 if args.persistent else args.epochs
        wait = starts * first + (args.epochs * args.batches - starts) * steady
    expected = wait / (wait + args.epochs * args.batches * args.step_ms)
    report("respawn_workers", expected, train(loader, Trainer(args.step_ms, args.step_kind), args.epochs),
           note=f"persistent_workers={args.persistent}, worker start-up {args.init_ms:.0f} ms "
                "(process start itself comes on top)")


if __name__ == "__main__":
    main()
