"""An IterableDataset read by several workers, sharded with get_worker_info().

Each worker streams only its share of the records (record i goes to worker i % num_workers) and
sleeps --sleep-ms per record (reading a stream). --no-shard reproduces the classic bug: every
worker streams the whole dataset, so each epoch yields num_workers times the data (duplicates).

What stallscope should find (defaults: 2 epochs, 40 batches of 8 per epoch, 2 workers, 2 ms per
record, 4 ms steps):
  - dl.config with dataset_type "iterable", dataset_len and batches_per_epoch null;
  - dl.fetch spans in both workers, each ~ bs x S = 16 ms; batches alternate between workers;
    each worker's last fetch of an epoch hits the end of its stream (a dl.fetch with no dl.put);
  - a batch every ~ bs*S/W = 8 ms against 4 ms steps: data stall fraction ~ (8-4)/8 = 0.5;
  - with --no-shard: twice as many dl.next per epoch (80) for the same records, each batch
    delivered twice -- the duplicate-data bug shows as a batch count, not as a stall.

    stallscope run -o iter.db -- python examples/iterable_dataset.py
"""
import argparse
import time

from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from _common import Trainer, add_args, loader_kwargs, report, sample, train


class RecordStream(IterableDataset):
    def __init__(self, n, sleep_ms, shard=True):
        self.n, self.sleep_s, self.shard = n, sleep_ms / 1000.0, shard

    def __iter__(self):
        info = get_worker_info()
        if info is None or not self.shard:
            first, step = 0, 1
        else:
            first, step = info.id, info.num_workers
        for i in range(first, self.n, step):
            time.sleep(self.sleep_s)  # reading the next record from the stream
            yield sample(i)


def main():
    ap = add_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]),
                  epochs=2, batches=40, workers=2, sleep_ms=2.0, step_ms=4.0)
    ap.add_argument("--no-shard", action="store_true", help="every worker streams everything (the bug)")
    args = ap.parse_args()
    ds = RecordStream(args.batches * args.batch_size, args.sleep_ms, shard=not args.no_shard)
    loader = DataLoader(ds, **loader_kwargs(args))
    fetch = args.batch_size * args.sleep_ms
    period = max(args.step_ms, fetch / max(1, args.workers)) if args.workers else fetch + args.step_ms
    batches = args.batches * (args.workers if args.no_shard and args.workers else 1)
    wait = fetch + (batches - 1) * (period - args.step_ms if args.workers else fetch)
    expected = wait / (wait + batches * args.step_ms)
    report("iterable_dataset", expected, train(loader, Trainer(args.step_ms, args.step_kind), args.epochs),
           note=f"{batches} batches per epoch expected" + (" (duplicates: --no-shard)" if args.no_shard else ""))


if __name__ == "__main__":
    main()
