"""A data-parallel job that exits the moment its last gradient reduction completes, started by
torchrun: gloo on the CPU, DistributedDataParallel over eight layers in small buckets, both ranks on
one CPU. After a few steps, a last backward runs with a switch interval of 100 s, so the main
thread keeps the GIL from the moment that backward returns until the interpreter finalizes, and
the process exits with code 0.

gloo's threads take the GIL to free what a reduction leaves behind (Python callbacks on its
futures, PyTorch's own works); one that asks for it once the interpreter is finalizing aborts the
process ("terminate called without an active exception"). Plain PyTorch aborts on this exit most
times; a profiler must not add to that, and stallscope waits for those threads at exit.

  torchrun --standalone --nproc_per_node 2 ddp_exit_prog.py
"""
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset


def main():
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(8)]), bucket_cap_mb=0.25)
    loader = DataLoader(TensorDataset(torch.randn(64, 256)), batch_size=8)
    x = None
    for (x,) in loader:  # stallscope installs its hooks at the first DataLoader iteration
        model(x).sum().backward()
    sys.setswitchinterval(100)
    model(x).sum().backward()
    dist.destroy_process_group()
    return 0  # nothing that lets go of the GIL (a print would) until the interpreter finalizes


if __name__ == "__main__":
    raise SystemExit(main())
