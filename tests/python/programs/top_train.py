"""A training loop for `stallscope top`'s tests and benchmark: a fixed number of steps (argv[1],
default 600) of a seeded linear model on a dataset whose __getitem__ sleeps SLEEP seconds
(argv[3], default 0.01), with argv[2] DataLoader workers (default 2), so that the loop waits for
its input pipeline part of the time and the queue and the workers have something to show.

The result is deterministic (seeded model, data that depends on the index only): it prints
`RESULT {...}` with the steps, the final loss and a checksum of the labels seen, the same with or
without stallscope and whatever watches it; and `RATE x` with its samples per second.
"""

import json
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

BATCH = 4


class Slow(Dataset):
    def __init__(self, sleep):
        self.sleep = sleep

    def __len__(self):
        return 256

    def __getitem__(self, i):
        time.sleep(self.sleep)
        return torch.full((16,), float(i % 7) / 7), i % 3


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 600
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    sleep = float(sys.argv[3]) if len(sys.argv) > 3 else 0.01
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(Slow(sleep), batch_size=BATCH, num_workers=workers, persistent_workers=workers > 0)
    print("training", flush=True)
    done, labels, loss = 0, 0, None
    start = time.monotonic()
    while done < steps:
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            labels += int(y.sum())
            done += 1
            if done == steps:
                break
    rate = steps * BATCH / (time.monotonic() - start)
    print("RESULT " + json.dumps({"steps": done, "loss": round(loss.item(), 6), "labels": labels}))
    print(f"RATE {rate:.3f}")


if __name__ == "__main__":
    main()
