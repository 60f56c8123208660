"""A small, configurable PyTorch training loop for the stallscope Python tests.

Knows nothing about stallscope unless --record is given (then it uses stallscope.record()).
Prints one line `RESULT {json}` with what the loop saw, so a test can check that results are the
same with and without stallscope. Keep every DataLoader(...) call on its own line: tests compare
created_at with the line numbers printed in RESULT.
"""
import argparse
import json
import os
import signal
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info


class MapDS(Dataset):
    def __init__(self, n, fail_at=-1, sleep_s=0.0):
        self.n, self.fail_at, self.sleep_s = n, fail_at, sleep_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            raise ValueError(f"sample {i} is broken")
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return torch.full((3,), float(i))


class IterDS(IterableDataset):
    """Yields 0..n-1, sharded over workers by get_worker_info (worker k takes k, k+W, ...)."""

    def __init__(self, n, sleep_s=0.0):
        self.n, self.sleep_s = n, sleep_s

    def __iter__(self):
        wi = get_worker_info()
        lo, step = (0, 1) if wi is None else (wi.id, wi.num_workers)
        for i in range(lo, self.n, step):
            if self.sleep_s:
                time.sleep(self.sleep_s)
            yield torch.full((3,), float(i))


def pretend_accelerator():
    """Makes torch believe an accelerator exists so that the pin-memory thread starts on a CPU-only
    machine; pinning itself becomes a short sleep (a simulation: real pinning needs a GPU)."""
    import torch.utils.data._utils.pin_memory as pm

    torch.accelerator.is_available = lambda: True
    torch.accelerator.current_accelerator = lambda: None
    torch.accelerator.current_device_index = lambda: 0
    torch.accelerator.set_device_index = lambda i: None

    def fake_pin(data, device=None):
        time.sleep(0.002)
        return data

    pm.pin_memory = fake_pin


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--start-method", default=None)
    ap.add_argument("--kind", choices=["map", "iterable"], default="map")
    ap.add_argument("--samples", type=int, default=24)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--persistent", action="store_true")
    ap.add_argument("--pin", action="store_true")
    ap.add_argument("--pretend-accelerator", action="store_true")
    ap.add_argument("--unordered", action="store_true")
    ap.add_argument("--break-after", type=int, default=-1, help="leave epoch 0 after this many batches")
    ap.add_argument("--two-loaders", action="store_true")
    ap.add_argument("--fail-at", type=int, default=-1, help="dataset index that raises ValueError")
    ap.add_argument("--exit-code", type=int, default=None, help="sys.exit(N) after the first epoch")
    ap.add_argument("--kill-worker", action="store_true", help="SIGKILL worker 0 after the first batch")
    ap.add_argument("--delete-internal", default=None,
                    help="delete this attribute of _MultiProcessingDataLoaderIter before iterating")
    ap.add_argument("--wrap-worker-loop", action="store_true",
                    help="replace torch's worker loop by a (*args) wrapper, as another tool might")
    ap.add_argument("--reraise-as", action="store_true",
                    help="catch the loop's exception and raise RuntimeError from it (a chained traceback)")
    ap.add_argument("--record", default=None, help="record with stallscope.record(PATH)")
    ap.add_argument("--sleep-ms", type=float, default=0.0, help="per-sample sleep in the dataset")
    a = ap.parse_args()

    if a.pretend_accelerator:
        pretend_accelerator()
    if a.delete_internal:
        from torch.utils.data import dataloader as dlmod

        delattr(dlmod._MultiProcessingDataLoaderIter, a.delete_internal)
    if a.wrap_worker_loop:
        from torch.utils.data._utils import worker

        orig_loop = worker._worker_loop

        def other_tools_worker_loop(*args):
            return orig_loop(*args)

        worker._worker_loop = other_tools_worker_loop

    sleep_s = a.sleep_ms / 1000.0
    ds = MapDS(a.samples, a.fail_at, sleep_s) if a.kind == "map" else IterDS(a.samples, sleep_s)
    kw = {"batch_size": a.batch_size, "num_workers": a.workers, "pin_memory": a.pin}
    if a.workers:
        kw.update(multiprocessing_context=a.start_method, persistent_workers=a.persistent,
                  in_order=not a.unordered)
    lines = {}
    lines["loader0"] = sys._getframe().f_lineno + 1
    loader = DataLoader(ds, **kw)
    loaders = [loader]
    if a.two_loaders:
        lines["loader1"] = sys._getframe().f_lineno + 1
        loader2 = DataLoader(MapDS(8), batch_size=2)
        loaders.append(loader2)

    def run():
        epochs = []
        for ep in range(a.epochs):
            for li, ld in enumerate(loaders):
                firsts = []
                it = iter(ld)
                for i, b in enumerate(it):
                    firsts.append(int(b[0, 0]))
                    if a.kill_worker and ep == 0 and i == 0:
                        os.kill(it._workers[0].pid, signal.SIGKILL)
                        time.sleep(0.5)
                    if ep == 0 and i + 1 == a.break_after:
                        break
                epochs.append({"loader": li, "epoch": ep, "batches": len(firsts), "firsts": firsts})
            if a.exit_code is not None:
                print("RESULT " + json.dumps({"epochs": epochs, "lines": lines}), flush=True)
                sys.exit(a.exit_code)
        return epochs

    if a.record:
        import stallscope

        with stallscope.record(a.record):
            epochs = run()
    elif a.reraise_as:
        try:
            epochs = run()
        except ValueError as e:
            raise RuntimeError("training failed") from e
    else:
        epochs = run()
    print("RESULT " + json.dumps({"epochs": epochs, "lines": lines}), flush=True)


if __name__ == "__main__":
    main()
