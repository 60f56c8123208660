"""Training programs that do unusual things, for test_user_programs.py. Each mode prints what it
saw; a test runs it with and without stallscope and compares. Knows nothing about stallscope.

Modes:
  hang           a worker hangs in __getitem__; the DataLoader's timeout fires
  exit           a worker calls os._exit(7) in __getitem__
  cuda           asks for CUDA where there is none
  pythonpath     imports a module from a PYTHONPATH the user set, prints the path's order
  fork-self      forks itself; parent and child each run a loader with workers
  exec-self      runs a loader, then execs itself into a second stage that runs another
  mp-spawn       a multiprocessing Pool (spawn) whose tasks each run a loader
  mp-forkserver  the same with forkserver
  cupti          calls the CUDA injection entry point, as the driver does when CUDA starts
"""
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class DS(Dataset):
    def __init__(self, n, hang_at=-1, exit_at=-1):
        self.n, self.hang_at, self.exit_at = n, hang_at, exit_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.hang_at:
            time.sleep(600)
        if i == self.exit_at:
            # Not before the main process has taken the batches this worker sent: it fetches their
            # shared memory from this process, and a worker gone by then fails that fetch instead,
            # a different error with or without a profiler.
            time.sleep(1.0)
            os._exit(7)
        return torch.full((2,), float(i))


def loop(n=24, workers=2, **kw):
    total = 0.0
    batches = 0
    for b in DataLoader(DS(n, **kw), batch_size=4, num_workers=workers, **({"timeout": 3} if workers else {})):
        total += float(b.sum())
        batches += 1
    return batches, total


def task(k):
    """One multiprocessing task: a loader without workers (pool processes are daemons)."""
    return loop(8 + 4 * k, workers=0)


def main():
    mode = sys.argv[1]
    if mode == "hang":
        loop(hang_at=9)
    elif mode == "exit":
        loop(exit_at=9)
    elif mode == "cuda":
        print("available", torch.cuda.is_available(), "count", torch.cuda.device_count())
        torch.zeros(2).cuda()
    elif mode == "pythonpath":
        import usermod  # from the user's PYTHONPATH

        user = os.environ["USER_DIRS"].split(":")
        print("usermod", usermod.VALUE, os.path.dirname(usermod.__file__) == user[0])
        print("order", [p for p in sys.path if p in user])
        print("before stdlib", max(sys.path.index(p) for p in user) < sys.path.index(os.path.dirname(os.__file__)))
        print("loop", loop())
    elif mode == "fork-self":
        pid = os.fork()
        if pid == 0:
            print("child", loop(n=16), flush=True)
            os._exit(5)
        _, status = os.waitpid(pid, 0)
        print("child exit", os.waitstatus_to_exitcode(status))
        print("parent", loop(n=20))
        sys.exit(3)
    elif mode == "exec-self":
        print("stage1", loop(n=16), flush=True)
        os.execv(sys.executable, [sys.executable, __file__, "exec-stage2"])
    elif mode == "exec-stage2":
        print("stage2", loop(n=20))
        sys.exit(4)
    elif mode in ("mp-spawn", "mp-forkserver"):
        import multiprocessing as mp

        with mp.get_context(mode[3:]).Pool(2) as pool:
            print("pool", pool.map(task, range(6), chunksize=1))
        p = mp.get_context(mode[3:]).Process(target=os._exit, args=(9,))
        p.start()
        p.join()
        print("process exit", p.exitcode)
    elif mode == "cupti":
        import ctypes

        inject = ctypes.CDLL(None).InitializeInjection if os.environ.get("LD_PRELOAD") else None
        print("loop", loop())
        if inject is not None:
            inject()  # what the driver returns to is not the program's business: nothing printed
        print("loop", loop())
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
