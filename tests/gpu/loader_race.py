"""GPU check of the reference loader's device path: no batch is corrupted by memory reuse while the
GPU still reads it. For a machine with an NVIDIA GPU and a CUDA build of PyTorch:

    python3 tests/gpu/loader_race.py [--build BUILD]      (tests/gpu/run.sh runs it)

Two races can corrupt a batch copied to the GPU on a side stream:
  - device side: the training loop drops batch k while kernels queued on its stream still read it;
    PyTorch's caching allocator then hands that memory to the loader's next allocation on the
    loader's stream, whose copy overwrites it (the race SPDL documents). ReferenceLoader prevents
    it with record_stream on the consumer's stream;
  - host side: the page-locked slot goes back to the pool while the DMA still reads it, and a worker
    thread writes the next batch into it. The loader's copy watcher holds the slot until the copy's
    event completed.

The consumer here makes both likely: each step queues a ~2 ms sleep kernel and then reads the batch
(a checksum on the GPU, no host sync), so the host runs many batches ahead of the GPU; and before
each next() it queues a sleep on the loader's own stream, so copies wait there. Checksums are
compared at the end with those of the same batches computed on the CPU (the order is the same
for the same seed). Three runs:
  safe                                      every checksum must match (else exit 1);
  STALLSCOPE_LOADER_UNSAFE_NO_RECORD_STREAM the loader skips record_stream: must show corruption;
  STALLSCOPE_LOADER_UNSAFE_EARLY_RELEASE    the loader releases host slots at once: must show it.
The unsafe runs prove the check can see the races; if one shows none, the check is inconclusive on
this machine (exit 2), unless --lenient.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load(build: Path):
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = build / "lib" / ("_stallscope_loader" + suffix)
        if path.exists():
            spec = importlib.util.spec_from_file_location("_stallscope_loader", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            sys.modules["_stallscope_loader"] = mod
            break
    sys.path.insert(0, str(ROOT / "python"))
    import stallscope

    return stallscope


def run(ss, torch, x, y, variant: str, sleep_cycles: int) -> tuple[int, int]:
    """(batches, corrupted batches) of one epoch under `variant`."""
    for k in ("STALLSCOPE_LOADER_UNSAFE_NO_RECORD_STREAM", "STALLSCOPE_LOADER_UNSAFE_EARLY_RELEASE"):
        os.environ.pop(k, None)
    if variant != "safe":
        os.environ[variant] = "1"
    kw = {"batch_size": 16, "shuffle": True, "seed": 7, "threads": 4, "prefetch": 8}
    cpu = ss.ReferenceLoader.from_tensors(x, y, **kw)
    want = [int(xb.sum(dtype=torch.int64)) * 1000003 + int(yb.sum()) for xb, yb in cpu]
    gpu = ss.ReferenceLoader.from_tensors(x, y, device="cuda", **kw)
    assert gpu.pin_memory, "page-locked batches expected with a GPU"
    sums = []
    it = iter(gpu)
    while True:
        with torch.cuda.stream(gpu._stream):
            torch.cuda._sleep(sleep_cycles // 4)  # copies wait on the loader's stream
        try:
            xb, yb = next(it)
        except StopIteration:
            break
        torch.cuda._sleep(sleep_cycles)  # the consumer's kernels run late ...
        sums.append(xb.sum(dtype=torch.int64) * 1000003 + yb.sum())  # ... and then read the batch
        del xb, yb  # freed while those kernels are still queued
    torch.cuda.synchronize()
    got = [int(s) for s in sums]
    assert len(got) == len(want)
    return len(got), sum(1 for a, b in zip(got, want, strict=True) if a != b)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", type=Path, default=Path(os.environ.get("STALLSCOPE_BUILD", ROOT / "build")))
    ap.add_argument("--lenient", action="store_true", help="do not fail when an unsafe run shows no corruption")
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("loader_race: no GPU; nothing to check")
        return 0
    ss = load(args.build)
    g = torch.Generator().manual_seed(0)
    n = 1024
    x = torch.randint(0, 255, (n, 64, 1024), dtype=torch.uint8, generator=g)  # 64 kB a sample
    y = torch.arange(n, dtype=torch.int64)
    status = 0
    batches, bad = run(ss, torch, x, y, "safe", 3_000_000)
    print(f"loader_race: safe: {bad} of {batches} batches corrupted")
    if bad:
        status = 1
    for variant in ("STALLSCOPE_LOADER_UNSAFE_NO_RECORD_STREAM", "STALLSCOPE_LOADER_UNSAFE_EARLY_RELEASE"):
        shown = 0
        for cycles in (3_000_000, 12_000_000, 48_000_000):
            batches, shown = run(ss, torch, x, y, variant, cycles)
            if shown:
                break
        print(f"loader_race: {variant}=1: {shown} of {batches} batches corrupted "
              f"({'the check sees this race' if shown else 'NOT SEEN: inconclusive'})")
        if not shown and not args.lenient and status == 0:
            status = 2
    print("loader_race: " + {0: "ok", 1: "FAILED: the safe loader corrupted batches", 2: "inconclusive"}[status])
    return status


if __name__ == "__main__":
    sys.exit(main())
