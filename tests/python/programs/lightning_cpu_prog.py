"""A PyTorch Lightning run whose loading and training share the cores, for the advice test of
tests/python/test_train_loops.py: the training set's __getitem__ computes (a few small matrix
products per sample, as a decode or an augmentation would), the step is an MLP on torch's default
intra-op threads, and a validation loader runs each epoch (the sanity check on). The DataLoaders
are written with num_workers=0; `stallscope run --loader-args` changes them. Prints
`RESULT {json}`: Lightning's global_step, and the samples and seconds its fit loop trained for by
a callback's clock (on_train_start -> on_train_end).

Usage: lightning_cpu_prog.py [--epochs N] [--batches N] [--work N]
"""
import argparse
import json

import pytorch_lightning as pl
import torch
from lightning_prog import Clock  # the fit loop's own clock (on_train_start -> on_train_end)
from torch.utils.data import DataLoader, Dataset

BATCH = 32
DIM = 256


class TrainSet(Dataset):
    def __init__(self, n, work):
        self.n = n
        self.work = work
        self.m = torch.randn(64, 64) * 0.1

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        a = torch.randn(64, 64, generator=g)
        for _ in range(self.work):  # the sample's CPU: products of small matrices, one thread
            a = torch.tanh(a @ self.m)
        return a.flatten()[:DIM].clone(), i % 10


class ValSet(Dataset):
    def __len__(self):
        return 4 * BATCH

    def __getitem__(self, i):
        return torch.full((DIM,), float(i % 5) / 5), i % 10


class Model(pl.LightningModule):
    def __init__(self, n, work):
        super().__init__()
        self.n, self.work = n, work
        self.net = torch.nn.Sequential(torch.nn.Linear(DIM, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                       torch.nn.ReLU(), torch.nn.Linear(1024, 10))

    def training_step(self, batch, i):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def validation_step(self, batch, i):
        x, y = batch
        self.log("val_loss", torch.nn.functional.cross_entropy(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def train_dataloader(self):
        return DataLoader(TrainSet(self.n, self.work), batch_size=BATCH, shuffle=True, num_workers=0)

    def val_dataloader(self):
        return DataLoader(ValSet(), batch_size=BATCH, num_workers=0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batches", type=int, default=40, help="training batches per epoch")
    ap.add_argument("--work", type=int, default=12, help="matrix products per sample")
    a = ap.parse_args()
    torch.manual_seed(0)
    clock = Clock()
    trainer = pl.Trainer(max_epochs=a.epochs, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, callbacks=[clock])
    trainer.fit(Model(a.batches * BATCH, a.work))
    samples = trainer.global_step * BATCH
    print("RESULT " + json.dumps({
        "global_step": trainer.global_step, "batch_size": BATCH, "train_s": clock.t1 - clock.t0,
        "train_samples": samples, "samples_per_s": samples / (clock.t1 - clock.t0),
    }), flush=True)


if __name__ == "__main__":
    main()
