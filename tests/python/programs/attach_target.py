"""A training loop started without stallscope, for `stallscope attach` to join while it runs.

It makes a DataLoader, takes the first batch (so the iterator and its workers exist), prints
READY and waits for the --go file; then it trains. Items are known numbers, so the RESULT line
(batches handed, checksum of every sample seen) is the same with or without an attach.

  --epochs 0          train until the --stop file appears (then finish the current epoch)
  --fail-at K         the dataset raises ValueError for item K (in the worker that fetches it)
  --exit-code C       exit with C after the RESULT line
  --slow-child-import S   spawned workers take S seconds to import this module
  --first-epoch-done  the first epoch runs to its end before READY: the loop holds a finished
                      iterator when the attach comes, and starts the next epoch after --go
  --child             after training, start a Python child and report the stallscope variables
                      it sees in its environment
"""

import argparse
import gc
import json
import os
import subprocess
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

# --slow-child-import S: spawned workers take S seconds to import this module, so that an attach
# can find them still starting up.
if __name__ == "__mp_main__" and os.environ.get("ATTACH_TARGET_SLOW_IMPORT"):
    time.sleep(float(os.environ["ATTACH_TARGET_SLOW_IMPORT"]))


class Numbers(Dataset):
    def __init__(self, n, fail_at, sleep_s):
        self.n, self.fail_at, self.sleep_s = n, fail_at, sleep_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            raise ValueError(f"item {i} is broken")
        time.sleep(self.sleep_s)
        return torch.tensor([float(i)])


def wait_for(path):
    while not os.path.exists(path):
        time.sleep(0.01)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--persistent", action="store_true")
    ap.add_argument("--pin", action="store_true")
    ap.add_argument("--start-method", default="fork")
    ap.add_argument("--items", type=int, default=320)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--sleep", type=float, default=0.001)
    ap.add_argument("--step", type=float, default=0.002)
    ap.add_argument("--fail-at", type=int, default=-1)
    ap.add_argument("--exit-code", type=int, default=0)
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--slow-child-import", type=float, default=0)
    ap.add_argument("--first-epoch-done", action="store_true")
    ap.add_argument("--go", required=True)
    ap.add_argument("--stop", default="")
    a = ap.parse_args()

    if a.slow_child_import:
        os.environ["ATTACH_TARGET_SLOW_IMPORT"] = str(a.slow_child_import)
    kw = {}
    if a.workers > 0:
        kw = {"multiprocessing_context": a.start_method, "persistent_workers": a.persistent}
    loader = DataLoader(Numbers(a.items, a.fail_at, a.sleep), batch_size=a.batch, num_workers=a.workers,
                        pin_memory=a.pin, **kw)
    handed = 0
    checksum = 0.0
    epoch = 0
    it = iter(loader)
    first = next(it)
    handed += 1
    checksum += float(first.sum())
    if a.first_epoch_done:
        for x in it:
            handed += 1
            checksum += float(x.sum())
        epoch += 1
    print("READY", flush=True)
    wait_for(a.go)
    if a.first_epoch_done:
        it = iter(loader)
    while True:
        for x in it:
            handed += 1
            checksum += float(x.sum())
            time.sleep(a.step)
        epoch += 1
        if a.epochs > 0 and epoch >= a.epochs:
            break
        if a.epochs == 0 and a.stop and os.path.exists(a.stop):
            break
        it = iter(loader)
    # Workers shut down now rather than at interpreter exit, where persistent spawned workers
    # sometimes leave multiprocessing's resource tracker warning of a leaked semaphore.
    del it, loader
    gc.collect()
    child = None
    if a.child:
        out = subprocess.run([sys.executable, "-c", ("import os, json; print(json.dumps("
                              "[os.environ.get(k) for k in ('STALLSCOPE_SHM', 'STALLSCOPE_LIBRARY')]))")],
                             capture_output=True, text=True)
        child = {"env": json.loads(out.stdout), "stderr": out.stderr}
    print("RESULT " + json.dumps({"handed": handed, "epochs": epoch, "checksum": checksum, "child": child}),
          flush=True)
    sys.exit(a.exit_code)


if __name__ == "__main__":
    main()
