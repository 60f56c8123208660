"""A fork storm: EPOCHS epochs of a DataLoader with non-persistent workers (two new worker processes
per epoch). Prints RESULT with the loop's checksum and, at epoch WARM and at the end, this
process's and its parent's (the `stallscope run` launcher, when run under it) open descriptors,
threads and resident memory, and the entries of /dev/shm. Usage: fork_storm.py EPOCHS [WARM]."""

import gc
import json
import os
import sys

import torch
from procstat import figures
from torch.utils.data import DataLoader, Dataset


class Small(Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        return torch.full((64,), float(i))


def snapshot():
    # The last epoch's iterator and its worker queues sit in reference cycles until a collection:
    # their pipes would count as open descriptors at one snapshot and not at the other.
    gc.collect()
    return {"self": figures(os.getpid()), "parent": figures(os.getppid()), "shm": sorted(os.listdir("/dev/shm"))}


def main():
    epochs = int(sys.argv[1])
    warm = int(sys.argv[2]) if len(sys.argv) > 2 else min(10, epochs)
    loader = DataLoader(Small(), batch_size=4, num_workers=2, persistent_workers=False)
    total = 0.0
    start = None
    for e in range(epochs):
        if e == warm:
            start = snapshot()
        for batch in loader:
            total += float(batch.sum())
    end = snapshot()
    print("RESULT " + json.dumps({"epochs": epochs, "total": total, "start": start or end, "end": end}), flush=True)


if __name__ == "__main__":
    main()
