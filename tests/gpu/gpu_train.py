"""A small GPU training loop in three variants for the GPU checks (tests/gpu/run.sh).

--variant pageable:  data-bound, pin_memory=False: batches are copied from pageable memory
--variant pinned:    data-bound, pin_memory=True and non_blocking copies
--variant compute:   compute-bound: data ready in advance, a large model
--variant profiler:  as pinned, with torch.profiler (CPU + CUDA) over batches 30-39; prints how
                     many GPU events the profiler saw ("profiler gpu events: N")
Each batch's work is an NVTX range "train_step" (torch.cuda.nvtx), which the checks count.
"""
import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Images(Dataset):
    def __init__(self, n, sleep_s):
        self.n = n
        self.sleep_s = sleep_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return torch.full((3, 64, 64), float(i % 7)), i % 10


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", choices=["pageable", "pinned", "compute", "profiler"], required=True)
    ap.add_argument("--batches", type=int, default=60)
    args = ap.parse_args()
    dev = torch.device("cuda")
    bs = 64
    if args.variant == "compute":
        loader = DataLoader(Images(bs * args.batches, 0), batch_size=bs, num_workers=2, pin_memory=True)
        width = 4096
    else:
        loader = DataLoader(Images(bs * args.batches, 0.002), batch_size=bs, num_workers=2,
                            pin_memory=args.variant != "pageable")
        width = 256
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 64 * 64, width), torch.nn.ReLU(),
                                *[m for _ in range(4 if args.variant == "compute" else 0)
                                  for m in (torch.nn.Linear(width, width), torch.nn.ReLU())],
                                torch.nn.Linear(width, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    prof = None
    for i, (x, y) in enumerate(loader):
        if args.variant == "profiler" and i == 30:
            from torch.profiler import ProfilerActivity, profile
            prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
            prof.__enter__()
        if prof is not None and i == 40:
            torch.cuda.synchronize()
            prof.__exit__(None, None, None)
            from torch.autograd import DeviceType
            print("profiler gpu events:", sum(1 for e in prof.events() if e.device_type == DeviceType.CUDA))
        torch.cuda.nvtx.range_push("train_step")
        x = x.to(dev, non_blocking=args.variant != "pageable")
        y = y.to(dev, non_blocking=args.variant != "pageable")
        for _ in range(20 if args.variant == "compute" else 1):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    print("gpu_train: done", args.variant)


if __name__ == "__main__":
    main()
