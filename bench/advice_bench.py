"""Advice that holds: for each workload, record the loop under stallscope, take the report's
advice, and run the advised setting, the original and a sweep of other settings in interleaved
repetitions, each timed by the loop's own clock (bench/advice_workload.py, without stallscope).
Prints, per workload: the advice, predicted vs measured samples/s for every setting swept (and the
spread of its runs, (max - min) / median: the machine's noise that the error is read against), the
sweep's best, and whether the advice held (not slower than the original, within 10 % of the
best); then the prediction error over all (workload, setting) pairs against the goals (median at
most 10 %, no pair worse than 25 %), and apart for the settings the report marks uncertain (*:
torch's intra-op threads beside workers that keep more threads runnable than there are cores) and
the others.

Where the report advises preloading tcmalloc (allocator_page_faults: the step faults in fresh
pages every step), that advice is followed first: the loop as written and with tcmalloc run in
interleaved pairs (the gain against the report's estimate), and the loop is recorded again with
tcmalloc; the DataLoader advice comes from that recording and every run after it has tcmalloc.

The verdict compares medians, and the sweep's best is the highest of many noisy medians (a lucky
run makes a setting the best). So after the sweep the settings the verdict rests on (the original,
the advised, the two best of the whole sweep and the best of the DataLoader settings alone) run
--confirm more interleaved rounds, and every figure is the median of all its runs.

    python3 bench/advice_bench.py [--set tuned|judged|all] [--reps N] [--confirm N] [--only NAME ...] [--json FILE]
                                  [--build DIR]

Two sets of loops: the *tuned* set (bench/advice_workload.py: synthetic costs the model's constants
were fitted on) and the *judged* set (bench/advice_pipelines.py: real pipelines, JPEG decoding with
Pillow, Lightning, text tokenising, HF Trainer), which no change to the model is fitted on. Each
set's prediction error is printed apart, with its goals; every loop is recorded a second time and
the advice of the two recordings compared.

A change to the model can be tried first against a finished run, without running a loop: --again
DIR FILE reports the recordings that run kept in DIR again with this build and sets each prediction
beside the samples/s the run measured (FILE, its --json), with the same error figures.

    python3 bench/advice_bench.py --again /tmp/advice-bench-XXXX figures.json [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PROG = os.path.join(HERE, "advice_workload.py")
PIPELINES = os.path.join(HERE, "advice_pipelines.py")

# The tuned set: the loops the model's constants were fitted on (bench/advice_workload.py).
# name -> (what it is, the workload's flags, its own DataLoader settings, worker counts swept)
WORKLOADS = {
    "cpu_getitem": ("__getitem__ computes (1 ms of CPU per sample), light step",
                    ["--cpu-ms", "1.0", "--batches", "50"], {"workers": 0}, [0, 1, 2, 3, 4]),
    "io_getitem": ("__getitem__ waits (0.8 ms of sleep per sample, as a slow disk), light step",
                   ["--sleep-ms", "0.8", "--batches", "50"], {"workers": 0}, [0, 1, 2, 4, 8]),
    "heavy_step": ("the step uses both cores (wide MLP, 2 intra-op threads), 0.5 ms of CPU per sample",
                   ["--cpu-ms", "0.5", "--hidden", "2048", "--layers", "3", "--batches", "40"],
                   {"workers": 0}, [0, 1, 2, 3]),
    "compute_bound": ("a slow step and a cheap fetch: the queue stays full",
                      ["--cpu-ms", "0.05", "--hidden", "2048", "--layers", "3", "--batches", "40"],
                      {"workers": 2}, [0, 1, 2, 3]),
    "bursty": ("mostly fast fetches, every 8th group of 32 samples 25x slower (waiting)",
               ["--sleep-ms", "0.1", "--burst-every", "8", "--burst-x", "25", "--batches", "64"],
               {"workers": 2}, [1, 2, 3, 4, 6]),
    "spawn_startup": ("spawned workers re-created every epoch, 4 short epochs",
                      ["--cpu-ms", "0.3", "--epochs", "4", "--batches", "16", "--start-method", "spawn"],
                      {"workers": 2}, [0, 1, 2]),
    "mixed": ("half computing, half waiting (0.5 ms CPU + 0.5 ms sleep per sample)",
              ["--cpu-ms", "0.5", "--sleep-ms", "0.5", "--batches", "50"], {"workers": 1}, [0, 1, 2, 3, 4]),
}

# The judged set: real pipelines (bench/advice_pipelines.py) the model is judged on and never tuned
# on; a change that fits the model to them must be judged on loops of its own again. Their errors
# are reported apart, against the judged set's goals: median at most 15 %, worst at most 30 %.
JUDGED = {
    "jpeg_plain": ("JPEG ImageFolder, Pillow decode + random resized crop + flip, small CNN, plain loop",
                   [PIPELINES, "--pipeline", "jpeg", "--epochs", "2", "--batches", "20"], {"workers": 0},
                   [0, 1, 2, 3]),
    "jpeg_lightning": ("the same JPEGs and CNN as a LightningModule under pytorch_lightning's Trainer",
                       [PIPELINES, "--pipeline", "lightning", "--epochs", "2", "--batches", "20"], {"workers": 0},
                       [0, 1, 2]),
    "jpeg_restarts": ("the JPEG loop with 2 workers started again every epoch, 4 short epochs",
                      [PIPELINES, "--pipeline", "jpeg", "--epochs", "4", "--batches", "8"], {"workers": 2},
                      [0, 1, 2, 3]),
    "text_tokenise": ("sentences cleaned in Python and BPE-tokenised (HF tokenizers), a transformer layer",
                      [PIPELINES, "--pipeline", "text", "--epochs", "2", "--batches", "20"], {"workers": 0},
                      [0, 1, 2]),
    "hf_trainer": ("the same tokenised sentences, a small BERT under transformers' Trainer",
                   [PIPELINES, "--pipeline", "hf", "--epochs", "2", "--batches", "8"], {"workers": 0},
                   [0, 1, 2]),
}
SETS = {"tuned": WORKLOADS, "judged": JUDGED}


def workload_argv(flags: list[str]) -> list[str]:
    """The command of a workload: its flags, after bench/advice_workload.py unless they name their
    own program first."""
    return flags if flags and flags[0].endswith(".py") else [PROG, *flags]


def setting_flags(s: dict) -> list[str]:
    f = ["--workers", str(s["workers"])]
    if s["workers"] > 0:
        f += ["--prefetch", str(s.get("prefetch", 2)), "--persistent", str(int(s.get("persistent", False)))]
    if s.get("threads"):
        f += ["--threads", str(s["threads"])]
    return f


def key(s: dict) -> tuple:
    w = s["workers"]
    return (w, s.get("prefetch", 2) if w else None, bool(s.get("persistent", False)) if w else None,
            s.get("threads", 0))


def describe(s: dict) -> str:
    d = "num_workers=0" if s["workers"] == 0 else (
        f"num_workers={s['workers']}, prefetch_factor={s.get('prefetch', 2)}, "
        f"persistent_workers={bool(s.get('persistent', False))}")
    return d + (f", torch threads {s['threads']}" if s.get("threads") else "")


def run_loop(flags: list[str], extra_env=None) -> float:
    env = dict(os.environ, **(extra_env or {}))
    p = subprocess.run([sys.executable, *workload_argv(flags)], capture_output=True, text=True, env=env,
                       timeout=600)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return float(line.split()[3])
    raise RuntimeError(f"{' '.join(workload_argv(flags))} failed: {p.stderr.strip().splitlines()[-1:]}")


def record(stallscope: str, flags: list[str], db: str, extra_env=None) -> dict:
    p = subprocess.run([stallscope, "run", "--force", "-o", db, "--", sys.executable, *workload_argv(flags)],
                       capture_output=True, text=True, timeout=600, env=dict(os.environ, **(extra_env or {})))
    if p.returncode != 0:
        raise RuntimeError(f"stallscope run failed: {p.stderr.strip().splitlines()[-1:]}")
    r = subprocess.run([stallscope, "report", "--json", db], capture_output=True, text=True, timeout=300)
    return json.loads(r.stdout)


def from_model(c: dict) -> dict:
    s = {"workers": c["num_workers"]}
    if s["workers"] > 0:
        s["prefetch"] = c["prefetch_factor"]
        s["persistent"] = c["persistent_workers"]
    if c.get("torch_threads"):
        s["threads"] = c["torch_threads"]
    return s


def loader_advice(rep: dict, base: dict) -> dict:
    """The setting the report's DataLoader recommendations lead to (the what-if model's advised
    one), or the original when there is no such advice."""
    speed_ids = {"increase_num_workers", "reduce_num_workers", "increase_prefetch_factor",
                 "enable_persistent_workers"}
    speed = [r for r in rep["recommendations"] if r["id"] in speed_ids]
    if not speed:
        return dict(base)
    w = rep["whatif"]
    if any(r["evidence"].get("with_torch_threads") for r in speed):  # advised together with one thread
        return from_model(w["thread_candidates"][w["threads_best"]])
    return from_model(w["best"])


def about_same(rep: dict) -> set:
    """The keys of the settings a report cannot tell from its advice (whatif.about_the_same)."""
    w = rep["whatif"]
    return {key(from_model(c)) for c in w.get("about_the_same", [])} if w.get("available") else set()


def advised_setting(rep: dict, base: dict) -> dict:
    """The setting all the report's speed recommendations lead to: the DataLoader advice, or torch
    on one thread at a worker count's best setting (limit_torch_threads)."""
    w = rep["whatif"]
    if any(r["id"] == "limit_torch_threads" for r in rep["recommendations"]):
        return from_model(w["thread_candidates"][w["threads_best"]])
    return loader_advice(rep, base)


# What the allocator advice (allocator_page_faults) says to preload.
TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"


def allocator_first(stallscope: str, name: str, flags: list[str], rep: dict, tmp: str, reps: int):
    """The allocator advice comes before the DataLoader's: it changes the step the DataLoader advice
    is modelled on. Where the report gives it, runs the loop as written and with tcmalloc preloaded
    in `reps` interleaved pairs at the recorded setting, prints the measured gain beside the report's
    estimate, and records the loop again with tcmalloc for the DataLoader advice. Returns (the
    environment the rest runs in, the report to take the DataLoader advice from, the figures)."""
    adv = [r for r in rep["recommendations"] if r["id"] == "allocator_page_faults"]
    if not adv:
        return {}, rep, None
    env = {"LD_PRELOAD": TCMALLOC}
    if not os.path.exists(TCMALLOC):
        raise RuntimeError(f"{TCMALLOC} missing (scripts/setup.sh installs libtcmalloc-minimal4)")
    plain, tc = [], []
    for _ in range(reps):
        plain.append(run_loop(flags))
        tc.append(run_loop(flags, env))
    gain = statistics.median(tc) / statistics.median(plain)
    ev = adv[0]["evidence"]
    fig = {"faults_per_step": ev["minor_faults_per_step"], "kernel_share": ev["kernel_cpu_share"],
           "bound": ev["expected_speedup_bound"], "as_written": statistics.median(plain),
           "tcmalloc": statistics.median(tc), "gain": gain,
           # Not slower. The report's figure is an estimate (the kernel's share given back), not a bound:
           # its error is printed beside the measured gain.
           "held": gain >= 0.97}
    rep2 = record(stallscope, flags, os.path.join(tmp, f"{name}-tcmalloc.db"), env)
    return env, rep2, fig


def print_errors(errors: list[float], flagged: list[float], plain: list[float]) -> None:
    """The prediction error over all pairs against the goals, then apart for the pairs the report
    marks uncertain and the others."""
    print(f"\nprediction error over {len(errors)} (workload, setting) pairs: median "
          f"{100 * statistics.median(errors):.1f}% (goal <= 10%), max {100 * max(errors):.1f}% (goal <= 25%)")
    for label, v in (("marked uncertain (*)", flagged), ("not marked", plain)):
        if v:
            print(f"  of them {label}: {len(v)} pairs, median {100 * statistics.median(v):.1f}%, "
                  f"max {100 * max(v):.1f}%")


def again(stallscope: str, folder: str, figures: str, names: list[str] | None) -> int:
    """Reports a finished run's recordings again and sets each prediction beside what that run
    measured; prints the error figures as a run does. Measures nothing."""
    try:
        with open(figures) as f:
            measured = json.load(f)
    except (OSError, ValueError) as e:
        print(f"advice_bench: cannot read {figures}: {e}; pass the --json file of a finished run", file=sys.stderr)
        return 2
    if not os.path.isdir(folder):
        print(f"advice_bench: {folder} is not a folder; pass the one a run printed (its recordings)", file=sys.stderr)
        return 2
    errors, flagged_errors, plain_errors = [], [], []
    for name, res in measured.items():
        if name.startswith("_") or (names and name not in names) or not isinstance(res, dict) or "rows" not in res:
            continue
        db = next((p for p in (os.path.join(folder, f"{name}-tcmalloc.db"), os.path.join(folder, f"{name}.db"))
                   if os.path.exists(p)), None)
        if db is None:
            print(f"\n{name}: no recording in {folder}")
            continue
        r = subprocess.run([stallscope, "report", "--json", db], capture_output=True, text=True, timeout=300)
        w = json.loads(r.stdout)["whatif"]
        if not w.get("available"):
            print(f"\n{name}: what-if not available: {w.get('why_not')}")
            continue
        predicted = {describe(from_model(c)): c["samples_per_s"]
                     for c in w["candidates"] + w.get("thread_candidates", [])}
        flagged = {describe(from_model(c)) for c in w["candidates"] if c.get("uncertain")}
        print(f"\n{name}: {os.path.basename(db)}")
        print(f"  {'setting':<62}{'predicted':>10}{'measured':>10}{'error':>8}")
        for row in res["rows"]:
            p, m = predicted.get(row["setting"]), row["measured"]
            mark = " *" if row["setting"] in flagged else ""
            if p is None:
                print(f"  {row['setting'] + mark:<62}{'-':>10}{m:>10.1f}{'-':>8}")
                continue
            e = p / m - 1
            errors.append(abs(e))
            (flagged_errors if mark else plain_errors).append(abs(e))
            print(f"  {row['setting'] + mark:<62}{p:>10.1f}{m:>10.1f}{100 * e:>+7.1f}%")
    if not errors:
        print("advice_bench: no pair to compare", file=sys.stderr)
        return 1
    print_errors(errors, flagged_errors, plain_errors)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions per setting")
    ap.add_argument("--confirm", type=int, default=3,
                    help="more interleaved rounds of the settings the verdict rests on (default 3)")
    ap.add_argument("--only", nargs="*", default=None, help="workloads to run (default: all of --set)")
    ap.add_argument("--set", choices=["tuned", "judged", "all"], default="all",
                    help="the loops the model was tuned on, the real pipelines it is judged on, or both")
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument("--build", default=os.environ.get("STALLSCOPE_BUILD", os.path.join(REPO, "build")))
    ap.add_argument("--again", nargs=2, metavar=("DIR", "FILE"), default=None,
                    help="report the recordings a finished run kept in DIR again, against the samples/s it "
                         "measured (FILE, its --json); runs no loop")
    a = ap.parse_args()
    stallscope = os.path.join(a.build, "bin", "stallscope")
    if not os.access(stallscope, os.X_OK):
        print(f"advice_bench: {stallscope} not found; build first (cmake --build build)", file=sys.stderr)
        return 2
    if a.again:
        return again(stallscope, a.again[0], a.again[1], a.only)
    every = {**WORKLOADS, **JUDGED}
    set_of = {n: ("judged" if n in JUDGED else "tuned") for n in every}
    unknown = [n for n in (a.only or []) if n not in every]
    if unknown:
        print(f"advice_bench: no workload {', '.join(unknown)}; the workloads: {', '.join(every)}", file=sys.stderr)
        return 2
    names = a.only or [n for n in every if a.set in ("all", set_of[n])]
    by_set = {"tuned": [], "judged": []}  # prediction errors of each set's pairs
    tmp = tempfile.mkdtemp(prefix="advice-bench-")
    print(f"advice bench: the recordings are kept in {tmp}")
    all_errors, results, held_all = [], {}, True
    flagged_errors, plain_errors = [], []  # the pairs the report marks uncertain, and the others
    print(f"advice bench: {os.cpu_count()} CPUs, {a.reps} interleaved repetitions per setting, {a.confirm} more "
          "of those the verdict rests on; samples/s by each loop's own clock (the median of its runs)")
    for name in names:
        what, flags, base, sweep_n = every[name]
        base = dict(base)
        if base["workers"] > 0:
            base.setdefault("prefetch", 2)
            base.setdefault("persistent", False)
        rep = record(stallscope, flags + setting_flags(base), os.path.join(tmp, f"{name}.db"))
        env, rep, alloc = allocator_first(stallscope, name, flags + setting_flags(base), rep, tmp, a.reps)
        w = rep["whatif"]
        if not w.get("available"):
            print(f"\n{name}: what-if not available: {w.get('why_not')}")
            held_all = False
            continue
        advised = advised_setting(rep, base)
        predicted = {key(from_model(c)): c["samples_per_s"]
                     for c in w["candidates"] + w.get("thread_candidates", [])}
        # The settings whose figure the report marks uncertain (torch's threads beside busy workers).
        flagged = {key(from_model(c)) for c in w["candidates"] if c.get("uncertain")}
        settings = {key(base): base, key(advised): advised}
        settings.setdefault(key(loader_advice(rep, base)), loader_advice(rep, base))
        if not advised.get("threads"):  # the advice with torch on one thread, which the model also predicts
            settings.setdefault(key(dict(advised, threads=1)), dict(advised, threads=1))
        for n in sweep_n:
            for threads in (0, 1):  # torch's default intra-op threads, and one
                s = {"workers": n}
                if n > 0:
                    s["prefetch"] = base.get("prefetch", 2) if base["workers"] else 2
                    s["persistent"] = (base.get("persistent", False) if base["workers"]
                                       else advised.get("persistent", False))
                if threads:
                    s["threads"] = threads
                settings.setdefault(key(s), s)
        measured = {k: [] for k in settings}
        for _ in range(a.reps):
            for k, s in settings.items():
                measured[k].append(run_loop(flags + setting_flags(s), env))
        med = {k: statistics.median(v) for k, v in measured.items()}
        ranked = sorted(med, key=med.get, reverse=True)
        decisive = list(dict.fromkeys([key(base), key(advised), *ranked[:2],
                                       max((k for k in med if not k[3]), key=med.get)]))
        for _ in range(a.confirm):
            for k in decisive:
                measured[k].append(run_loop(flags + setting_flags(settings[k]), env))
        med = {k: statistics.median(v) for k, v in measured.items()}
        best_k = max(med, key=med.get)  # over the whole sweep, torch threads included
        loader_best_k = max((k for k in med if not k[3]), key=med.get)  # DataLoader settings alone
        held = med[key(advised)] >= med[key(base)] * 0.97 and med[key(advised)] >= 0.90 * med[best_k]
        held_all &= held
        print(f"\n{name}: {what}")
        if alloc:
            print(f"  allocator advice (allocator_page_faults: {alloc['faults_per_step']:,.0f} page faults a step, "
                  f"{100 * alloc['kernel_share']:.0f}% of the process's CPU in the kernel): tcmalloc preloaded "
                  f"{alloc['as_written']:.1f} -> {alloc['tcmalloc']:.1f} samples/s ({alloc['gain']:.2f}x; the report's "
                  f"estimate {alloc['bound']:.2f}x, {100 * (alloc['bound'] / alloc['gain'] - 1):+.0f}%): "
                  f"{'held' if alloc['held'] else 'DID NOT HOLD'}. "
                  "Below, the loop runs with tcmalloc, recorded again")
            held &= alloc["held"]
            held_all &= alloc["held"]
        else:
            print("  allocator advice: none")
        print(f"  recorded {describe(base)}: {rep['samples_per_s']:.1f} samples/s under stallscope, model fit "
              f"{100 * w['fit_error']:+.1f}% ({w['confidence']}); bound: {w['bound_text']}")
        adv_ids = [r["id"] for r in rep["recommendations"]]
        print(f"  advice: {describe(advised) if key(advised) != key(base) else 'none (keep the setting)'}"
              f"   [{', '.join(adv_ids) or '-'}]")
        print(f"  {'setting':<62}{'predicted':>10}{'measured':>10}{'error':>8}{'runs spread':>13}")
        rows = []
        for k, s in sorted(settings.items(), key=lambda kv: (kv[0][3], kv[0][0], kv[0][1] or 0, kv[0][2] or False)):
            p = predicted.get(k)
            err = (p / med[k] - 1) if p else None
            if err is not None:
                all_errors.append(abs(err))
                by_set[set_of[name]].append(abs(err))
                (flagged_errors if k in flagged else plain_errors).append(abs(err))
            tag = (" (original)" if k == key(base) else "") + (" (advised)" if k == key(advised) else "") + (
                " (best)" if k == best_k else "") + (" *" if k in flagged else "")
            spread = (max(measured[k]) - min(measured[k])) / med[k]  # the machine's noise on this setting
            print(f"  {describe(s) + tag:<62}{(f'{p:.1f}' if p else '-'):>10}{med[k]:>10.1f}"
                  f"{(f'{100 * err:+.1f}%' if err is not None else '-'):>8}{f'{100 * spread:.0f}%':>13}")
            rows.append({"setting": describe(s), "predicted": p, "measured": med[k], "runs": measured[k]})
        print(f"  advised / original {med[key(advised)] / med[key(base)]:.2f}x (goal >= 1, noise 3%), advised / best "
              f"{med[key(advised)] / med[best_k]:.2f} (goal >= 0.90; best of the DataLoader settings alone: "
              f"{med[key(advised)] / med[loader_best_k]:.2f}): {'held' if held else 'DID NOT HOLD'}")
        # The same loop recorded again: the same advice, or one the sweep measured within its noise.
        rep_again = record(stallscope, flags + setting_flags(base), os.path.join(tmp, f"{name}-again.db"), env)
        again_advised = advised_setting(rep_again, base) if rep_again["whatif"].get("available") else dict(base)
        same = key(again_advised) == key(advised)
        # Or a range that covers both: the second advice among the settings the first report cannot
        # tell from its advice, or the first among the second's.
        in_range = not same and (key(again_advised) in about_same(rep) or key(advised) in about_same(rep_again))
        close = None
        if not same and key(again_advised) in med:
            noise = max((max(measured[k]) - min(measured[k])) / med[k] for k in (key(advised), key(again_advised)))
            close = abs(med[key(again_advised)] / med[key(advised)] - 1) <= noise
        verdict = ("" if same else " (about the same as the first, by both reports' ranges)" if in_range else
                   " (not in the sweep)" if close is None else
                   " (measured within the noise of the first advice)" if close else " (measured apart from the first)")
        print(f"  recorded again: advice {'the same' if same else describe(again_advised)}{verdict}")
        results[name] = {"advised": describe(advised), "original": describe(base), "held": held, "rows": rows,
                         "best": describe(settings[best_k]), "loader_best": describe(settings[loader_best_k]),
                         "fit_error": w["fit_error"], "confidence": w["confidence"],
                         "loader_advised": describe(loader_advice(rep, base)),
                         "threads_gain": w.get("threads_gain"), "min_gain": w.get("min_gain"), "allocator": alloc,
                         "set": set_of[name], "advised_again": describe(again_advised),
                         "stable": same or in_range or bool(close)}
    if all_errors:
        errs = sorted(all_errors)
        med_err, max_err = statistics.median(errs), errs[-1]
        print_errors(errs, flagged_errors, plain_errors)
        print(f"advice held on {sum(r['held'] for r in results.values())} of {len(results)} workloads "
              f"(goal: all)")
        goals = {"tuned": (10, 25), "judged": (15, 30)}
        for set_name, e in by_set.items():
            if not e:
                continue
            ran = [r for r in results.values() if isinstance(r, dict) and r.get("set") == set_name]
            print(f"{set_name} set: {len(e)} pairs, median {100 * statistics.median(e):.1f}% (goal <= "
                  f"{goals[set_name][0]}%), worst {100 * max(e):.1f}% (goal <= {goals[set_name][1]}%); advice held on "
                  f"{sum(r['held'] for r in ran)} of {len(ran)}, the same from a second recording on "
                  f"{sum(r['stable'] for r in ran)} of {len(ran)}")
        results["_by_set"] = {k: {"pairs": len(v), "median": statistics.median(v), "max": max(v)}
                              for k, v in by_set.items() if v}
        results["_errors"] = {"median": med_err, "max": max_err, "pairs": len(errs),
                              "uncertain": {"pairs": len(flagged_errors),
                                            "max": max(flagged_errors) if flagged_errors else None},
                              "not_marked": {"pairs": len(plain_errors),
                                             "median": statistics.median(plain_errors) if plain_errors else None,
                                             "max": max(plain_errors) if plain_errors else None}}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if held_all else 1


if __name__ == "__main__":
    sys.exit(main())
