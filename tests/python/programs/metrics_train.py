"""A training loop whose input pipeline is slow by construction, for the metrics endpoint's tests:
each sample's __getitem__ sleeps SLEEP seconds, the step is a tiny linear layer. It runs for about
SECONDS seconds (argv[1], default 8), or until the file argv[3] exists; argv[2] is num_workers
(default 0).

With num_workers=0 each batch takes BATCH x SLEEP in next(): the loop waits for data nearly all
the time (stall fraction close to 1) and hands about 1 / SLEEP samples a second.
"""

import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

SLEEP = 0.02
BATCH = 4


class Slow(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        time.sleep(SLEEP)
        return torch.full((8,), float(i)), i % 2


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 8.0
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    stop = sys.argv[3] if len(sys.argv) > 3 else None
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Slow(), batch_size=BATCH, num_workers=workers)
    end = time.monotonic() + seconds

    def done():
        return time.monotonic() >= end or (stop is not None and os.path.exists(stop))

    print("training", flush=True)
    steps = 0
    while not done():
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
            if done():
                break
    print(f"steps {steps}")


if __name__ == "__main__":
    main()
