"""A small training loop for the fault tests: a DataLoader with 2 workers over a synthetic dataset,
a tiny model, STEPS steps. After each step it appends "STEP monotonic_ns" to PROGRESS (flushed), so
that a test that kills something knows which steps had finished by then; at the end it prints
RESULT with the loss sum, which a run without stallscope gives too.

    python fault_train.py PROGRESS [STEPS]
"""

import json
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):
    def __len__(self):
        return 100_000

    def __getitem__(self, i):
        x = torch.full((16,), float(i % 97) / 97)
        return x, (x * x).sum()


def main():
    progress = open(sys.argv[1], "a", buffering=1)
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Squares(), batch_size=8, num_workers=2, shuffle=False)
    total = 0.0
    for step, (x, y) in enumerate(loader, 1):
        loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.item()
        time.sleep(0.004)
        progress.write(f"{step} {time.monotonic_ns()}\n")
        if step == steps:
            break
    print("RESULT " + json.dumps({"steps": step, "loss_sum": round(total, 6)}), flush=True)


if __name__ == "__main__":
    main()
