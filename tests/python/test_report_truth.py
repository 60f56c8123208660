"""`stallscope report` against ground truth: the example scripts run under `stallscope run`, each
measures its own stall fraction and throughput, and the report must agree — stall fraction within
3 percentage points, samples/s within 5 % — and recommend what the script's bottleneck calls for
(nothing for speed on the compute-bound run). Advice is a claim about the future: the tests follow
it, running the script with the advised DataLoader settings and the original ones in interleaved
turns, and the advised runs must not be slower."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys

import pytest

from conftest import LAUNCHER, REPO, run_recorded

pytestmark = [pytest.mark.torch, pytest.mark.timed]  # every test here measures time (conftest.py)

EXAMPLES = REPO / "examples"
THROUGHPUT = re.compile(r"(?P<samples>\d+) samples in (?P<total>[0-9.]+) s \((?P<rate>\d+) samples/s\)")
MEASURED = re.compile(r"measured (?P<frac>[0-9.]+) \(wait in next\(\) (?P<wait>[0-9.]+) s")
SPEED_IDS = {"increase_num_workers", "reduce_num_workers", "enable_persistent_workers", "increase_prefetch_factor",
             "enable_pin_memory", "slow_dataset_getitem", "limit_torch_threads"}


def report_for(tmp_path, script, *args):
    db = tmp_path / "truth.db"
    r = run_recorded(db, [EXAMPLES / script, *args], timeout=180)
    assert r.rc == 0, f"{script}: rc={r.rc}\n{r.stdout}\n{r.stderr}"
    t, m = THROUGHPUT.search(r.stdout), MEASURED.search(r.stdout)
    assert t and m, r.stdout
    out = subprocess.run([str(LAUNCHER), "report", "--json", str(db)], capture_output=True, text=True, check=True)
    rep = json.loads(out.stdout)
    truth = {"stall": float(m["frac"]), "rate": float(t["samples"]) / float(t["total"]), "samples": int(t["samples"])}
    # The run's own short summary was printed at the end of `stallscope run`.
    assert "stallscope: " in r.stderr and "samples/s" in r.stderr, r.stderr
    return rep, truth, r


def check_figures(rep, truth):
    assert rep["schema"] == "stallscope.report/1" and rep["mode"] == "cpu"
    assert rep["samples"] == truth["samples"], (rep["samples"], truth)
    assert abs(rep["stall"]["fraction"] - truth["stall"]) <= 0.03 + 0.005, (rep["stall"], truth)
    assert abs(rep["samples_per_s"] - truth["rate"]) <= 0.05 * truth["rate"], (rep["samples_per_s"], truth)
    causes = rep["stall"]["by_cause"]  # waiting in next(), and starting the loader (in iter())
    assert causes["data_wait"] + causes["loader_start"] == pytest.approx(rep["stall"]["seconds"])


def ids(rep):
    return {x["id"] for x in rep["recommendations"]}


def advised_flags(rep):
    """The script's flags for the what-if model's advised setting."""
    best = rep["whatif"]["best"]
    f = ["--workers", str(best["num_workers"])]
    if best["num_workers"] > 0:
        f += ["--prefetch-factor", str(best["prefetch_factor"])]
        if best["persistent_workers"]:
            f.append("--persistent")
    return f


def follow_advice(script, args, rep, reps=2):
    """Runs the script (without stallscope) with its original flags and with the advice applied,
    interleaved; returns (original, advised) median samples/s by the script's own clock."""
    rates = {"original": [], "advised": []}
    for _ in range(reps):
        for which, extra in (("original", []), ("advised", advised_flags(rep))):
            r = subprocess.run([sys.executable, str(EXAMPLES / script), *args, *extra], capture_output=True,
                               text=True, timeout=180)
            assert r.returncode == 0, r.stderr
            t = THROUGHPUT.search(r.stdout)
            rates[which].append(float(t["samples"]) / float(t["total"]))
    return statistics.median(rates["original"]), statistics.median(rates["advised"])


def check_advice_holds(script, args, rep):
    before, after = follow_advice(script, args, rep)
    # Interleaved medians; 3 % of room for the noise of a shared 2-core machine.
    assert after >= 0.97 * before, (advised_flags(rep), before, after, rep["whatif"]["candidates"][:3])
    return before, after


def test_slow_getitem_needs_workers(tmp_path):
    rep, truth, _ = report_for(tmp_path, "slow_getitem.py", "--epochs", "2", "--batches", "30")
    check_figures(rep, truth)
    assert truth["stall"] > 0.6  # by construction 0.80
    assert "increase_num_workers" in ids(rep)
    assert rep["loader"]["num_workers"] == 0 and rep["queue"]["mean_ready"] is None
    before, after = check_advice_holds("slow_getitem.py", ["--epochs", "2", "--batches", "30"], rep)
    assert after >= 1.5 * before  # a 16 ms wait per 4 ms step, hidden by workers


def test_compute_bound_gets_no_speed_advice(tmp_path):
    rep, truth, _ = report_for(tmp_path, "compute_bound.py", "--epochs", "1", "--batches", "120", "--step-ms", "50")
    check_figures(rep, truth)
    # 120 steps of 50 ms: the first batch's wait (worker start-up, about 0.35 s here) is amortised.
    # With 80 steps the loop's own stall was 7.7-8.5 %, too near the bound on a loaded machine.
    assert truth["stall"] < 0.10
    assert not rep["data_bound"]
    assert not (ids(rep) & SPEED_IDS), rep["recommendations"]


def test_respawning_workers_get_persistent_workers(tmp_path):
    args = ["--epochs", "4", "--batches", "24", "--init-ms", "250"]
    rep, truth, _ = report_for(tmp_path, "respawn_workers.py", *args)
    check_figures(rep, truth)
    assert "enable_persistent_workers" in ids(rep), rep["recommendations"]
    assert rep["loader"]["respawned_epochs"] == 3
    check_advice_holds("respawn_workers.py", args, rep)


def test_workers_that_cost_more_than_they_save_are_dropped(tmp_path):
    # 6 batches of 8 ms an epoch against 250 ms to start workers: loading inside the loop is faster
    # than starting workers at all, even once.
    args = ["--epochs", "4", "--batches", "6", "--init-ms", "250"]
    rep, truth, _ = report_for(tmp_path, "respawn_workers.py", *args)
    check_figures(rep, truth)
    assert rep["whatif"]["best"]["num_workers"] == 0, rep["whatif"]["best"]
    assert "reduce_num_workers" in ids(rep), rep["recommendations"]
    before, after = check_advice_holds("respawn_workers.py", args, rep)
    assert after >= 1.2 * before


def test_batches_of_many_tensors_from_workers_get_no_workers(tmp_path):
    # Batches of 33 small tensors (a dict of 32 fields, and the labels) from 2 persistent workers:
    # a worker collates each into a shared-memory segment of its own and the training thread
    # receives them one by one. Without workers the loop ran 2.2x as fast on a 2-core VM. The
    # workers' dl.batch gives the layout; the model takes the collate into shared memory off the
    # fetch for no workers, and advises it (before, it kept the workers: "no setting helps").
    # Samples that cost nothing to build (--sleep-ms 0): the hand-off is most of the workers' cost.
    # With 0.3 ms per sample the model's fit on a fast day of the VM (27 % high for the recorded
    # workers, which it prices short of the hand-off's waits) hid the gain (7.5 % predicted, 1.33x
    # measured); docs/decisions.md, "The hand-off's price between a slow and a fast machine".
    rep, truth, _ = report_for(tmp_path, "many_tensors.py", "--sleep-ms", "0")
    check_figures(rep, truth)
    w = rep["whatif"]
    assert rep["loader"]["num_workers"] == 2 and rep["data_bound"]
    assert w["inputs"]["batch_tensors"] == 33 and w["inputs"]["share_cpu_ms"] > 0, w["inputs"]
    assert w["best"]["num_workers"] == 0, (w["best"], w["candidates"][:3])
    assert "reduce_num_workers" in ids(rep), rep["recommendations"]
    before, after = check_advice_holds("many_tensors.py", ["--sleep-ms", "0"], rep)
    assert after >= 1.5 * before  # 4.6x on a fast day


def test_oversubscribed_workers_get_fewer(tmp_path):
    # 48 batches (1.2 s of loop): 8 workers on 2 cores preempt the loop, and a preemption just
    # outside stallscope's span counts in the script's wait only. The hooks read their CPU clocks
    # inside the span and the script frees each batch in the step's time (docs/decisions.md:
    # "Clock reads inside the dl.next span"); before, a loaded CI machine saw the report 3.6 points
    # under the script.
    args = ["--epochs", "1", "--batches", "48"]
    rep, truth, _ = report_for(tmp_path, "oversubscribed.py", *args)
    check_figures(rep, truth)
    assert "reduce_num_workers" in ids(rep), rep["recommendations"]
    check_advice_holds("oversubscribed.py", args, rep)
    lives = [(w["pid"], w["life_s"], w["runq_delay_fraction"]) for w in rep["workers"]]
    if not os.path.exists("/proc/self/schedstat"):
        # A kernel without schedstat: no run-queue figure is measured, and none is made up.
        assert all(w["runq_delay_fraction"] is None for w in rep["workers"]), lives
        return
    assert all(w["runq_delay_fraction"] is not None for w in rep["workers"]), lives
    assert max(w["runq_delay_fraction"] for w in rep["workers"]) > 0.2


def test_iterable_dataset(tmp_path):
    # 40 batches an epoch (0.8 s in all): the script times next() around stallscope's span, so one
    # preemption of the loop just outside the span (16 ms seen on a loaded CI machine) counts in the
    # script's wait and not in the report's; over a 0.44 s run that alone was 3.6 points.
    rep, truth, _ = report_for(tmp_path, "iterable_dataset.py", "--epochs", "2", "--batches", "40")
    check_figures(rep, truth)
    assert rep["loader"]["dataset_type"] == "iterable"
    assert rep["queue"]["empty_fraction"] is not None


WORKLOAD = REPO / "bench" / "advice_workload.py"


def workload_rate(flags):
    r = subprocess.run([sys.executable, str(WORKLOAD), *flags], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("RESULT "))
    return float(line.split()[3])


def workload_flags(c):
    f = ["--workers", str(c["num_workers"])]
    if c["num_workers"] > 0:
        f += ["--prefetch", str(c["prefetch_factor"]), "--persistent", str(int(c["persistent_workers"]))]
    if c.get("torch_threads"):
        f += ["--threads", str(c["torch_threads"])]
    return f


def test_torch_threads_beside_cpu_bound_workers_are_cut_to_one(tmp_path):
    # 1 ms of CPU per sample in __getitem__, an MLP step (hidden 1024) on torch's default
    # intra-op threads (the machine's cores), no workers: the model advises workers, and torch on
    # one thread beside them (its intra-op threads spin in next() and wait for each other beside
    # busy workers). On this loop the advice is worth clearly more than the 3 % asked below in every
    # round side by side; two other loops measured the machine's noise instead (docs/decisions.md,
    # "The thread-advice truth test ...").
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one core: torch runs one intra-op thread already")
    flags = ["--cpu-ms", "1.0", "--batches", "40", "--hidden", "1024"]
    db = tmp_path / "threads.db"
    r = run_recorded(db, [WORKLOAD, *flags, "--workers", "0"], timeout=180)
    assert r.rc == 0, r.stderr
    out = subprocess.run([str(LAUNCHER), "report", "--json", str(db)], capture_output=True, text=True, check=True)
    rep = json.loads(out.stdout)
    w = rep["whatif"]
    assert w["available"] and w["inputs"]["torch_threads"] >= 2, w
    assert "limit_torch_threads" in ids(rep), (rep["recommendations"], w["threads_gain"], w["min_gain"])
    advised = w["thread_candidates"][w["threads_best"]]
    assert advised["torch_threads"] == 1 and advised["num_workers"] > 0, advised
    # Follow it: against the original and the DataLoader advice alone, by the loop's own clock, in
    # five rounds of the three side by side (the order turns each round). The ratios are taken within
    # a round and their median is asked to beat both, with 3 % of room for the noise of a shared
    # machine: a CI machine's load drifts between rounds (one setting's runs spread 23 % there), and
    # two runs side by side see the same drift, which medians of each setting alone do not cancel.
    runs = {"original": [*flags, "--workers", "0"], "loader_alone": [*flags, *workload_flags(w["best"])],
            "advised": [*flags, *workload_flags(advised)]}
    names = list(runs)
    rates = {k: [] for k in names}
    for i in range(5):
        for k in names[i % 3:] + names[:i % 3]:
            rates[k].append(workload_rate(runs[k]))
    vs = {
        k: statistics.median(a / b for a, b in zip(rates["advised"], rates[k], strict=True))
        for k in ("original", "loader_alone")
    }
    why = (vs, rates, w["threads_gain"], w["min_gain"])
    assert vs["original"] >= 0.97, why
    assert vs["loader_alone"] >= 1.03, why


def test_intra_op_threads_waiting_beside_more_workers_than_cores_are_seen_and_cut(tmp_path):
    # 1 ms of CPU per sample in __getitem__, 3 persistent workers on a 2-core machine, the step on
    # torch's 2 intra-op threads: recorded like this, each step's parallel regions take several
    # times their work in wall time (the threads waiting for each other while the workers hold the
    # cores; docs/decisions.md, "The intra-op threads' wait beside busy workers, measured"). The
    # report says so, from the recording itself, and advises one thread; followed, the loop is
    # faster, and the model's figure for it is within 25 % of the run's own clock.
    if (os.cpu_count() or 1) != 2:
        pytest.skip("the waiting measured here is a 2-core machine's (3 workers and 2 threads on 2 cores)")
    flags = ["--cpu-ms", "1.0", "--batches", "50"]
    original = [*flags, "--workers", "3", "--persistent", "1"]
    db = tmp_path / "wait.db"
    r = run_recorded(db, [WORKLOAD, *original], timeout=180)
    assert r.rc == 0, r.stderr
    out = subprocess.run([str(LAUNCHER), "report", "--json", str(db)], capture_output=True, text=True, check=True)
    rep = json.loads(out.stdout)
    w = rep["whatif"]
    assert w["available"] and w["inputs"]["torch_threads"] == 2, w
    advice = next((x for x in rep["recommendations"] if x["id"] == "limit_torch_threads"), None)
    assert advice is not None, (rep["recommendations"], w["threads_gain"], w["min_gain"], w["inputs"])
    ev = advice["evidence"]
    # The regions' wall against their work shared by the 2 threads: mostly waiting.
    assert ev["parallel_wait_ms"] >= 0.5 * ev["parallel_region_ms"], ev
    assert "of the threads waiting for each other" in advice["message"], advice["message"]
    advised = w["thread_candidates"][w["threads_best"]]
    assert advised["torch_threads"] == 1 and advised["num_workers"] > 0, advised
    # Follow it: five rounds of the two side by side (the order turns each round), the ratio taken
    # within a round.
    runs = {"original": original, "advised": [*flags, *workload_flags(advised)]}
    names = list(runs)
    rates = {k: [] for k in names}
    for i in range(5):
        for k in names[i % 2:] + names[:i % 2]:
            rates[k].append(workload_rate(runs[k]))
    gain = statistics.median(a / b for a, b in zip(rates["advised"], rates["original"], strict=True))
    why = (gain, rates, advised, w["threads_gain"])
    assert gain >= 1.03, why
    measured = statistics.median(rates["advised"])
    assert abs(advised["samples_per_s"] - measured) <= 0.25 * measured, why
