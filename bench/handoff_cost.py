"""What receiving a batch from a DataLoader worker costs the training thread, by the batch's layout.

A DataLoader with one persistent worker whose samples cost nothing; its queue is filled first
(prefetch_factor=128), then the training thread's CPU time is taken over each of `--calls`
next() calls back to back (and, with --cold, after a 4-ms sleep before each, as a loop that waits).
It prints one table: per layout (tensors per batch, MB per batch), the training thread's CPU per
received batch, the lowest of `--runs` runs; and the put: the worker's CPU per batch it made
(/proc/PID/schedstat over the filling of the queue) less the same batches' fetch and collate
without workers. The what-if model's estimates for a recording without workers are compared
against these figures (docs/decisions.md, "Handing a batch over, priced by its layout").

    python3 bench/handoff_cost.py [--runs 2] [--calls 100] [--cold] [--strategy file_system]
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from torch.utils.data import DataLoader, Dataset

# (tensors per sample, floats per tensor, batch size)
LAYOUTS = [(1, 8, 4), (1, 8192, 32), (2, 256, 32), (4, 8, 4), (8, 256, 32), (32, 16, 4), (1, 3 * 224 * 224, 32)]


class Zeros(Dataset):
    def __init__(self, n, k, numel):
        self.n, self.k, self.numel = n, k, numel

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return tuple(torch.zeros(self.numel) for _ in range(self.k))


def _on_cpu_ns(pid):
    """The process's main thread's time on a CPU so far (/proc/PID/schedstat, nanoseconds)."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def receive_ms(k, numel, bs, calls, cold):
    """The training thread's mean CPU per next(), in ms, over `calls` batches taken from a full
    queue, and the worker's CPU per batch it made (fetch, collate into shared memory, put)."""
    n = calls + 4
    loader = DataLoader(Zeros(n * bs, k, numel), batch_size=bs, num_workers=1, persistent_workers=True,
                        prefetch_factor=128)
    it = iter(loader)
    next(it)
    pid = it._workers[0].pid
    w0 = last = _on_cpu_ns(pid)
    # The worker fills the queue (every batch was sent at iter(): prefetch_factor is above their
    # count): done when its CPU time stops growing.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = _on_cpu_ns(pid)
        if now - last < 1_000_000:
            break
        last = now
    made = last - w0
    cpu = 0.0
    for _ in range(calls):
        if cold:
            time.sleep(0.004)
        t0 = time.thread_time()
        next(it)
        cpu += time.thread_time() - t0
    del it
    return cpu / calls * 1e3, made / (n - 1) / 1e6


def in_process_ms(k, numel, bs, calls):
    """The training thread's mean CPU per next() for the same batches without workers."""
    it = iter(DataLoader(Zeros((calls + 1) * bs, k, numel), batch_size=bs, num_workers=0))
    next(it)
    t0 = time.thread_time()
    for _ in range(calls):
        next(it)
    return (time.thread_time() - t0) / calls * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2, help="runs per layout; the lowest is shown")
    ap.add_argument("--calls", type=int, default=100, help="next() calls timed per run")
    ap.add_argument("--cold", action="store_true", help="sleep 4 ms before each next() (a loop that waits)")
    ap.add_argument("--strategy", choices=sorted(torch.multiprocessing.get_all_sharing_strategies()), default=None,
                    help="torch.multiprocessing sharing strategy (default: torch's)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.strategy:
        torch.multiprocessing.set_sharing_strategy(a.strategy)
    print(f"Receiving a batch from a worker: training thread CPU per next(), lowest of {a.runs} runs of {a.calls} "
          f"calls{' after a 4-ms sleep each' if a.cold else ' back to back'}; torch {torch.__version__}, "
          f"{os.cpu_count()} CPUs, sharing strategy {torch.multiprocessing.get_sharing_strategy()}")
    print("Put: the worker's CPU per batch (fetch, collate into shared memory, put) less the same batch's "
          "fetch and collate without workers.")
    print("| batch | tensors | MB | receive, ms of CPU | all runs | worker per batch | without workers | put |")
    print("|---|---|---|---|---|---|---|---|")
    for k, numel, bs in LAYOUTS:
        runs = [receive_ms(k, numel, bs, a.calls, a.cold) for _ in range(a.runs)]
        recv = [r for r, _ in runs]
        made = min(m for _, m in runs)
        alone = min(in_process_ms(k, numel, bs, a.calls) for _ in range(a.runs))
        shape = f"{bs} x {numel:,} floats" + (f", {k} times" if k > 1 else "")
        print(f"| {shape} | {k} | {k * bs * numel * 4 / 1e6:.2f} | {min(recv):.2f} | "
              f"{', '.join(f'{x:.2f}' for x in recv)} | {made:.2f} | {alone:.2f} | {made - alone:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
