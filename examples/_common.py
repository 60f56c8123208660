"""Shared parts of the example training scripts: command-line flags, a tiny model, a training step
of known duration, and the loop that measures what stallscope should report.

Every example prints, at the end, the stall fraction it expects by construction and the one it
measured itself (time spent waiting in the DataLoader's next() over the whole loop), so the
numbers of `stallscope report` can be checked against ground truth.
"""

import argparse
import os
import time

import torch
from torch import nn

FEATURES = 16


def add_args(ap: argparse.ArgumentParser, *, epochs, batches, workers, sleep_ms, step_ms, batch_size=8):
    ap.add_argument("--epochs", type=int, default=epochs, help=f"epochs (default {epochs})")
    ap.add_argument("--batches", type=int, default=batches, help=f"batches per epoch (default {batches})")
    ap.add_argument("--batch-size", type=int, default=batch_size, help=f"samples per batch (default {batch_size})")
    ap.add_argument("--workers", type=int, default=workers, help=f"DataLoader num_workers (default {workers})")
    ap.add_argument("--sleep-ms", type=float, default=sleep_ms,
                    help=f"per-sample cost of the dataset in ms (default {sleep_ms})")
    ap.add_argument("--step-ms", type=float, default=step_ms,
                    help=f"duration of one training step in ms (default {step_ms})")
    ap.add_argument("--step-kind", choices=["sleep", "cpu"], default="sleep",
                    help="how a step spends its time: 'sleep' (the host idles, as while a GPU computes; "
                         "default) or 'cpu' (burns a core, as a CPU training step does)")
    ap.add_argument("--start-method", choices=["fork", "spawn", "forkserver"], default=None,
                    help="worker start method (default: the platform's)")
    ap.add_argument("--prefetch-factor", type=int, default=None,
                    help="DataLoader prefetch_factor with workers (default: torch's, 2)")
    if not any(a.dest == "persistent" for a in ap._actions):
        ap.add_argument("--persistent", action="store_true", help="persistent_workers=True")
    return ap


def loader_kwargs(args, **extra):
    kw = {"batch_size": args.batch_size, "num_workers": args.workers}
    if args.workers > 0:
        kw["multiprocessing_context"] = args.start_method
        kw["persistent_workers"] = bool(args.persistent)
        if args.prefetch_factor:
            kw["prefetch_factor"] = args.prefetch_factor
    kw.update(extra)
    if args.workers == 0:
        kw.pop("persistent_workers", None)
    return kw


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def burn_cpu(ms: float) -> None:
    """Spends `ms` milliseconds of this thread's CPU time (a CPU-heavy transform, or a step on the
    CPU). By the thread's CPU clock, not the wall clock: a thread preempted for a core's share gets
    no work done while it waits, as a real decode or augmentation would not."""
    end = time.thread_time() + ms / 1000.0
    x = 0
    while time.thread_time() < end:
        x += 1


def sample(i: int):
    """A deterministic sample: features and a label."""
    g = torch.Generator().manual_seed(i)
    return torch.randn(FEATURES, generator=g), i % 4


class TinyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)


class Trainer:
    """One training step = forward/backward/update of a tiny model, then padded to exactly
    `step_ms` (by burning CPU, as a CPU training step would, or by sleeping, as the host does while
    a GPU computes). The model's own work is well under a millisecond, so the step lasts step_ms."""

    def __init__(self, step_ms: float, step_kind: str = "sleep"):
        # One intra-op thread: the model is tiny, and torch's thread pool spinning on a busy
        # 2-core machine turned a 0.2 ms step into 70 ms. The step's time must be step_ms.
        torch.set_num_threads(1)
        torch.manual_seed(0)
        self.model = TinyModel()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.loss = nn.CrossEntropyLoss()
        self.step_ms = step_ms
        self.step_kind = step_kind
        # Warm up outside the timed loop: the first backward pass initialises autograd's engine
        # (tens of ms) and would make the first step longer than step_ms.
        x = torch.randn(2, FEATURES)
        self.loss(self.model(x), torch.zeros(2, dtype=torch.long)).backward()
        self.opt.zero_grad()

    def step(self, batch):
        t0 = time.perf_counter()
        x, y = batch
        self.opt.zero_grad()
        loss = self.loss(self.model(x), y)
        loss.backward()
        self.opt.step()
        left = self.step_ms - (time.perf_counter() - t0) * 1000.0
        if left > 0:
            (burn_cpu if self.step_kind == "cpu" else lambda ms: time.sleep(ms / 1000.0))(left)
        return float(loss.detach())


class Stats:
    """What the loop measured itself: the ground truth to compare stallscope's report with."""

    def __init__(self):
        self.wait = 0.0  # seconds in next() (includes worker start-up and the final StopIteration)
        self.first_wait = 0.0  # of which: waiting for each epoch's first batch
        self.end_wait = 0.0  # of which: the next() that ends each epoch (StopIteration, worker shutdown)
        self.busy = 0.0  # seconds in training steps
        self.iter = 0.0  # seconds in iter() (non-persistent workers start there): inside the training
        #                  window (first iter() to the end) and waiting for input, but not in next()
        self.batches = 0
        self.samples = 0


def train(loader, trainer: Trainer, epochs: int) -> Stats:
    st = Stats()
    for _epoch in range(epochs):
        t_iter = time.perf_counter()
        it = iter(loader)  # non-persistent workers start here
        t = time.perf_counter()
        st.iter += t - t_iter
        first = True
        while True:
            try:
                batch = next(it)
            except StopIteration:
                st.wait += time.perf_counter() - t
                st.end_wait += time.perf_counter() - t
                break
            t1 = time.perf_counter()
            st.wait += t1 - t
            if first:
                st.first_wait += t1 - t
                first = False
            trainer.step(batch)
            st.samples += len(batch[1])
            # Freed here, in the step's time: at the next `batch = next(it)` the old batch (shared
            # memory from a worker: an munmap) would be freed on this clock but after next() returned.
            del batch
            t = time.perf_counter()
            st.busy += t - t1
            st.batches += 1
        del it
    return st


def report(name: str, expected: float, st: Stats, note: str = ""):
    # The training window, as stallscope defines it: from the first iter() to the end of the loop;
    # the loop waits for input in next() and in iter().
    total = st.wait + st.busy + st.iter
    edges = st.first_wait + st.end_wait
    steady = total - edges - st.iter
    print(f"{name}: {st.batches} batches, {st.samples} samples in {total:.2f} s "
          f"({st.samples / total if total else 0:.0f} samples/s)")
    measured = (st.wait + st.iter) / total if total else 0.0
    print(f"  data stall fraction: expected {expected:.2f} by construction, measured {measured:.2f}"
          f" (wait in next() {st.wait:.2f} s, steps {st.busy:.2f} s, in iter() {st.iter:.2f} s)")
    print(f"  steady state (without each epoch's first batch and final next()): "
          f"{(st.wait - edges) / steady if steady > 0 else 0:.2f}; epoch edges waited {edges:.2f} s")
    if note:
        print(f"  {note}")
