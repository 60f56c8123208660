"""A soak at a high event rate: epochs of tiny batches from memory (num_workers=0, about 15,000
batches/s here) for SECONDS. Every second it notes its own resident memory and its parent's (the
`stallscope run` launcher, when run under it: memory, descriptors, threads). Prints RESULT with the
batches, each epoch's sum (the same every epoch) and the notes. Usage: soak_train.py SECONDS
[WORKERS] (persistent workers, 0 by default)."""

import json
import os
import sys
import time

import torch
from procstat import figures
from torch.utils.data import DataLoader


def main():
    seconds = float(sys.argv[1])
    data = torch.arange(4 * 2000 * 8, dtype=torch.float32).reshape(-1, 8)
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    loader = DataLoader(data, batch_size=4, num_workers=workers, persistent_workers=workers > 0)
    sums = set()
    batches = 0
    notes = []
    t0 = time.monotonic()
    next_note = t0
    while time.monotonic() - t0 < seconds:
        total = 0.0
        for b in loader:
            total += float(b[0, 0])
            batches += 1
        sums.add(total)
        now = time.monotonic()
        if now >= next_note:
            notes.append({"t": now - t0, "self": figures(os.getpid()), "parent": figures(os.getppid())})
            next_note = now + 1.0
    print("RESULT " + json.dumps({"batches": batches, "sums": sorted(sums), "seconds": time.monotonic() - t0,
                                  "notes": notes}), flush=True)


if __name__ == "__main__":
    main()
