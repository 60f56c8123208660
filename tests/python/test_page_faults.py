"""Page faults in the training step: a real loop whose step frees and re-allocates blocks larger
than glibc's malloc keeps (its mmap threshold is at most 32 MiB), so every step maps them afresh
and faults in every page, zero-filled, in the kernel. The recording must show the faults and the
kernel's CPU, the report must advise keeping the memory in the process (allocator_page_faults),
and following that advice (tcmalloc preloaded) must take the faults and the kernel's share away.
The speed that buys is measured by bench/advice_bench.py, not here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import LAUNCHER, base_env, run_recorded

pytestmark = [pytest.mark.torch, pytest.mark.timed]  # every test here measures time (conftest.py)

TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"

# One wide layer: its 64 MiB weight gradient is freed by zero_grad() (set_to_none) and allocated
# again by the next backward, every step. argv[1]: num_workers.
PROG = """
import json, sys, time
import torch
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 32768), torch.nn.ReLU(), torch.nn.Linear(32768, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
ds = TensorDataset(torch.randn(8 * 80, 512), torch.randint(0, 10, (8 * 80,)))
loader = DataLoader(ds, batch_size=8, num_workers=int(sys.argv[1]))
losses = []
t0 = time.perf_counter()
for x, y in loader:
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    losses.append(round(loss.item(), 6))
print("RESULT " + json.dumps({"losses": losses, "s": time.perf_counter() - t0}), flush=True)
"""


def recorded(tmp_path, name, workers=0, preload=None):
    prog = tmp_path / "wide_step.py"
    prog.write_text(PROG)
    env = base_env()
    if preload:
        env["LD_PRELOAD"] = preload
    r = run_recorded(tmp_path / f"{name}.db", [prog, str(workers)], env=env)
    assert r.rc == 0, r.stderr
    rep = subprocess.run([str(LAUNCHER), "report", "--json", str(r.db)], capture_output=True, text=True, timeout=120,
                         env=base_env())
    assert rep.returncode == 0, rep.stderr
    text = subprocess.run([str(LAUNCHER), "report", str(r.db)], capture_output=True, text=True, timeout=120,
                          env=base_env())
    assert text.returncode == 0, text.stderr
    return r, json.loads(rep.stdout), text.stdout


def advice(rep):
    return [x for x in rep["recommendations"] if x["id"] == "allocator_page_faults"]


def test_a_step_that_faults_in_fresh_pages_is_told_to_keep_them_and_following_that_removes_them(tmp_path):
    assert os.path.exists(TCMALLOC), f"{TCMALLOC} missing: run scripts/setup.sh"
    r, rep, text = recorded(tmp_path, "glibc")
    proc = rep["training_process"]
    # 64 MiB of gradient is 16,384 pages a step; the step also maps its activations.
    assert proc["minor_faults_per_step"] > 12000, proc
    assert proc["sys_cpu"] > 0.1 * proc["cpu_util"], proc
    got = advice(rep)
    assert len(got) == 1, [x["id"] for x in rep["recommendations"]]
    ev = got[0]["evidence"]
    assert ev["minor_faults_per_step"] == pytest.approx(proc["minor_faults_per_step"])
    assert "tcmalloc" in got[0]["action"] and "LD_PRELOAD=" in got[0]["message"]
    assert ev["expected_speedup_bound"] == pytest.approx(1 / (1 - ev["kernel_cpu_share"]), rel=1e-6)
    assert "page faults" in text and "in the kernel" in text
    # The figure is the kernel's share given back: an estimate (tcmalloc has beaten it), measured by tune.
    assert "(an estimate: tune measures it)" in text and "to measure it: stallscope tune --" in text
    assert "a bound" not in text

    # Following the advice: the same loop with tcmalloc preloaded. stallscope's own preload is added
    # beside it, so the run is still recorded.
    r2, rep2, _ = recorded(tmp_path, "tcmalloc", preload=TCMALLOC)
    assert r2.result["losses"] == r.result["losses"]  # the allocator changes nothing the loop computes
    proc2 = rep2["training_process"]
    assert rep2["steps"] == rep["steps"] == 80
    assert proc2["minor_faults_per_step"] < 0.1 * proc["minor_faults_per_step"], (proc, proc2)
    assert proc2["sys_cpu"] / proc2["cpu_util"] < 0.5 * proc["sys_cpu"] / proc["cpu_util"], (proc, proc2)
    assert not advice(rep2), advice(rep2)


def test_tune_measures_the_allocator_it_is_advised(tmp_path):
    """Where the baseline's report advises keeping freed memory in the process, tune runs the
    fastest setting again with each installed allocator preloaded, and the run is what it says:
    the allocator took the step's faults away."""
    assert os.path.exists(TCMALLOC), f"{TCMALLOC} missing: run scripts/setup.sh"
    prog = tmp_path / "wide_step.py"
    prog.write_text(PROG)
    out = tmp_path / "t"
    # Every run goes to its end (80 steps), as in the test above: the allocator's own first faults
    # (its heap, once) are then spread over the same steps.
    p = subprocess.run([str(LAUNCHER), "tune", "--json", "--steps", "100", "--warmup", "5", "--candidates", "1", "-o",
                        str(out), "--", sys.executable, str(prog), "0"], capture_output=True, text=True, timeout=600,
                       env=base_env())
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    base = doc["baseline"]
    assert base["preload"] is None
    alloc = [c for c in doc["candidates"] if c["preload"] == TCMALLOC]
    assert len(alloc) == 1, [(c["name"], c["preload"]) for c in doc["candidates"]]
    a = alloc[0]
    assert a["status"] == "ended" and a["measured"]["samples_per_s"] > 0 and a["whole_run"], a
    assert a["name"].endswith("+ libtcmalloc_minimal.so.4")
    faults = [json.loads(subprocess.run([str(LAUNCHER), "report", "--json", r], capture_output=True, text=True,
                                        check=True, env=base_env()).stdout)["training_process"]["minor_faults_per_step"]
              for r in (base["recording"], a["recording"])]
    assert faults[1] < 0.1 * faults[0], faults
    # Every other run kept the program's own malloc, and the winner says which it is.
    assert all(c["preload"] is None for c in doc["candidates"] if c is not a)
    assert "preload" in doc["winner"]


# Big batches from a worker and a light step: the training process faults in each batch's 80 MiB
# of shared memory as it reads it (16 pages a fault: the kernel maps a shared file's pages around
# the one faulted). Those faults are the batches', not the allocator's.
BIG_BATCHES = """
import torch
from torch.utils.data import DataLoader, Dataset
class Images(Dataset):
    def __len__(self):
        return 20 * 12
    def __getitem__(self, i):
        return torch.full((1024, 1024), float(i))
total = 0.0
for x in DataLoader(Images(), batch_size=20, num_workers=1):
    total += float(x.mean())
print("RESULT " + str(round(total, 3)), flush=True)
"""


def test_with_workers_the_batches_own_pages_are_not_taken_for_the_allocators(tmp_path):
    # The wide step fed by a worker: the advice stands, beyond the batch's few pages.
    _, rep, _ = recorded(tmp_path, "workers", workers=1)
    got = advice(rep)
    assert len(got) == 1, [x["id"] for x in rep["recommendations"]]
    assert got[0]["evidence"]["batch_pages_per_step"] == 5  # 8 x 512 float32 and 8 int64 labels
    assert "received from a worker" in got[0]["message"]

    prog = tmp_path / "big_batches.py"
    prog.write_text(BIG_BATCHES)
    r = run_recorded(tmp_path / "big.db", [prog])
    assert r.rc == 0, r.stderr
    rep = json.loads(subprocess.run([str(LAUNCHER), "report", "--json", str(r.db)], capture_output=True, text=True,
                                    timeout=120, env=base_env()).stdout)
    # About a fault per 64 KiB of each 80 MiB batch: 1,280 a step, over the rule's 1,024.
    assert rep["training_process"]["minor_faults_per_step"] > 1024, rep["training_process"]
    assert rep["whatif"]["inputs"]["batch_bytes"] == 20 * 1024 * 1024 * 4
    assert not advice(rep), advice(rep)
