"""Real torch DataLoader loops under `stallscope run`: the events of docs/events.md are recorded,
complete and consistent, for the configurations training scripts use."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import subprocess
from collections import Counter, defaultdict

import pytest

from batchlife import check_batch_lives, handed_batches
from conftest import LAUNCHER, LIBRARY, LOADER_PROG, PYTHON_DIR, Recording, base_env, run_plain

pytestmark = pytest.mark.torch



def prog_site(line):
    """created_at of a DataLoader(...) call of the loader program: its path relative to the working
    directory (the test's, which the program inherits) when inside it, else absolute."""
    path = os.path.abspath(LOADER_PROG)
    cwd = os.getcwd()
    return f"{os.path.relpath(path, cwd) if path.startswith(cwd + os.sep) else path}:{line}"

def assert_epochs(rec, result, L=0):
    """Per epoch of loader L: one epoch_begin, dl.next = batches + the StopIteration call, the
    handed batch indices, an epoch_end with the batch count; returns the handed lists."""
    got = handed_batches(rec)
    begins = [r for r in rec.instants("dl.epoch_begin") if r["arg0"] == L]
    ends = {r["arg1"]: r for r in rec.instants("dl.epoch_end") if r["arg0"] == L}
    nexts = defaultdict(list)
    for s in rec.spans("dl.next"):
        if s["arg0"] == L:
            nexts[s["arg2"]].append(s)
    mine = [e for e in result["epochs"] if e["loader"] == L]
    assert [b["arg1"] for b in begins] == [e["epoch"] for e in mine]
    for e in mine:
        E, n = e["epoch"], e["batches"]
        assert len(got[(L, E)]) == n, f"epoch {E}: {len(got[(L, E)])} handed, loop saw {n}"
        spans = nexts[E]
        assert all(s["dur_ns"] is not None and s["thread"] == "MainThread" and s["depth"] == 0 for s in spans)
        if E in ends:  # the epoch ran to StopIteration: one more next() that ended with -1
            assert len(spans) == n + 1 and spans[-1]["arg1"] == -1
            assert ends[E]["arg2"] == n
            assert spans[-1]["end_ns"] <= ends[E]["ts_ns"]
        else:
            assert len(spans) == n
    return got


@pytest.mark.parametrize("kind", ["map", "iterable"])
def test_no_workers_fetch_and_collate_in_next(recorded, kind):
    # Every call marked (mark gap 0), so every batch's fetch and collate are recorded: on this loop,
    # faster than a batch per millisecond, they would be a sample (the next test).
    r, rec = recorded([LOADER_PROG, "--kind", kind, "--samples", "22", "--batch-size", "4", "--epochs", "2"],
                      env=base_env(STALLSCOPE_CPU_MARK_GAP_US="0"))
    res = r.result
    got = assert_epochs(rec, res)
    assert got[(0, 0)] == list(range(6)) and got[(0, 1)] == list(range(6))
    cfg = rec.configs()[0]
    assert cfg["num_workers"] == 0 and cfg["start_method"] is None and cfg["prefetch_factor"] is None
    # How workers would start, for the what-if model: the platform's default here.
    assert cfg["worker_start_method"] == multiprocessing.get_all_start_methods()[0]
    assert cfg["dataset_type"] == kind
    assert cfg["dataset_len"] == (22 if kind == "map" else None)
    assert cfg["batches_per_epoch"] == (6 if kind == "map" else None)
    assert cfg["created_at"] == prog_site(res['lines']['loader0'])
    assert [b["arg2"] for b in rec.instants("dl.epoch_begin")] == [0, 0]  # num_workers
    nexts = [s for s in rec.spans("dl.next") if s["arg1"] >= 0]
    fetches = rec.spans("dl.fetch")
    collates = rec.spans("dl.collate")
    # Map: one fetch per batch. Iterable: one more, the fetch that hits the end of the data.
    assert len(fetches) == len(nexts) + (0 if kind == "map" else 2)
    assert len(collates) == len(nexts)
    for n in nexts:
        f = [x for x in fetches if n["start_ns"] <= x["start_ns"] and x["end_ns"] <= n["end_ns"]]
        assert len(f) == 1 and f[0]["depth"] == 1
        assert (f[0]["arg0"], f[0]["arg1"], f[0]["arg2"]) == (0, n["arg1"], -1)
        c = [x for x in collates if f[0]["start_ns"] <= x["start_ns"] and x["end_ns"] <= f[0]["end_ns"]]
        assert len(c) == 1 and c[0]["depth"] == 2
        last = n["arg1"] == 5
        assert (c[0]["arg0"], c[0]["arg1"], c[0]["arg2"]) == (0, n["arg1"], 2 if last else 4)
    assert not rec.instants("dl.sent") and not rec.instants("dl.worker_start")


# Loops of tiny in-memory batches, no workers, 2 epochs each, far faster than a batch per
# millisecond: "sized" batched by torch's BatchSampler (a short last batch), "sampler" by an explicit
# torch BatchSampler with drop_last, "custom" by a batch sampler of the script's own (sizes vary),
# "iterable" from an iterable dataset.
SAMPLED_LOOPS = """
import json, sys
import torch
from torch.utils.data import BatchSampler, DataLoader, IterableDataset, SequentialSampler
n = 4 * 1999 + 2
data = torch.arange(n, dtype=torch.float32).reshape(n, 1)
class Stream(IterableDataset):
    def __iter__(self):
        return iter(data)
custom, i = [], 0
while i < n:  # batches of 1, 2, 3, 4, 5, 1, ... samples
    custom.append(list(range(i, min(n, i + 1 + len(custom) % 5))))
    i = custom[-1][-1] + 1
loaders = {
    "sized": DataLoader(data, batch_size=4),
    "sampler": DataLoader(data, batch_sampler=BatchSampler(SequentialSampler(data), 4, drop_last=True)),
    "custom": DataLoader(data, batch_sampler=custom),
    "iterable": DataLoader(Stream(), batch_size=4),
}
out = {}
for name, loader in loaders.items():
    out[name] = [sum(len(x) for x in loader) for _ in range(2)]
print("RESULT " + json.dumps(out), flush=True)
"""


@pytest.mark.timed
@pytest.mark.parametrize("hooks", ["c", "python"])
def test_fast_loops_record_fetch_and_collate_on_a_sample_that_still_sizes_every_batch(recorded, tmp_path, hooks):
    """On a loop faster than the dl.cpu mark gap, the fetch and collate spans of a loader whose
    batches all hold batch_size samples but the last (torch's BatchSampler over a sized dataset)
    are recorded on the marked calls and on each epoch's first and last batch; every other loader's
    on every call. Nothing is lost by it: the report counts every sample."""
    prog = tmp_path / "loops.py"
    prog.write_text(SAMPLED_LOOPS)
    extra = {"STALLSCOPE_PY_HOOKS": "1"} if hooks == "python" else {}
    r, rec = recorded([prog], env=base_env(**extra))
    res = r.result
    n = 4 * 1999 + 2
    assert res["sized"] == [n, n] and res["sampler"] == [n - 2, n - 2] and res["custom"] == [n, n]
    assert res["iterable"] == [n, n]
    # Each loader's id, by the line that created it.
    by_line = {int(c["created_at"].rsplit(":", 1)[1]): lid for lid, c in rec.configs().items()}
    L = {name: by_line[i + 1] for i, ln in enumerate(SAMPLED_LOOPS.splitlines())
         for name in res if ln.startswith(f'    "{name}": DataLoader(')}
    assert len(L) == 4, L
    nexts = [s for s in rec.spans("dl.next") if s["arg1"] >= 0]
    fetches, collates = rec.spans("dl.fetch"), rec.spans("dl.collate")
    for name, lid in L.items():
        handed = [s for s in nexts if s["arg0"] == lid]
        mine_f = [f for f in fetches if f["arg0"] == lid]
        mine_c = [c for c in collates if c["arg0"] == lid]
        per_epoch = len(handed) // 2
        if name in ("sized", "sampler"):
            span_s = (handed[-1]["end_ns"] - handed[0]["start_ns"]) / 1e9
            assert span_s * 1e3 < len(handed) / 2, f"{name}: slower than two batches per ms: the test proves nothing"
            # About one per mark gap (1 ms), and each epoch's first and last batch.
            assert 4 <= len(mine_c) <= span_s * 1e3 + 8, (name, len(mine_c), span_s)
            assert len(mine_c) < len(handed) / 2
            for E in (0, 1):
                for B in (0, per_epoch - 1):
                    c = [x for x in mine_c if x["arg1"] == B and any(
                        s["arg2"] == E and s["arg1"] == B and s["start_ns"] <= x["start_ns"] <= s["end_ns"]
                        for s in handed)]
                    assert len(c) == 1, (name, E, B)
                    assert c[0]["arg2"] == (2 if name == "sized" and B == per_epoch - 1 else 4)
        else:  # sizes unknown beforehand: every batch (an iterable's last fetch finds the end)
            assert len(mine_c) == len(handed)
        assert len(mine_f) == len(mine_c) + (2 if name == "iterable" else 0)
        for c in mine_c:  # nested in the fetch of the same batch, inside the next() that handed it
            f = [x for x in mine_f if x["start_ns"] <= c["start_ns"] and c["end_ns"] <= x["end_ns"]]
            assert len(f) == 1 and f[0]["arg1"] == c["arg1"]
    rep = json.loads(subprocess.run([str(LAUNCHER), "report", "--json", str(r.db)], capture_output=True,
                                    text=True, check=True).stdout)
    samples = {lo["loader"]: lo["samples"] for lo in rep["loaders"]}
    assert samples[L["sized"]] == 2 * n and samples[L["sampler"]] == 2 * (n - 2)
    assert samples[L["custom"]] == 2 * n and samples[L["iterable"]] == 2 * n


@pytest.mark.parametrize("start_method,kind", [
    ("fork", "map"), ("spawn", "map"), ("fork", "iterable"), ("spawn", "iterable"), ("forkserver", "map")])
def test_workers_every_batch_has_a_complete_life(recorded, start_method, kind):
    epochs = 1 if start_method != "fork" else 2  # spawn/forkserver start slowly: keep the suite fast
    r, rec = recorded([LOADER_PROG, "--workers", "2", "--start-method", start_method, "--kind", kind,
                       "--samples", "22", "--epochs", str(epochs), "--sleep-ms", "1"])
    res = r.result
    assert_epochs(rec, res)
    assert check_batch_lives(rec) == sum(e["batches"] for e in res["epochs"]) == 6 * epochs
    cfg = rec.configs()[0]
    assert cfg["start_method"] == start_method and cfg["num_workers"] == 2 and cfg["prefetch_factor"] == 2
    assert cfg["worker_start_method"] == start_method
    assert cfg["dataset_type"] == kind and cfg["dataset_class"] == ("MapDS" if kind == "map" else "IterDS")
    # Non-persistent: a new pair of workers each epoch, each announced, ready once, stopped once.
    starts = rec.instants("dl.worker_start")
    assert sorted((s["arg0"], s["arg1"]) for s in starts) == sorted([(0, 0), (0, 1)] * epochs)
    pids = {s["arg2"] for s in starts}
    assert len(pids) == 2 * epochs
    ready = rec.instants("dl.worker_ready")
    assert sorted((x["pid"], x["arg0"], x["arg1"]) for x in ready) == sorted(
        (s["arg2"], s["arg1"], 0) for s in starts)
    stops = rec.instants("dl.worker_stop")
    assert sorted((s["arg0"], s["arg1"], s["arg2"]) for s in stops) == sorted(
        (s["arg0"], s["arg1"], s["arg2"]) for s in starts)
    # Worker events never come from the training process; main-side events only from it.
    main_pid = rec.instants("dl.epoch_begin")[0]["pid"]
    assert {x["pid"] for x in rec.instants("dl.put")} <= pids
    assert {x["pid"] for x in rec.instants("dl.sent") + rec.instants("dl.recv")} == {main_pid}
    # Worker collate spans nest in the fetch of the same batch and count its samples.
    fetches = {(f["pid"], f["arg0"]): f for f in rec.spans("dl.fetch")}
    collates = rec.spans("dl.collate")
    assert collates and all(c["pid"] in pids for c in collates)
    for c in collates:
        f = fetches[(c["pid"], c["arg0"])]
        assert f["start_ns"] <= c["start_ns"] and c["end_ns"] <= f["end_ns"] and c["depth"] == f["depth"] + 1
        assert c["arg1"] in (4, 3, 2, 1) and c["arg2"] == 0


def test_persistent_workers_start_once_and_count_generations(recorded):
    # Epoch 0 is left after 2 batches, so _reset must drain its stale results at epoch 1.
    r, rec = recorded([LOADER_PROG, "--workers", "2", "--persistent", "--epochs", "3", "--break-after", "2",
                       "--sleep-ms", "1"])
    res = r.result
    assert [e["batches"] for e in res["epochs"]] == [2, 6, 6]
    got = assert_epochs(rec, res)
    assert got[(0, 1)] == list(range(6)) and got[(0, 2)] == list(range(6))
    starts = rec.instants("dl.worker_start")
    assert sorted(s["arg1"] for s in starts) == [0, 1]  # one start per worker for all epochs
    ready = Counter((x["arg0"], x["arg1"]) for x in rec.instants("dl.worker_ready"))
    assert ready == Counter({(w, g): 1 for w in (0, 1) for g in (0, 1, 2)})
    assert check_batch_lives(rec, persistent=True) == 14
    # Results that _reset drains at the start of epoch 1 (computed for epoch 0, never handed) are
    # not reported as received: epochs 1 and 2 receive exactly their 6 batches each.
    begins = [b["ts_ns"] for b in rec.instants("dl.epoch_begin")] + [float("inf")]
    recv = [[x["arg1"] for x in rec.instants("dl.recv") if begins[E] <= x["ts_ns"] < begins[E + 1]]
            for E in range(3)]
    assert sorted(recv[1]) == sorted(recv[2]) == list(range(6))
    assert len(recv[0]) >= 2
    assert rec.configs()[0]["persistent_workers"] is True


def test_non_persistent_workers_respawn_each_epoch(recorded):
    _, rec = recorded([LOADER_PROG, "--workers", "2", "--epochs", "3", "--samples", "8"])
    starts = rec.instants("dl.worker_start")
    begins = rec.instants("dl.epoch_begin")
    assert len(starts) == 6 and len({s["arg2"] for s in starts}) == 6
    for E, b in enumerate(begins):  # two starts inside each epoch, before its first dl.next ends
        hi = begins[E + 1]["ts_ns"] if E + 1 < len(begins) else float("inf")
        assert sorted(s["arg1"] for s in starts if b["ts_ns"] <= s["ts_ns"] < hi) == [0, 1]
    assert len(rec.instants("dl.worker_stop")) == 6
    assert check_batch_lives(rec) == 6


def test_out_of_order_delivery(recorded):
    r, rec = recorded([LOADER_PROG, "--workers", "2", "--unordered", "--sleep-ms", "2"])
    got = assert_epochs(rec, r.result)
    assert sorted(got[(0, 0)]) == list(range(6))  # every batch handed exactly once, any order
    assert check_batch_lives(rec) == 6
    assert rec.configs()[0]["in_order"] is False


def test_two_loaders_are_told_apart(recorded):
    # Every call marked, so that every batch of the loader without workers has its fetch span (on
    # a fast loop they are a sample: test_fast_loops_record_fetch_and_collate_on_a_sample...).
    r, rec = recorded([LOADER_PROG, "--workers", "2", "--two-loaders", "--epochs", "2"],
                      env=base_env(STALLSCOPE_CPU_MARK_GAP_US="0"))
    res = r.result
    cfgs = rec.configs()
    assert sorted(cfgs) == [0, 1]
    assert cfgs[0]["created_at"] == prog_site(res['lines']['loader0'])
    assert cfgs[1]["created_at"] == prog_site(res['lines']['loader1'])
    assert cfgs[0]["num_workers"] == 2 and cfgs[1]["num_workers"] == 0 and cfgs[1]["batch_size"] == 2
    assert_epochs(rec, res, L=0)
    got1 = assert_epochs(rec, res, L=1)
    assert got1[(1, 0)] == list(range(4))
    # Loader 1 has no workers: its fetches are main-thread spans labelled L=1, W=-1.
    main_fetch = [f for f in rec.spans("dl.fetch") if f["thread"] == "MainThread"]
    assert len(main_fetch) == 8 and {(f["arg0"], f["arg2"]) for f in main_fetch} == {(1, -1)}
    assert check_batch_lives(rec) == 12
    # The summaries agree with these rows, and tell the two loaders' waits apart.
    assert rec.summary_mismatches() == []
    waits = {r["grp"]: r["n"] for r in rec.q(
        "SELECT grp, sum(count) AS n FROM span_summaries WHERE level_ns = 100000000000 AND name_id IN "
        "(SELECT id FROM strings WHERE value = 'dl.next') GROUP BY grp")}
    assert waits == {L: len([s for s in rec.spans("dl.next") if s["arg0"] == L]) for L in (0, 1)}


def test_pin_memory_on_cpu_is_reported_ineffective(recorded, tmp_path):
    args = [LOADER_PROG, "--workers", "2", "--pin"]
    r, rec = recorded(args)
    plain = run_plain(args)
    assert plain.rc == 0 and r.result == plain.result
    cfg = rec.configs()[0]
    assert cfg["pin_memory"] is True and cfg["pin_memory_effective"] is False
    assert "dl.pin" not in rec.names()
    assert check_batch_lives(rec) == 6


def test_pin_memory_thread_spans_simulated(recorded):
    # No accelerator here: the program makes torch believe there is one, so that torch starts its
    # pin-memory thread (pinning is replaced by a 2 ms sleep). Tests the pin-loop hook, not pinning.
    _, rec = recorded([LOADER_PROG, "--workers", "2", "--pin", "--pretend-accelerator", "--epochs", "2"])
    assert rec.configs()[0]["pin_memory_effective"] is True
    pins = rec.spans("dl.pin")
    assert len(pins) == 12
    assert {p["thread"] for p in pins} == {"dl-pin-0"}
    assert all(p["dur_ns"] >= 2_000_000 for p in pins)
    main_pid = rec.instants("dl.epoch_begin")[0]["pid"]
    assert {p["pid"] for p in pins} == {main_pid}
    # Each batch was pinned after its worker put it and before the main thread received it.
    begins = [b["ts_ns"] for b in rec.instants("dl.epoch_begin")] + [float("inf")]
    for E in (0, 1):
        lo, hi = begins[E], begins[E + 1]
        recvs = [x for x in rec.instants("dl.recv") if lo <= x["ts_ns"] < hi]
        assert len(recvs) == 6
        for rv in recvs:
            B = rv["arg1"]
            pin = [p for p in pins if p["arg1"] == B and lo <= p["start_ns"] < hi]
            put = [p for p in rec.instants("dl.put") if p["arg0"] == B and lo <= p["ts_ns"] < hi]
            assert len(pin) == 1 and len(put) == 1 and pin[0]["arg0"] == 0
            assert put[0]["ts_ns"] <= pin[0]["start_ns"] and pin[0]["end_ns"] <= rv["ts_ns"]
    assert check_batch_lives(rec) == 12


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_record_api_without_launcher(tmp_path, start_method):
    db = tmp_path / "api.db"
    env = base_env(PYTHONPATH=str(PYTHON_DIR), STALLSCOPE_LIBRARY=str(LIBRARY))
    r = run_plain([LOADER_PROG, "--workers", "2", "--start-method", start_method, "--record", db], env=env)
    assert r.rc == 0, r.stderr
    assert "stallscope:" not in r.stderr, r.stderr
    rec = Recording(db)
    assert rec.q("SELECT value FROM meta WHERE key = 'mode'")[0]["value"] == "in-process"
    assert_epochs(rec, r.result)
    assert check_batch_lives(rec) == 6
    assert len({x["pid"] for x in rec.instants("dl.put")}) == 2  # both workers recorded


BUSY_BESIDE = """
import hashlib, threading, time
import torch
from torch.utils.data import DataLoader, Dataset

class Sleepy(Dataset):
    def __len__(self):
        return 24
    def __getitem__(self, i):
        time.sleep(0.02)
        return torch.zeros(4)

stop = False
def burn():  # hashing a large buffer releases the GIL: CPU on another core, beside next()
    data = bytes(1 << 20)
    while not stop:
        hashlib.sha256(data).digest()

t = threading.Thread(target=burn)
t.start()
for x in DataLoader(Sleepy(), batch_size=1):
    pass
stop = True
t.join()
"""


@pytest.mark.timed
def test_cpu_marks_split_the_training_thread_from_the_others(recorded, tmp_path):
    """dl.cpu after each next(): arg1 the training thread's CPU inside the call (here sleeping in
    __getitem__: little), arg0 the other threads' CPU inside it (a thread burning CPU beside the
    loop: most of the call), arg2 the process CPU between calls."""
    prog = tmp_path / "busy_beside.py"
    prog.write_text(BUSY_BESIDE)
    _, rec = recorded([prog])
    nexts = [s for s in rec.spans("dl.next") if s["arg1"] >= 0]
    marks = [m for m in rec.instants("dl.cpu") if m["thread"] == "MainThread"]
    assert len(nexts) == 24 and len(marks) == 25  # and the StopIteration call
    steady = []
    for n in nexts[1:]:
        m = next(m for m in marks if m["ts_ns"] >= n["end_ns"])
        wall_us = n["dur_ns"] / 1000
        steady.append((m["arg0"] / wall_us, m["arg1"] / wall_us))
    others = sorted(o for o, _ in steady)
    mine = sorted(t for _, t in steady)
    # The burning thread ran through most of each call (on an idle machine about all of it; a
    # loaded one shares the core): without the figure recorded it would be 0.
    assert others[len(others) // 2] >= 0.25, steady
    assert mine[len(mine) // 2] <= 0.3, steady  # the training thread slept
    assert all(m["arg2"] >= 0 for m in marks[1:])




# A clock_gettime that, once the program turns it on, hands the core away for 5 ms after each read
# of a CPU clock on the main thread: what a preemption at a system call's return does on a machine
# with more runnable threads than cores. Preloaded after libstallscope, it slows the reads of the C
# hooks and of the Python ones alike (both call libc's clock_gettime).
SLOW_CLOCKS_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>
static int (*real)(clockid_t, struct timespec*);
static volatile int on;
void ss_test_slow_cpu_clocks(int v) { on = v; }
int clock_gettime(clockid_t c, struct timespec* ts) {
  if (!real) real = (int (*)(clockid_t, struct timespec*))dlsym(RTLD_NEXT, "clock_gettime");
  int r = real(c, ts);
  if (on && (c == CLOCK_PROCESS_CPUTIME_ID || c == CLOCK_THREAD_CPUTIME_ID) && getpid() == gettid()) {
    struct timespec d = {0, 5000000};
    nanosleep(&d, 0);
  }
  return r;
}
"""

SLOW_CLOCKS = """
import ctypes, json, time
import torch
from torch.utils.data import DataLoader

slow = ctypes.CDLL(None).ss_test_slow_cpu_clocks
it = iter(DataLoader(torch.arange(32.0), batch_size=4))
walls = []
slow(1)
while True:
    t = time.perf_counter()
    try:
        next(it)
    except StopIteration:
        break
    walls.append(time.perf_counter() - t)
slow(0)
print(json.dumps(walls))
"""


@pytest.mark.timed
@pytest.mark.parametrize("hooks", ["c", "python"])
def test_cpu_mark_clocks_are_read_inside_the_next_span(recorded, tmp_path, hooks):
    """The CPU clocks of a dl.cpu mark are read after the dl.next span begins and before it ends: a
    wait at a clock read belongs to the next() call, and the script's own clock around next() must
    find it inside the span, not beside it (before, 10 ms of each marked call's 20 fell outside)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler builds the project; none on PATH"
    lib = tmp_path / "slow_clocks.so"
    (tmp_path / "slow_clocks.c").write_text(SLOW_CLOCKS_C)
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(lib), str(tmp_path / "slow_clocks.c"), "-ldl"],
                   check=True)
    prog = tmp_path / "slow_clocks.py"
    prog.write_text(SLOW_CLOCKS)
    env = base_env(LD_PRELOAD=str(lib), STALLSCOPE_CPU_MARK_GAP_US="0",
                   **({"STALLSCOPE_PY_HOOKS": "1"} if hooks == "python" else {}))
    r, rec = recorded([prog], env=env)
    walls = json.loads(r.stdout.strip().splitlines()[-1])
    nexts = [s for s in rec.spans("dl.next") if s["arg1"] >= 0]
    marks = [m for m in rec.instants("dl.cpu") if m["thread"] == "MainThread"]
    assert len(walls) == len(nexts) == 8 and len(marks) == 9, (walls, len(nexts), len(marks))
    for wall, span in zip(walls, nexts, strict=True):
        # Four slow reads per marked call: 20 ms, all inside the span (a few hundred microseconds
        # of the script's own work lie outside it).
        assert span["dur_ns"] / 1e9 >= 0.020, (span, wall)
        assert wall - span["dur_ns"] / 1e9 < 0.002, (wall, span)

NESTED_BATCHES = """
import numpy as np
import torch
from torch.utils.data import DataLoader


def collate(samples):
    # 3 tensors (128 + 32 + 16 bytes) nested in a dict, a tuple and a list; a numpy array (64
    # bytes) and a string beside them.
    return {"x": torch.stack(samples), "y": (torch.zeros(4, dtype=torch.int64), [torch.ones(2, 2)]),
            "np": np.zeros((4, 2)), "name": "b"}


data = [torch.full((8,), float(i)) for i in range(16)]
for workers in (0, 0, 1):  # two loaders without workers, one with
    loader = DataLoader(data, batch_size=4, collate_fn=collate, num_workers=workers)
    for epoch in range(2):
        for batch in loader:
            assert batch["x"].shape == (4, 8)
"""


@pytest.mark.parametrize("hooks", ["c", "python"])
def test_batch_layout_once_per_loader_and_worker(recorded, tmp_path, hooks):
    """dl.batch: once per loader that collates in the training process, whatever its epochs,
    with the batch's tensors counted through dicts, tuples and lists and the bytes of the tensors
    and numpy arrays; with workers, once per worker process (the loader's one worker is started
    anew in each of its 2 epochs), without L."""
    prog = tmp_path / "nested_batches.py"
    prog.write_text(NESTED_BATCHES)
    _, rec = recorded([prog], env=base_env(STALLSCOPE_PY_HOOKS="1") if hooks == "python" else None)
    train_pid = rec.q("SELECT pid FROM processes ORDER BY start_ns LIMIT 1")[0]["pid"]
    layouts = rec.instants("dl.batch")
    main = [r for r in layouts if r["pid"] == train_pid]
    assert [(r["arg0"], r["arg1"], r["arg2"]) for r in main] == [(0, 3, 128 + 32 + 16 + 64), (1, 3, 240)]
    assert all(r["thread"] == "MainThread" for r in main)
    workers = [r for r in layouts if r["pid"] != train_pid]
    starts = rec.instants("dl.worker_start")
    assert len(starts) == 2, starts
    assert sorted(r["pid"] for r in workers) == sorted(s["arg2"] for s in starts), (workers, starts)
    assert all((r["arg0"], r["arg1"], r["arg2"]) == (3, 240, 0) for r in workers), workers
    # Each comes after the first batch collated in its process, before that batch is handed.
    firsts = {}
    for s in rec.spans("dl.collate"):
        firsts.setdefault(s["pid"] if s["pid"] != train_pid else (train_pid, s["arg0"]), s)
    for r in main:
        assert firsts[(train_pid, r["arg0"])]["end_ns"] <= r["ts_ns"]
    for r in workers:
        assert firsts[r["pid"]]["end_ns"] <= r["ts_ns"]
