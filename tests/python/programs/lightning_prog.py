"""A tiny PyTorch Lightning run with a training and a validation loader (the sanity check on), for
tests/python/test_train_loops.py. Prints `RESULT {json}`: Lightning's own counts (global_step),
the samples and seconds its fit loop trained for by a callback's clock (on_train_start ->
on_train_end), and the lines of the two DataLoader(...) calls.

Usage: lightning_prog.py [--epochs N] [--workers N]
"""
import argparse
import json
import time

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Dataset

BATCH = 8
STEP_S = 0.004  # each step's own work, so that the run is not all framework overhead


class TrainSet(Dataset):
    def __len__(self):
        return 256

    def __getitem__(self, i):
        return torch.full((4,), float(i % 7)), torch.tensor(float(i % 3))


class ValSet(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.full((4,), float(i % 5)), torch.tensor(float(i % 2))


LINES = {}


class Model(pl.LightningModule):
    def __init__(self, workers):
        super().__init__()
        self.net = torch.nn.Linear(4, 1)
        self.workers = workers

    def training_step(self, batch, i):
        x, y = batch
        time.sleep(STEP_S)
        return torch.nn.functional.mse_loss(self.net(x).squeeze(-1), y)

    def validation_step(self, batch, i):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.net(x).squeeze(-1), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def train_dataloader(self):
        LINES["train"] = _line() + 1
        return DataLoader(TrainSet(), batch_size=BATCH, shuffle=True, num_workers=self.workers)

    def val_dataloader(self):
        LINES["val"] = _line() + 1
        return DataLoader(ValSet(), batch_size=BATCH)


def _line():
    import sys

    return sys._getframe(1).f_lineno


class Clock(pl.Callback):
    def on_train_start(self, trainer, module):
        self.t0 = time.perf_counter()

    def on_train_end(self, trainer, module):
        self.t1 = time.perf_counter()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(1)  # the test machines have few cores
    clock = Clock()
    trainer = pl.Trainer(max_epochs=a.epochs, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, callbacks=[clock])
    trainer.fit(Model(a.workers))
    print("RESULT " + json.dumps({
        "global_step": trainer.global_step, "batch_size": BATCH, "train_s": clock.t1 - clock.t0,
        "train_samples": trainer.global_step * BATCH, "lines": LINES, "version": pl.__version__,
    }), flush=True)


if __name__ == "__main__":
    main()
