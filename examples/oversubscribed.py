"""More DataLoader workers than CPU cores, each doing CPU-heavy work per sample.

Every sample costs --sleep-ms of pure CPU (a busy loop standing in for decoding and augmentation).
The default starts 4 workers per available core, so workers spend much of their time runnable but
waiting for a core. The training step sleeps --step-ms (the host idles while a GPU would compute).

What stallscope should find (defaults: batch 8 x 4 ms CPU per sample, 4 ms steps, K cores):
  - one batch costs bs x S = 32 CPU-ms; the cores produce at most K / 32 batches per ms, whatever
    the number of workers, so a batch is ready every 32 / K ms (16 ms on 2 cores);
  - data stall fraction ~ 1 - C / (bs*S/K) = 1 - 4/16 = 0.75 on 2 cores (plus each epoch's start);
  - per worker: proc.cpu well under 1 core and a high proc.runq_wait (runnable, not running), many
    involuntary context switches; dl.fetch spans that last ~workers/K times their CPU cost;
  - the fix it should suggest: num_workers ~ cores (--workers K gives the same throughput with no
    run-queue wait), and fewer CPU-ms per sample (cheaper transforms, or move them to the GPU).

    stallscope run -o over.db -- python examples/oversubscribed.py
"""
import argparse

from torch.utils.data import DataLoader, Dataset

from _common import Trainer, add_args, burn_cpu, cores, loader_kwargs, report, sample, train


class CpuHeavyDataset(Dataset):
    def __init__(self, n, cpu_ms):
        self.n, self.cpu_ms = n, cpu_ms

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        burn_cpu(self.cpu_ms)  # the CPU-heavy transform
        return sample(i)


def main():
    k = cores()
    ap = add_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]),
                  epochs=2, batches=30, workers=max(4, 4 * k), sleep_ms=4.0, step_ms=4.0)
    args = ap.parse_args()
    ds = CpuHeavyDataset(args.batches * args.batch_size, args.sleep_ms)
    loader = DataLoader(ds, **loader_kwargs(args))
    # Steady state: a batch every max(step, bs*S/min(K, workers)) ms; the first batch of an epoch
    # needs its whole bs*S on one worker, however many cores are free.
    parallel = min(k, max(1, args.workers))
    period = max(args.step_ms, args.batch_size * args.sleep_ms / parallel)
    wait = args.batch_size * args.sleep_ms + (args.batches - 1) * (period - args.step_ms)
    expected = wait / (wait + args.batches * args.step_ms)
    report("oversubscribed", expected, train(loader, Trainer(args.step_ms, args.step_kind), args.epochs),
           note=f"{args.workers} workers on {k} cores")


if __name__ == "__main__":
    main()
