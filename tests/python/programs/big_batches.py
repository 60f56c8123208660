"""Batches of 1 MiB from 2 workers, which torch hands over through /dev/shm. Prints RESULT with
their sum and what /dev/shm holds at the end (tests/python/test_stale_arenas.py runs it with
/dev/shm a 64 MiB tmpfs that is nearly full)."""

import json
import os

import torch
from torch.utils.data import DataLoader, Dataset


class Big(Dataset):
    def __len__(self):
        return 24

    def __getitem__(self, i):
        return torch.full((256, 1024), float(i))


total = 0.0
for b in DataLoader(Big(), batch_size=1, num_workers=2):
    total += float(b.sum())
print("RESULT " + json.dumps({"total": total, "shm": sorted(os.listdir("/dev/shm"))}), flush=True)
