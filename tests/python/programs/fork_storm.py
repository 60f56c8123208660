"""A fork storm: EPOCHS epochs of a DataLoader with non-persistent workers (two new worker processes
per epoch). Prints RESULT with the loop's checksum and, at epoch WARM and at the end, this
process's and its parent's (the `stallscope run` launcher, when run under it) open descriptors,
threads and resident memory, and the entries of /dev/shm. Usage: fork_storm.py EPOCHS [WARM]."""

import gc
import json
import os
import sys
import threading
import time

import torch
from procstat import figures
from torch.utils.data import DataLoader, Dataset


class Small(Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        return torch.full((64,), float(i))


def settle():
    """What torch and multiprocessing leave behind an epoch for a moment, with or without a profiler:
    the index queues' feeder threads hold their pipes until they end, which they do on their own
    after the iterator has shut down; and the iterator and its queues sit in reference cycles until a
    collection. Waits for the Python threads only: a native thread left by a profiler still counts."""
    deadline = time.monotonic() + 10
    while threading.active_count() > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    gc.collect()


def epoch(loader):
    # A function of its own, so that the last batch (whose shared-memory storage holds a descriptor)
    # does not outlive the epoch.
    return sum(float(batch.sum()) for batch in loader)


def snapshot():
    settle()
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
        total += epoch(loader)
    end = snapshot()
    print("RESULT " + json.dumps({"epochs": epochs, "total": total, "start": start or end, "end": end}), flush=True)


if __name__ == "__main__":
    main()
