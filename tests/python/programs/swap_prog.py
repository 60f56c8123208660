"""DataLoader calls for the `--loader tuned|reference` tests, one per --case; knows nothing about
stallscope. Each case trains nothing: it iterates its loader for --epochs and prints one line
`RESULT {json}` with what it saw (every sample value per epoch, in order), so that a test can
compare the runs of one case under each --loader.

Cases (the DataLoader each makes):
  map            a map-style Dataset with a per-sample sleep, num_workers=0
  shuffled       the same, shuffle=True
  positional     DataLoader(ds, 4, False, None, None, 0): every setting positional
  subclass       a DataLoader subclass whose __init__ passes its arguments on
  iterable       an IterableDataset that does not shard by worker (more workers would repeat it)
  sampler        a sampler of its own (it could follow the training)
  generator      shuffle=True with a torch.Generator (the reproducibility recipe of the docs)
  init_count     a worker_init_fn that reads get_worker_info().num_workers, with 1 worker
  init_seed      the docs' seed_worker as worker_init_fn (it does not read the count)
  many_workers   num_workers=3 (more than a 2-core machine's tuned count)
  mutate         a dataset whose set_epoch() changes its samples between epochs
  bad_call       prefetch_factor=2 with num_workers=0: torch's own ValueError
  tensor         a TensorDataset (values and labels)
  ndarray        a NumPy array of rows
  memmap         a .npy file opened with mmap_mode="r" (in --dir)
  tensor1d       a 1-d tensor used as the dataset itself
"""
import argparse
import json
import os
import random
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, Sampler, TensorDataset, get_worker_info


class MapDS(Dataset):
    def __init__(self, n, sleep_s=0.0):
        self.n, self.sleep_s, self.offset = n, sleep_s, 0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return torch.tensor([float(i + self.offset)])

    def set_epoch(self, epoch):
        self.offset = 1000 * epoch


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        for i in range(self.n):  # every worker would yield all of them
            yield torch.tensor([float(i)])


class EveryOther(Sampler):
    """Even indices, then odd ones: a sampler of the script's own."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(list(range(0, self.n, 2)) + list(range(1, self.n, 2)))

    def __len__(self):
        return self.n


def init_count(worker_id):
    info = get_worker_info()
    info.dataset.offset = 100 * info.num_workers  # shards / configures by the count


def seed_worker(worker_id):
    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)


class MyLoader(DataLoader):
    def __init__(self, dataset, **kwargs):
        self.made_by_subclass = True
        super().__init__(dataset, **kwargs)


def values(batch):
    if torch.is_tensor(batch):
        return batch.reshape(len(batch), -1)[:, 0].tolist() if batch.dim() > 0 else [batch.item()]
    return values(batch[0])


def describe(batch):
    if torch.is_tensor(batch):
        return {"type": "Tensor", "shape": list(batch.shape), "dtype": str(batch.dtype),
                "min": float(batch.min()), "max": float(batch.max())}
    if isinstance(batch, (list, tuple)):
        return {"type": type(batch).__name__, "items": [describe(b) for b in batch]}
    return {"type": type(batch).__name__}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True)
    ap.add_argument("--samples", type=int, default=24)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--sleep-ms", type=float, default=0.0)
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    torch.manual_seed(0)
    n = a.samples
    ds = MapDS(n, a.sleep_ms / 1000.0)
    c = a.case
    if c == "map":
        loader = DataLoader(ds, batch_size=4)
    elif c == "shuffled":
        loader = DataLoader(ds, batch_size=4, shuffle=True)
    elif c == "positional":
        loader = DataLoader(ds, 4, False, None, None, 0)
    elif c == "subclass":
        loader = MyLoader(ds, batch_size=4)
    elif c == "iterable":
        loader = DataLoader(Stream(n), batch_size=4)
    elif c == "sampler":
        loader = DataLoader(ds, batch_size=4, sampler=EveryOther(n))
    elif c == "generator":
        g = torch.Generator()
        g.manual_seed(7)
        loader = DataLoader(ds, batch_size=4, shuffle=True, generator=g)
    elif c == "init_count":
        loader = DataLoader(ds, batch_size=4, num_workers=1, worker_init_fn=init_count)
    elif c == "init_seed":
        loader = DataLoader(ds, batch_size=4, worker_init_fn=seed_worker)
    elif c == "many_workers":
        loader = DataLoader(ds, batch_size=4, num_workers=3)
    elif c == "mutate":
        loader = DataLoader(ds, batch_size=4)
    elif c == "bad_call":
        loader = DataLoader(ds, batch_size=4, prefetch_factor=2)
    elif c == "tensor":
        x = torch.arange(n * 6, dtype=torch.float32).reshape(n, 2, 3)
        loader = DataLoader(TensorDataset(x, torch.arange(n) % 5), batch_size=5, shuffle=True)
    elif c in ("ndarray", "memmap"):
        rows = np.arange(n * 3, dtype=np.int32).reshape(n, 3)
        if c == "memmap":
            np.save(os.path.join(a.dir, "rows.npy"), rows)
            rows = np.load(os.path.join(a.dir, "rows.npy"), mmap_mode="r")
        loader = DataLoader(rows, batch_size=5, shuffle=True, drop_last=True)
    elif c == "tensor1d":
        loader = DataLoader(torch.arange(n, dtype=torch.float64) * 0.5, batch_size=7)
    else:
        raise SystemExit(f"unknown case {c}")
    epochs = []
    first = None
    for epoch in range(a.epochs):
        if c == "mutate":
            ds.set_epoch(epoch)
        seen = []
        for batch in loader:
            if first is None:
                first = describe(batch)
            seen.extend(values(batch))
        epochs.append(seen)
    print("RESULT " + json.dumps({
        "epochs": epochs, "first": first, "len": len(loader) if c != "iterable" else None,
        "loader_type": type(loader).__name__, "num_workers": loader.num_workers,
        "subclass": getattr(loader, "made_by_subclass", False), "rng_after": torch.rand(1).item(),
    }), flush=True)


if __name__ == "__main__":
    main()
