"""Batches of many small tensors, handed over by workers that cost more than they save.

Each sample is a dict of --fields small tensors (think: a detection target, a tokenizer's
outputs, per-field features), burned --sleep-ms of CPU to build. A DataLoader worker collates
each field into its own tensor in shared memory and the training process receives each one over
its own connection: for small tensors the hand-off costs per tensor, not per byte. With 32 fields,
2 workers ran this loop at 660-690 samples/s on a 2-core VM and no workers at about 1,600.

What stallscope should find (defaults: 3 epochs x 64 batches of 16, 32 fields, 2 workers, 0.3 ms
per sample, 2 ms steps): a data-bound loop whose workers' fetch (its collate into shared memory
included) and the training thread's receive both take milliseconds per batch; each worker's
dl.batch says 33 tensors; the advice is num_workers=0 (reduce_num_workers).

    stallscope run -o many.db -- python examples/many_tensors.py
    stallscope run -o none.db -- python examples/many_tensors.py --workers 0
"""
import argparse

import torch
from torch.utils.data import DataLoader, Dataset

from _common import FEATURES, Trainer, add_args, burn_cpu, loader_kwargs, report, sample, train


class ManyFields(Dataset):
    def __init__(self, n, fields, cpu_ms):
        self.n, self.fields, self.cpu_ms = n, fields, cpu_ms

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        burn_cpu(self.cpu_ms)
        x, y = sample(i)
        out = {f"x{k}": x[2 * k:2 * k + 2].clone() for k in range(FEATURES // 2)}  # the features, in pieces
        for k in range(len(out), self.fields):  # and per-sample fields the step does not use
            out[f"meta{k}"] = torch.full((4,), float(i + k))
        return out, y


class FieldsTrainer(Trainer):
    def step(self, batch):
        fields, y = batch
        return super().step((torch.cat([fields[f"x{k}"] for k in range(FEATURES // 2)], 1), y))


def main():
    ap = add_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]),
                  epochs=3, batches=64, workers=2, sleep_ms=0.3, step_ms=2.0, batch_size=16)
    ap.add_argument("--fields", type=int, default=32, help="tensors per sample (default 32, at least 8)")
    args = ap.parse_args()
    if args.fields < FEATURES // 2:
        ap.error(f"--fields must be at least {FEATURES // 2}")
    ds = ManyFields(args.batches * args.batch_size, args.fields, args.sleep_ms)
    loader = DataLoader(ds, **loader_kwargs(args, persistent_workers=args.workers > 0))
    fetch = args.sleep_ms * args.batch_size
    expected = fetch / (fetch + args.step_ms)  # without workers; with them, the hand-off comes on top
    report("many_tensors", expected, train(loader, FieldsTrainer(args.step_ms, "cpu"), args.epochs),
           note=f"{args.fields} tensors per sample, num_workers={args.workers}; the expected figure leaves out "
                "building the fields and handing batches over")


if __name__ == "__main__":
    main()
