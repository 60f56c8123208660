"""Overhead of stallscope's GPU capture (CUPTI activity + callbacks, NVTX) on a GPU training loop
with a high kernel rate (a small MLP whose input comes from a DataLoader over a tensor in memory,
one next() per step), beside torch.profiler's on the same loop, interleaved in one run. Rows:
plain; stallscope (all GPU capture); stallscope --gpu light (CUDA events at each next(), no
CUPTI); stallscope --gpu off (the host side alone); torch.profiler with CUDA activity only (CUPTI's
own cost, as Kineto uses it); torch.profiler with CPU + CUDA activities. Prints "no GPU" and exits
0 where CUDA is not available.
    python3 bench/gpu_overhead_bench.py [--reps N] [--build DIR]
Goal: stallscope costs under 3 % of throughput with CUPTI on.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from bench_rows import row as bench_row

HERE = os.path.dirname(os.path.abspath(__file__))

TRAIN = r"""
import json, sys, time, torch
prof = sys.argv[1] == "profiler"
dev = torch.device("cuda")
model = torch.nn.Sequential(*[m for _ in range(6) for m in (torch.nn.Linear(256, 256), torch.nn.ReLU())]).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.utils.data.TensorDataset(torch.randn(64 * 64, 256))
loader = torch.utils.data.DataLoader(data, batch_size=64, shuffle=True, drop_last=True)
def batches():
    while True:
        yield from loader
it = batches()
def loop(n):
    for _ in range(n):
        x = next(it)[0].to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()
    torch.cuda.synchronize()
loop(50)
def timed():
    t0 = time.perf_counter(); loop(1500); return 1500 / (time.perf_counter() - t0)
if prof:
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CUDA] if sys.argv[2:] == ["cuda-only"] else [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    with profile(activities=acts):
        rate = timed()
else:
    rate = timed()
print(json.dumps({"steps_per_s": rate}))
"""


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"gpu_overhead_bench: {' '.join(cmd[:4])}... failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return json.loads([line for line in out.stdout.splitlines() if line.startswith("{")][-1])["steps_per_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    args = ap.parse_args()
    try:
        import torch
        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if not has_gpu:
        print("gpu_overhead_bench: no GPU (torch.cuda.is_available() is false): skipped")
        return
    launcher = os.path.join(args.build, "bin", "stallscope")
    tmp = tempfile.mkdtemp(prefix="stallscope-gpu-overhead-")
    script = os.path.join(tmp, "train.py")
    with open(script, "w") as f:
        f.write(TRAIN)
    configs = {
        "plain": [sys.executable, script, "plain"],
        "stallscope": [launcher, "run", "-q", "-o", "DB", "--", sys.executable, script, "plain"],
        "stallscope --gpu light": [launcher, "run", "-q", "--gpu", "light", "-o", "DB", "--",
                                   sys.executable, script, "plain"],
        "stallscope --gpu off": [launcher, "run", "-q", "--gpu", "off", "-o", "DB", "--",
                                 sys.executable, script, "plain"],
        "torch.profiler, CUDA only": [sys.executable, script, "profiler", "cuda-only"],
        "torch.profiler, CPU + CUDA": [sys.executable, script, "profiler"],
    }
    rates = {k: [] for k in configs}
    for rep in range(args.reps):
        for i, (name, cmd) in enumerate(configs.items()):
            rates[name].append(run([os.path.join(tmp, f"{rep}-{i}.db") if a == "DB" else a for a in cmd]))
    med = {k: statistics.median(v) for k, v in rates.items()}
    base = med["plain"]
    print(f"GPU capture overhead: small MLP, {torch.cuda.get_device_name()}, median of {args.reps} interleaved runs")
    print("| configuration | steps/s | cost | goal |")
    print("|---|---|---|---|")
    for k in configs:
        cost = (base - med[k]) / base * 100
        goal = (f"< 3 % ({'met' if cost < 3 else 'MISSED'})" if k == "stallscope" else
                f"< 1 % ({'met' if cost < 1 else 'MISSED'})" if k == "stallscope --gpu light" else "")
        print(f"| {k} | {med[k]:.0f} | {cost:+.1f} % | {goal} |")
    cost = {k: (base - med[k]) / base * 100 for k in configs}
    bench_row(f"GPU capture, small MLP (about {base:.0f} steps/s plain)", f"{cost['stallscope']:+.1f} %", "< 3 %",
              f"torch.profiler CUDA only {cost['torch.profiler, CUDA only']:+.1f} %; "
              f"--gpu off {cost['stallscope --gpu off']:+.1f} %", cost["stallscope"] < 3)
    bench_row(f"GPU light mode, small MLP (about {base:.0f} steps/s plain)", f"{cost['stallscope --gpu light']:+.1f} %",
              "< 1 %", f"full capture {cost['stallscope']:+.1f} %", cost["stallscope --gpu light"] < 1)


if __name__ == "__main__":
    main()
