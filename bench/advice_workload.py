"""One training loop of bench/advice_bench.py: a real PyTorch step (an MLP, forward, backward,
optimizer step) fed by a torch DataLoader whose dataset costs what the flags say per sample:
CPU work (a numpy transform), waiting (sleep, as a slow disk or network), and now and then a slow
batch. It times its own loop, from `for batch in loader` of the first epoch to the end of the
last step, and prints one line: RESULT <samples> <seconds> <samples/s>.

    python bench/advice_workload.py --cpu-ms 2 --workers 0 --epochs 2 --batches 60
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class Synthetic(Dataset):
    def __init__(self, n, cpu_ms, sleep_ms, burst_every, burst_x, dim):
        self.n, self.cpu_ms, self.sleep_s = n, cpu_ms, sleep_ms / 1e3
        self.burst_every, self.burst_x, self.dim = burst_every, burst_x, dim
        self.base = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)

    def __len__(self):
        return self.n

    def _work(self, ms):
        # CPU: repeated small matrix products until `ms` of this thread's CPU time has passed.
        end = time.thread_time() + ms / 1e3
        a = self.base
        while time.thread_time() < end:
            a = np.tanh(a @ self.base * 0.01)
        return a

    def __getitem__(self, i):
        x = 1.0
        if self.burst_every and (i // 32) % self.burst_every == 0:
            x = self.burst_x
        if self.cpu_ms:
            self._work(self.cpu_ms * x)
        if self.sleep_s:
            time.sleep(self.sleep_s * x)
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.dim, generator=g), i % 10


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu-ms", type=float, default=0.0, help="CPU per sample in __getitem__")
    ap.add_argument("--sleep-ms", type=float, default=0.0, help="waiting per sample in __getitem__")
    ap.add_argument("--burst-every", type=int, default=0, help="every k-th group of 32 samples is slow")
    ap.add_argument("--burst-x", type=float, default=1.0, help="how much slower")
    ap.add_argument("--hidden", type=int, default=256, help="MLP width: the step's compute")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--batches", type=int, default=60, help="batches per epoch")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--prefetch", type=int, default=None)
    ap.add_argument("--persistent", type=int, default=0)
    ap.add_argument("--start-method", default=None)
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    a = ap.parse_args()
    torch.manual_seed(0)
    if a.threads:
        torch.set_num_threads(a.threads)
    ds = Synthetic(a.batches * a.batch_size, a.cpu_ms, a.sleep_ms, a.burst_every, a.burst_x, a.dim)
    kw = {"batch_size": a.batch_size, "num_workers": a.workers}
    if a.workers > 0:
        kw["persistent_workers"] = bool(a.persistent)
        if a.prefetch:
            kw["prefetch_factor"] = a.prefetch
        if a.start_method:
            kw["multiprocessing_context"] = a.start_method
    loader = DataLoader(ds, **kw)
    layers, d = [], a.dim
    for _ in range(a.layers):
        layers += [torch.nn.Linear(d, a.hidden), torch.nn.ReLU()]
        d = a.hidden
    model = torch.nn.Sequential(*layers, torch.nn.Linear(d, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    samples = 0
    t0 = time.perf_counter()
    for _ in range(a.epochs):
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            samples += len(y)
    dt = time.perf_counter() - t0
    print(f"RESULT {samples} {dt:.4f} {samples / dt:.2f}", flush=True)


if __name__ == "__main__":
    main()
