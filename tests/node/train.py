"""A small real training loop for the bare-node test (tests/node/run.sh): an MLP on synthetic
tensors through a DataLoader with worker processes, whose per-sample work makes the loop wait on
its input. Prints each epoch's loss (bit-for-bit the same with or without stallscope) and, with
--maps FILE, the paths of the shared objects of stallscope mapped into this process.
    python train.py [--epochs N] [--workers N] [--maps FILE] [--sleep-ms MS] [--tensors]
--tensors: a TensorDataset instead (what `--loader reference` reads natively).
"""

import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset


class Slow(Dataset):
    def __init__(self, n, sleep_ms):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 32, generator=g)
        self.y = (self.x.sum(dim=1) > 0).long()
        self.sleep_s = sleep_ms / 1000

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        time.sleep(self.sleep_s)
        return self.x[i], self.y[i]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--sleep-ms", type=float, default=1.0)
    p.add_argument("--maps", default="")
    p.add_argument("--tensors", action="store_true")
    a = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = Slow(512, a.sleep_ms)
    if a.tensors:
        data = TensorDataset(data.x, data.y)
    dl = DataLoader(data, batch_size=32, num_workers=a.workers, shuffle=False)
    for epoch in range(a.epochs):
        total = 0.0
        for x, y in dl:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            total += loss.item()
        print(f"epoch {epoch} loss {total:.6f}", flush=True)
    if a.maps:
        with open("/proc/self/maps") as f, open(a.maps, "w") as out:
            fields = [line.split() for line in f]
            paths = sorted({x[5] for x in fields if len(x) == 6 and "stallscope" in x[5] and ".so" in x[5]})
            out.write("\n".join(paths) + "\n")


if __name__ == "__main__":
    main()
