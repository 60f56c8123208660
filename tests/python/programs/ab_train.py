"""A small image-classification training script for the `--loader` A/B tests: it knows nothing
about stallscope. Its images and labels are made in memory from a seed, and its DataLoader is
whatever the command line picks (a TensorDataset by default, the usual way to train from arrays
held in memory; or a NumPy array or memmap of rows, or an ImageFolder of JPEGs).

Per epoch it prints and keeps its own checksums of what the loader gave it: the labels as a
sorted multiset (a hash and a histogram), the sum of every pixel, the number of samples and
batches; and the structure of the first batch (types, shapes, dtypes, value ranges). One line
`RESULT {json}` at the end.
"""
import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def describe(batch):
    """The structure of a batch: type, and per tensor its shape, dtype, min and max."""
    if torch.is_tensor(batch):
        return {"type": "Tensor", "shape": list(batch.shape), "dtype": str(batch.dtype),
                "min": float(batch.min()), "max": float(batch.max()), "device": batch.device.type}
    if isinstance(batch, (list, tuple)):
        return {"type": type(batch).__name__, "items": [describe(b) for b in batch]}
    return {"type": type(batch).__name__}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", choices=["tensors", "ndarray", "memmap", "imagefolder"], default="tensors")
    ap.add_argument("--root", default=None, help="ImageFolder root (--dataset imagefolder)")
    ap.add_argument("--samples", type=int, default=20000)
    ap.add_argument("--channels", type=int, default=1)
    ap.add_argument("--size", type=int, default=8, help="images are channels x size x size (8x8: like the digits set)")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--no-shuffle", action="store_true")
    ap.add_argument("--drop-last", action="store_true")
    ap.add_argument("--memmap-dir", default=None)
    ap.add_argument("--raise-at", type=int, default=-1, help="raise ValueError at this step")
    ap.add_argument("--jitter", action="store_true", help="ImageFolder: add a ColorJitter to the transform")
    a = ap.parse_args()

    # A model this small gains nothing from intra-op threads, and on a busy 2-core machine their
    # spinning makes every step's time a lottery.
    torch.set_num_threads(1)
    torch.manual_seed(0)
    g = np.random.default_rng(0)
    classes = 10
    if a.dataset == "imagefolder":
        from torchvision import datasets, transforms

        tf = [transforms.RandomResizedCrop(a.size), transforms.RandomHorizontalFlip()]
        if a.jitter:
            tf.append(transforms.ColorJitter(brightness=0.2))
        tf += [transforms.ToTensor(), transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]
        tf = transforms.Compose(tf)
        ds = datasets.ImageFolder(a.root, tf)
        all_labels = np.array(ds.targets)
        classes = len(ds.classes)
        features = 3 * a.size * a.size
    else:
        images = g.integers(0, 256, (a.samples, a.channels, a.size, a.size), dtype=np.uint8)
        labels = g.integers(0, classes, a.samples).astype(np.int64)
        all_labels = labels
        features = images[0].size
        if a.dataset == "tensors":
            ds = TensorDataset(torch.from_numpy(images), torch.from_numpy(labels))
        else:
            # One array of rows: the label in the first byte after the pixels.
            rows = np.concatenate([images.reshape(a.samples, -1), labels.astype(np.uint8)[:, None]], axis=1)
            if a.dataset == "memmap":
                path = os.path.join(a.memmap_dir, "rows.npy")
                np.save(path, rows)
                rows = np.load(path, mmap_mode="r")
            ds = rows
    loader = DataLoader(ds, batch_size=a.batch_size, shuffle=not a.no_shuffle, num_workers=a.workers,
                        drop_last=a.drop_last)

    model = nn.Sequential(nn.Flatten(), nn.Linear(features, a.hidden), nn.ReLU(), nn.Linear(a.hidden, classes))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    epochs = []
    first = None
    step = 0
    t0 = time.perf_counter()
    for epoch in range(a.epochs):
        seen = []
        pixels = 0
        batches = 0
        for batch in loader:
            if first is None:
                first = describe(batch)
            if a.dataset in ("ndarray", "memmap"):
                x, y = batch[:, :-1].float(), batch[:, -1].long()
                pixels += int(batch[:, :-1].sum(dtype=torch.int64))
            else:
                x, y = batch
                pixels += int(x.sum(dtype=torch.int64)) if x.dtype == torch.uint8 else 0
                x = x.float()
            if step == a.raise_at:
                raise ValueError(f"step {step} is broken")
            loss = nn.functional.cross_entropy(model(x / 255.0), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen.append(y)
            batches += 1
            step += 1
        y_all = torch.cat(seen).numpy()
        epochs.append({
            "samples": int(y_all.size),
            "batches": batches,
            "labels_sha": hashlib.sha256(np.sort(y_all).tobytes()).hexdigest(),
            "labels_hist": np.bincount(y_all, minlength=classes).tolist(),
            "pixels": pixels,
        })
        print(f"epoch {epoch}: {batches} batches, {y_all.size} samples", flush=True)
    wall = time.perf_counter() - t0
    all_sorted = hashlib.sha256(np.sort(all_labels.astype(np.int64)).tobytes()).hexdigest()
    print("RESULT " + json.dumps({
        "epochs": epochs, "first": first, "len": len(loader), "loader_type": type(loader).__name__,
        "dataset_labels_sha": all_sorted, "wall_s": wall, "rng_after": torch.rand(1).item(),
    }), flush=True)


if __name__ == "__main__":
    sys.exit(main())
