"""What the first step after forking DataLoader workers costs the training process: fork() leaves
its memory shared with the workers, copy-on-write, and the step's first write to each page of the
weights, gradients and optimizer state copies it. A 3-layer MLP of width 2048 with SGD momentum
(about 105 MB of the three) trains 3 epochs of 12 batches with 2 forked workers that are not
persistent, with persistent ones, and with none; the loop times its own steps and counts its minor
page faults (getrusage). Prints a table: per epoch, the first step and its faults, and the median
of the other steps (docs/decisions.md, "The first step after forking workers").

    python3 bench/fork_step_cost.py [--width 2048] [--epochs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
import torch
from torch.utils.data import DataLoader, TensorDataset
width, epochs, workers, persistent = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
torch.manual_seed(0)
layers, d = [], 256
for _ in range(3):
    layers += [torch.nn.Linear(d, width), torch.nn.ReLU()]
    d = width
model = torch.nn.Sequential(*layers, torch.nn.Linear(d, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
ds = TensorDataset(torch.randn(96, 256), torch.randint(0, 10, (96,)))
loader = DataLoader(ds, batch_size=8, num_workers=workers, persistent_workers=persistent and workers > 0)
out = []
for epoch in range(epochs):
    steps = []
    for x, y in loader:
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        steps.append((time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0))
    out.append(steps)
mb = sum(p.numel() for p in model.parameters()) * 4 * 3 / 1e6
print("RESULT " + json.dumps({"steps": out, "mb": mb}), flush=True)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--epochs", type=int, default=3)
    a = ap.parse_args()
    rows = []
    mb = 0.0
    for name, workers, persistent in (("2 workers, not persistent", 2, 0), ("2 workers, persistent", 2, 1),
                                      ("no workers", 0, 0)):
        p = subprocess.run([sys.executable, "-c", CHILD, str(a.width), str(a.epochs), str(workers), str(persistent)],
                           capture_output=True, text=True, timeout=600, env=dict(os.environ))
        line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            print(f"fork_step_cost: the loop failed: {p.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            return 1
        r = json.loads(line[len("RESULT "):])
        mb = r["mb"]
        cells = [f"{e[0][0] * 1e3:.0f} ms, {e[0][1]:,} faults" for e in r["steps"]]
        later = statistics.median(s for e in r["steps"] for s, _ in e[1:])
        rows.append((name, cells, later))
    print(f"The first step of each epoch: an MLP of width {a.width}, {mb:.0f} MB of weights, gradients and "
          f"momentum, batches of 8 (minor page faults of the training process in the step)")
    print("| loader | " + " | ".join(f"epoch {i}" for i in range(a.epochs)) + " | other steps, median |")
    print("|---|" + "---|" * a.epochs + "---|")
    for name, cells, later in rows:
        print(f"| {name} | " + " | ".join(cells) + f" | {later * 1e3:.0f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
