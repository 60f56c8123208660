"""A data-parallel training job for the multi-rank tests, started by torchrun: gloo on the CPU,
DistributedDataParallel over a small model, a DistributedSampler, a DataLoader with one worker, and
rank 1's input pipeline deliberately slower than the others' (its __getitem__ sleeps longer). An
explicit all_reduce of the loss ends each epoch. Rank 0 prints CHECKSUM, the sum of the absolute
values of the trained parameters, to compare runs with and without stallscope.

--free-check: at the end each rank drops its DDP module and prints FREED True if it was freed.
--slow-rank N: the rank with the slower pipeline (default 1; the others' __getitem__ sleeps 1 ms).

  torchrun --standalone --nproc_per_node 2 ddp_prog.py [--epochs N] [--samples N] [--slow-rank N]
                                                     [--user-hook] [--late-builtin] [--free-check]
"""
import argparse
import faulthandler
import gc
import time
import weakref

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Slow(Dataset):
    def __init__(self, n, sleep_s):
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(n, 32, generator=g)
        self.y = torch.randint(0, 4, (n,), generator=g)
        self.sleep_s = sleep_s

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        time.sleep(self.sleep_s)
        return self.x[i], self.y[i]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--samples", type=int, default=192)
    ap.add_argument("--slow-rank", type=int, default=1, help="the rank whose __getitem__ sleeps 8 ms, not 1")
    ap.add_argument("--user-hook", action="store_true", help="register PyTorch's allreduce_hook")
    ap.add_argument("--late-builtin", action="store_true",
                    help="register DDP's built-in ALLREDUCE hook after the first forward")
    ap.add_argument("--free-check", action="store_true", help="drop the DDP module at the end; print FREED")
    a = ap.parse_args()
    # The job takes seconds; if it ever hangs, say where before the test's 180 s run out.
    faulthandler.dump_traceback_later(120, exit=False)
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)))
    if a.user_hook:
        model.register_comm_hook(None, default_hooks.allreduce_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = Slow(a.samples, 0.008 if rank == a.slow_rank else 0.001)
    sampler = DistributedSampler(data, shuffle=True, seed=3)
    loader = DataLoader(data, batch_size=8, sampler=sampler, num_workers=1)
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        total = torch.zeros(1)
        for x, y in loader:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            if a.late_builtin and not getattr(model, "_late_done", False):
                model._register_builtin_comm_hook(dist.BuiltinCommHookType.ALLREDUCE)
                model._late_done = True
            loss.backward()
            opt.step()
            total += loss.detach()
        dist.all_reduce(total)
    if rank == 0:
        print("CHECKSUM", repr(sum(p.detach().abs().sum().item() for p in model.parameters())), flush=True)
    if a.free_check:
        ref = weakref.ref(model)
        del model, opt
        gc.collect()
        print(f"FREED {ref() is None}", flush=True)  # one write: the ranks share stdout
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
