"""The first step after forking DataLoader workers: the fork leaves the training process's memory
shared with the workers, copy-on-write, and the step's first writes to its weights, gradients and
optimizer state copy each page. With workers that are not persistent that happens every epoch. A
real loop with a 100 MB model times its own steps; the what-if model must find the same excess in
the recording, price it per epoch whose workers are forked, and say so."""

from __future__ import annotations

import json
import statistics
import subprocess

import pytest

from conftest import LAUNCHER, base_env, run_recorded

pytestmark = [pytest.mark.torch, pytest.mark.timed]  # every test here measures time (conftest.py)

# An MLP of about 35 MB of weights (and as much in gradients and in SGD's momentum), 2 forked
# workers re-created at each of 3 epochs (argv[1]: "1" makes them persistent). The loop times each
# step by its own clock and prints them per epoch.
PROG = """
import json, sys, time
import torch
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
layers, d = [], 256
for _ in range(3):
    layers += [torch.nn.Linear(d, 2048), torch.nn.ReLU()]
    d = 2048
model = torch.nn.Sequential(*layers, torch.nn.Linear(d, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
ds = TensorDataset(torch.randn(96, 256), torch.randint(0, 10, (96,)))
loader = DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=sys.argv[1] == "1")
steps = []
for epoch in range(3):
    steps.append([])
    for x, y in loader:
        t0 = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        steps[-1].append(time.perf_counter() - t0)
print("RESULT " + json.dumps({"steps": steps}), flush=True)
"""


def recorded_loop(tmp_path, persistent):
    """Runs PROG under stallscope: its steps per epoch by its own clock, the mean of the steps after
    each epoch's first, and the report's what-if model."""
    prog = tmp_path / "fork_step.py"
    prog.write_text(PROG)
    r = run_recorded(tmp_path / "run.db", [prog, "1" if persistent else "0"])
    assert r.rc == 0, r.stderr
    steps = r.result["steps"]
    rest = statistics.mean(s for epoch in steps for s in epoch[1:])
    rep = subprocess.run([str(LAUNCHER), "report", "--json", str(r.db)], capture_output=True, text=True, timeout=120,
                         env=base_env())
    assert rep.returncode == 0, rep.stderr
    w = json.loads(rep.stdout)["whatif"]
    assert w["available"], w.get("why_not")
    return steps, rest, w


def test_the_first_step_after_forking_workers_is_found_and_priced(tmp_path):
    steps, rest, w = recorded_loop(tmp_path, persistent=False)
    # The loop's own clock: each epoch's first step against the rest. The first epoch's fork comes
    # before the gradients and SGD's momentum exist: less to copy than at the later ones.
    firsts = [epoch[0] - rest for epoch in steps]
    assert min(firsts) > 2 * rest, (firsts, rest)  # the effect is there to be found
    later, first = w["inputs"]["fork_step_ms"] / 1e3, w["inputs"]["fork_first_step_ms"] / 1e3
    # The recording's steps are the gaps between next() calls: the step plus the loop's own
    # bookkeeping, which excesses of this size dwarf.
    assert later == pytest.approx(statistics.mean(firsts[1:]), rel=0.25), (later, firsts)
    assert first == pytest.approx(firsts[0], rel=0.25), (first, firsts)
    assert any("after the workers were forked" in a for a in w["assumptions"]), w["assumptions"]
    # Persistent workers fork once: the two later epochs' fork steps are saved.
    by_args = {c["arguments"]: c["samples_per_s"] for c in w["candidates"]}
    rec = by_args["num_workers=1, prefetch_factor=2, persistent_workers=False"]
    pers = by_args["num_workers=1, prefetch_factor=2, persistent_workers=True"]
    samples = 3 * 96
    assert samples / rec - samples / pers > 2 * later * 0.9, (rec, pers, later)


def test_persistent_workers_pay_it_once(tmp_path):
    steps, rest, w = recorded_loop(tmp_path, persistent=True)
    assert steps[0][0] - rest > 2 * rest, (steps[0][0], rest)  # forked once, before the first epoch
    assert max(epoch[0] for epoch in steps[1:]) < steps[0][0] / 2, steps  # and not again
    assert w["inputs"]["fork_first_step_ms"] / 1e3 == pytest.approx(steps[0][0] - rest, rel=0.25), w["inputs"]
    # The later forks were not seen: the first one stands for them.
    assert w["inputs"]["fork_step_ms"] == w["inputs"]["fork_first_step_ms"]
