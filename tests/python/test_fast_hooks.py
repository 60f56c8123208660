"""The per-batch hooks in C (_stallscope_hooks, pyhooks/fast_hooks.cc) and their Python twins
(hooks/_main.py): a normal run uses the C module; the same loop recorded with it and with the
Python fallback (STALLSCOPE_PY_HOOKS=1) gives the same events with the same arguments; where the
module cannot load, one line says so and the Python hooks record."""

from __future__ import annotations

import statistics
from collections import Counter

import pytest

from conftest import BUILD, LOADER_PROG, Recording, base_env, run_plain, run_recorded

pytestmark = pytest.mark.torch

FALLBACK_LINE = "stallscope: the DataLoader hooks run in Python"

# Which wrapper serves next(), read from torch after one loop; loops of two loaders, one of them
# with workers, so that a test can count the fallback's line.
PROBE = """
import json, sys
if len(sys.argv) > 1 and sys.argv[1] == "block":
    sys.modules["_stallscope_hooks"] = None  # as an import that fails
import torch
from torch.utils.data import DataLoader, dataloader as dl
for workers in (0, 2, 0):
    for _ in DataLoader(list(range(8)), batch_size=4, num_workers=workers):
        pass
import stallscope.hooks._state as S
nxt = dl._BaseDataLoaderIter.__next__
print("RESULT " + json.dumps({"next": type(nxt).__name__, "wrapped": nxt.__wrapped__.__qualname__,
                              "fast": S._fast_module is not None, "why": S._fast_why}), flush=True)
"""


def have_module():
    return any(BUILD.glob("lib/_stallscope_hooks.*"))


@pytest.fixture(autouse=True)
def _needs_module():
    if not have_module():
        pytest.skip(f"_stallscope_hooks is not built in {BUILD / 'lib'} (no Python development files)")


def test_a_normal_run_uses_the_c_hooks(tmp_path):
    prog = tmp_path / "probe.py"
    prog.write_text(PROBE)
    r = run_recorded(tmp_path / "run.db", [prog])
    assert r.rc == 0, r.stderr
    assert r.result == {"next": "MethodHook", "wrapped": "_BaseDataLoaderIter.__next__", "fast": True, "why": None}
    assert FALLBACK_LINE not in r.stderr
    rec = Recording(tmp_path / "run.db")
    assert len([s for s in rec.spans("dl.next") if s["arg1"] >= 0]) == 6
    assert len(rec.spans("dl.fetch")) == 2 + 2 + 2  # two batches each: two loaders without workers, the workers


def test_when_the_module_cannot_load_one_line_says_so_and_python_records(tmp_path):
    prog = tmp_path / "probe.py"
    prog.write_text(PROBE)
    r = run_recorded(tmp_path / "run.db", [prog, "block"])
    assert r.rc == 0, r.stderr
    res = r.result
    assert res["next"] == "function" and not res["fast"] and "blocked" in res["why"]
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith(FALLBACK_LINE)]
    assert len(lines) == 1, r.stderr
    assert "_stallscope_hooks" in lines[0]
    rec = Recording(tmp_path / "run.db")
    assert len([s for s in rec.spans("dl.next") if s["arg1"] >= 0]) == 6
    # Chosen on purpose: the Python hooks, without a word.
    forced = run_recorded(tmp_path / "forced.db", [prog], env=base_env(STALLSCOPE_PY_HOOKS="1"))
    assert forced.rc == 0 and forced.result["next"] == "function" and FALLBACK_LINE not in forced.stderr


def events(rec, unordered):
    """What the main thread's hooks wrote, as multisets of (name, arguments) (cross-process order
    and timing aside), and the dl.cpu count (its arguments are CPU times; dl.parallel's are times
    too, test_parallel_regions.py). Unordered: which worker
    gets a batch depends on which is idle, so dl.sent and dl.recv lose their worker."""
    main_pid = rec.instants("dl.epoch_begin")[0]["pid"]
    spans = Counter((s["name"], s["arg0"], s["arg1"], s["arg2"], s["depth"], s["thread"])
                    for s in rec.q("SELECT * FROM span_view WHERE name LIKE 'dl.%'") if s["pid"] == main_pid)
    instants = Counter((i["name"], i["arg0"], i["arg1"],
                        None if unordered and i["name"] in ("dl.sent", "dl.recv") else i["arg2"])
                       for i in rec.q("SELECT * FROM instant_view WHERE name LIKE 'dl.%'")
                       if i["pid"] == main_pid and i["name"] not in ("dl.cpu", "dl.parallel", "dl.config",
                                                                      "dl.worker_start", "dl.worker_stop"))
    cpu = rec.instants("dl.cpu")
    return spans, instants, len(cpu), sum(c["arg2"] == -1 for c in cpu)


def sorted_firsts(result):
    return [{**e, "firsts": sorted(e["firsts"])} for e in result["epochs"]]


@pytest.mark.parametrize("args", [
    ["--workers", "0", "--samples", "22", "--epochs", "2"],
    ["--workers", "0", "--kind", "iterable", "--samples", "22", "--break-after", "2", "--epochs", "2"],
    ["--workers", "2", "--start-method", "fork", "--samples", "22", "--epochs", "2"],
    ["--workers", "2", "--start-method", "fork", "--samples", "22", "--unordered", "--persistent", "--epochs", "2"],
], ids=["no-workers", "no-workers-iterable-break", "workers", "workers-unordered-persistent"])
def test_c_and_python_hooks_record_the_same_events(tmp_path, args):
    every = {"STALLSCOPE_CPU_MARK_GAP_US": "0"}  # dl.cpu on every call: sampling depends on timing
    c = run_recorded(tmp_path / "c.db", [LOADER_PROG, *args], env=base_env(**every))
    p = run_recorded(tmp_path / "py.db", [LOADER_PROG, *args], env=base_env(STALLSCOPE_PY_HOOKS="1", **every))
    assert c.rc == p.rc == 0, c.stderr + p.stderr
    assert sorted_firsts(c.result) == sorted_firsts(p.result)  # --unordered: the order is the workers'
    unordered = "--unordered" in args
    ce, pe = events(Recording(c.db), unordered), events(Recording(p.db), unordered)
    assert ce == pe
    spans = ce[0]
    handed = sum(n for k, n in spans.items() if k[0] == "dl.next" and k[2] >= 0)
    assert handed == sum(e["batches"] for e in c.result["epochs"])
    if args[1] == "0":
        assert sum(n for k, n in spans.items() if k[0] == "dl.collate") == handed
    else:
        assert sum(n for k, n in ce[1].items() if k[0] == "dl.recv") >= handed


FAST_LOOP = """
import json, sys, time
import torch
from torch.utils.data import DataLoader
data = torch.zeros(4 * int(sys.argv[1]), 8)
t0 = time.perf_counter()
n = sum(1 for _ in DataLoader(data, batch_size=4))
print("RESULT " + json.dumps({"batches": n, "s": time.perf_counter() - t0}), flush=True)
"""


def dropped(rec):
    rows = rec.q("SELECT value FROM meta WHERE key = 'dropped_events'")
    return int(rows[0]["value"]) if rows else 0


@pytest.mark.timed
@pytest.mark.parametrize("hooks", ["c", "python"])
def test_fast_loops_mark_about_one_call_per_gap(tmp_path, hooks):
    """dl.cpu's clock reads cost about 1 us each in a busy loop: a loop faster than the gap (1 ms
    by default) marks about one next() call per gap, and each mark still holds the CPU between it
    and the call before (arg2), which the what-if model reads."""
    prog = tmp_path / "fast.py"
    prog.write_text(FAST_LOOP)
    extra = {"STALLSCOPE_PY_HOOKS": "1"} if hooks == "python" else {}
    r = run_recorded(tmp_path / "run.db", [prog, "3000"], env=base_env(**extra))
    assert r.rc == 0, r.stderr
    rec = Recording(tmp_path / "run.db")
    assert dropped(rec) == 0
    calls = [s for s in rec.spans("dl.next") if s["thread"] == "MainThread"]
    marks = [m for m in rec.instants("dl.cpu") if m["thread"] == "MainThread"]
    assert len(calls) == r.result["batches"] + 1 == 3001
    span_s = (calls[-1]["end_ns"] - calls[0]["start_ns"]) / 1e9
    assert span_s < 3000e-3 / 2, "the loop is not faster than two gaps per call: the test proves nothing"
    # One per gap at most (plus the first), and about that many: none lost to the sampling.
    assert 0.5 * span_s * 1e3 <= len(marks) - 1 <= span_s * 1e3 + 1, (len(marks), span_s)
    # Every mark but the first follows a call whose end was read: arg2 is the CPU of one step, not
    # of the whole gap since the mark before (about 1 ms). The clocks are read inside the spans, so
    # the CPU is bounded by the calls' outer edges (two threads at most). A slow span's tail (the
    # Python hooks' span end once took 193 us, on a loaded machine) can hold CPU outside the gap
    # between the spans: the tight bound, by that gap, holds for the median mark.
    assert marks[0]["arg2"] == -1 and all(m["arg2"] >= 0 for m in marks[1:])
    steps, gaps = [], []
    for m in marks[1:]:
        call = max((c for c in calls if c["end_ns"] <= m["ts_ns"]), key=lambda c: c["end_ns"])
        before = max((c for c in calls if c["end_ns"] < call["start_ns"]), key=lambda c: c["end_ns"])
        assert m["arg2"] <= (call["end_ns"] - before["start_ns"]) / 1e3 * 2, (m, call, before)
        steps.append(m["arg2"])
        gaps.append((call["start_ns"] - before["end_ns"]) / 1e3)
    step, gap = statistics.median(steps), statistics.median(gaps)
    assert step <= 2 * gap + 50, (step, gap)
    # Gap 0: every call (a shorter loop: on this one, a mark per call fills the rings faster than
    # they drain, and events are dropped).
    every = run_recorded(tmp_path / "every.db", [prog, "500"], env=base_env(STALLSCOPE_CPU_MARK_GAP_US="0", **extra))
    assert every.rc == 0, every.stderr
    every_rec = Recording(every.db)
    assert dropped(every_rec) == 0
    assert len([m for m in every_rec.instants("dl.cpu") if m["thread"] == "MainThread"]) == 501


def test_the_python_fallback_keeps_the_traceback(tmp_path):
    # The C hooks' traceback is test_robustness's; the fallback's is the same as without stallscope.
    args = [LOADER_PROG, "--workers", "0", "--fail-at", "5", "--reraise-as"]
    plain = run_plain(args)
    for env in (None, base_env(STALLSCOPE_PY_HOOKS="1")):
        r = run_recorded(tmp_path / "run.db", args, env=env)
        assert r.rc == plain.rc == 1
        assert r.stdout == plain.stdout
        assert r.stderr_without_stallscope() == plain.stderr
        (tmp_path / "run.db").unlink()


# Whether an iterator's attributes are still held inline by CPython (3.11+) or were moved into a
# real __dict__: the garbage collector's referents of the object show the dict only in the second
# case. Asking for `it.__dict__` moves them for good, and torch's own attribute reads on that
# iterator get slower for the rest of its life (hooks/_state.it_state). Torch's multi-process
# iterator has too many attributes to keep them inline: there the recorded run must match the
# plain one.
INLINE_PROBE = """
import gc, json, sys
import torch
from torch.utils.data import DataLoader

def moved(it):
    return any(isinstance(r, dict) and "_num_yielded" in r for r in gc.get_referents(it))

out = []
for workers in (0, 2):
    loader = DataLoader(list(range(16)), batch_size=4, num_workers=workers,
                        persistent_workers=workers > 0)
    for epoch in range(2):
        it = iter(loader)
        n = sum(1 for _ in it)
        try:
            followed = object.__getattribute__(it, "_stallscope_it") is not None
        except AttributeError:
            followed = False
        out.append({"workers": workers, "batches": n, "followed": followed, "moved": moved(it)})
it.__dict__
out.append({"probe": moved(it)})
print("RESULT " + json.dumps(out), flush=True)
"""


@pytest.mark.parametrize("hooks", ["c", "python"])
def test_the_hooks_leave_the_iterators_attributes_inline(tmp_path, hooks):
    prog = tmp_path / "inline.py"
    prog.write_text(INLINE_PROBE)
    plain = run_plain([prog])
    assert plain.rc == 0, plain.stderr
    *plain_loops, probe = plain.result
    assert probe == {"probe": True}
    assert not plain_loops[0]["moved"], "this Python keeps no inline attribute values: the test proves nothing"
    extra = {"STALLSCOPE_PY_HOOKS": "1"} if hooks == "python" else {}
    r = run_recorded(tmp_path / "run.db", [prog], env=base_env(**extra))
    assert r.rc == 0, r.stderr
    loops = r.result[:-1]
    assert [x["moved"] for x in loops] == [x["moved"] for x in plain_loops]
    assert all(x["batches"] == 4 and x["followed"] for x in loops), loops
    rec = Recording(tmp_path / "run.db")
    assert len([s for s in rec.spans("dl.next") if s["arg1"] >= 0]) == 16
