"""`stallscope tune` and `stallscope run --loader-args` on real PyTorch loops.

Tune runs the unmodified script with its own settings, then the settings the what-if model
proposes, each for a bounded number of steps, and prints the winner. These tests check that the
winner is really faster (measured again, apart from tune), that the script and its data are left as
they were, that nothing of the runs is left in the process table, that Ctrl-C stops it with what
was measured, that a script that cannot run gets one line and exit 1, and that it works under
PyTorch Lightning and the HF Trainer."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import LAUNCHER, LOADER_MODULE, PROGRAMS, base_env, wait_for, xvfb_display

pytestmark = pytest.mark.torch

# A loop whose __getitem__ waits 1.5 ms a sample (a slow disk), batches of 8, a 2 ms step: without
# workers each step waits 12 ms for its batch; workers hide most of it. It prints a checksum of
# every sample it trained on, so a run can be compared with another, and marks its processes with
# the word in TUNE_MARK for the process-table checks.
SLOW = textwrap.dedent("""
    import argparse, sys, time
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Slow(Dataset):
        def __len__(self):
            return 64 * 8

        def __getitem__(self, i):
            time.sleep(0.0015)
            return torch.full((4,), float(i))

    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--persistent", type=int, default=0)
    ap.add_argument("--prefetch", type=int, default=None)
    ap.add_argument("mark")
    a = ap.parse_args()
    kw = dict(batch_size=8, num_workers=a.workers)
    if a.workers:
        kw.update(persistent_workers=bool(a.persistent), prefetch_factor=a.prefetch)
    loader = DataLoader(Slow(), **kw)
    total = 0.0
    t0 = time.perf_counter()
    for _ in range(a.epochs):
        for x in loader:
            time.sleep(0.002)
            total += float(x.sum())
    print("RESULT", total, flush=True)
    print("LOOP_S", time.perf_counter() - t0, flush=True)
""")


def script(tmp_path):
    p = tmp_path / "slow_train.py"
    p.write_text(SLOW)
    return p


def digest(p) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def marked(mark: str) -> list[int]:
    """Pids whose command line holds `mark`."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if mark.encode() in f.read():
                        out.append(int(d))
            except OSError:
                pass
    return out


def tune(args, *, timeout=600, cwd=None, env=None):
    p = subprocess.run([str(LAUNCHER), "tune", *map(str, args)], capture_output=True, text=True,
                       env=env or base_env(), timeout=timeout, cwd=cwd)
    return p


def script_lines(prog, *args) -> dict:
    """Runs a test script without stallscope; its output lines as {first word: the rest}."""
    r = subprocess.run([sys.executable, prog, *args], capture_output=True, text=True, env=base_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    return dict(line.split(" ", 1) for line in r.stdout.splitlines())


def report(db):
    out = subprocess.run([str(LAUNCHER), "report", "--json", str(db)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.timed
def test_tune_finds_workers_that_are_really_faster(tmp_path):
    prog = script(tmp_path)
    before = digest(prog)
    mark = f"tune-mark-{os.getpid()}-a"
    out = tmp_path / "tune"
    p = tune(["--json", "--steps", "40", "--warmup", "5", "--candidates", "3", "-o", out, "--", sys.executable, prog,
              mark])
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["schema"] == "stallscope.tune/1"
    base = doc["baseline"]
    assert base["settings"] == {"num_workers": 0}
    assert base["status"] == "measured" and base["steps"] == 40
    assert 0.6 < base["measured"]["stall"] < 0.95, base
    assert doc["model"]["available"]
    # The model's 3, at most 2 climbs, and the fastest and the fastest with workers on one intra-op
    # thread (the baseline ran 2).
    assert 3 <= len(doc["candidates"]) <= 3 + 2 + 2
    for c in doc["candidates"]:
        assert c["loader"] == "tuned" and c["predicted"]["samples_per_s"] > 0
        assert os.path.exists(c["recording"]) and os.path.exists(c["log"])
        if c["status"] == "measured":
            assert c["steps"] == 40
            # The recording is of the setting asked for, applied without editing the script.
            cfg = report(c["recording"])["loader"]
            assert cfg["num_workers"] == c["settings"]["num_workers"], cfg
    win = doc["winner"]
    assert not win["is_baseline"]
    assert win["settings"]["num_workers"] >= 2
    assert win["gain"] >= 1.5, win
    # Cut at the step count, no run reached its end: the winner is the fastest after the warm-up,
    # and no whole-run figure is claimed.
    assert win["basis"] == "steady" and base["whole_run"] is None and base["gain"]["whole_run"] is None
    assert all(c["gain"]["whole_run"] is None for c in doc["candidates"])
    assert win["arguments"].startswith(f"num_workers={win['settings']['num_workers']}")
    # Nothing of the runs is left, and the script is as it was.
    assert marked(mark) == []
    assert digest(prog) == before
    # The winner holds apart from tune: the script run with its arguments pasted is faster.
    w = win["settings"]

    def timed(*flags):
        """(the loop's own seconds, its RESULT line)"""
        lines = script_lines(prog, "--epochs", "3", *flags, mark)
        return float(lines["LOOP_S"]), lines["RESULT"]

    own = min(timed()[0] for _ in range(2))
    flags = ["--workers", str(w["num_workers"]), "--persistent", str(int(w["persistent_workers"])), "--prefetch",
             str(w["prefetch_factor"])]
    pasted = min(timed(*flags)[0] for _ in range(2))
    assert pasted < own / 1.3, (own, pasted)
    assert timed()[1] == timed(*flags)[1]  # the same samples trained on


# One epoch of 40 batches whose __getitem__ waits 1 ms a sample, and a DataLoader that sets up each
# worker for 0.6 s (worker_init_fn: a connection, a large index): workers hide the wait once they
# run, but the whole epoch is over in about 0.4 s without them.
SHORT = textwrap.dedent("""
    import sys, time
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Slow(Dataset):
        def __len__(self):
            return 40 * 8

        def __getitem__(self, i):
            time.sleep(0.001)
            return torch.full((4,), float(i))

    def setup(_):
        time.sleep(0.6)

    total = 0.0
    for x in DataLoader(Slow(), batch_size=8, num_workers=0, worker_init_fn=setup):
        time.sleep(0.002)
        total += float(x.sum())
    print("RESULT", total, flush=True)
""")


@pytest.mark.timed
def test_tune_chooses_on_the_whole_run_where_every_run_ended(tmp_path):
    """tune gives every run its gain after the warm-up and over the whole run as launched; where
    every run that could win ended by itself, the winner is the fastest over the whole run. Here
    workers win after the warm-up and lose end to end (their set-up outlasts the epoch)."""
    prog = tmp_path / "short.py"
    prog.write_text(SHORT)
    out = tmp_path / "t"
    p = tune(["--json", "--steps", "100", "--warmup", "5", "--candidates", "3", "-o", out, "--", sys.executable, prog])
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    base = doc["baseline"]
    assert base["status"] == "ended" and base["whole_run"]["samples_per_s"] > 0, base
    assert base["gain"] == {"steady": 1.0, "whole_run": 1.0}
    ended = [c for c in doc["candidates"] if c["status"] == "ended"]
    assert ended and all(c["whole_run"]["samples_per_s"] > 0 for c in ended), doc["candidates"]
    # Workers are faster after the warm-up and slower over the whole run.
    workers = [c for c in ended if c["settings"]["num_workers"] > 0]
    assert any(c["gain"]["steady"] >= 1.3 for c in workers), [c["gain"] for c in workers]
    assert all(c["gain"]["whole_run"] < 0.9 for c in workers), [c["gain"] for c in workers]
    win = doc["winner"]
    assert win["basis"] == "whole run", win
    contenders = [base, *[c for c in doc["candidates"] if c["status"] != "stopped early" and c["whole_run"]]]
    best = max(contenders, key=lambda c: c["whole_run"]["samples_per_s"])
    assert win["recording"] == best["recording"] and win["settings"]["num_workers"] == 0, (win, best)
    assert win["gain"] == pytest.approx(best["gain"]["whole_run"]) and win["gains"] == best["gain"]
    # The table says so.
    text = tune(["--force", "--steps", "100", "--warmup", "5", "--candidates", "1", "-o", out, "--", sys.executable,
                 prog])
    assert text.returncode == 0, text.stderr
    assert "whole run" in text.stdout.splitlines()[1], text.stdout
    assert "The winner is the fastest over the whole run" in text.stdout


@pytest.mark.timed
def test_tune_text_table_and_refusals(tmp_path):
    prog = script(tmp_path)
    out = tmp_path / "t"
    mark = f"tune-mark-{os.getpid()}-b"
    p = tune(["--steps", "20", "--warmup", "3", "--candidates", "1", "--budget", "120", "-o", out, "--",
              sys.executable, prog, mark])
    assert p.returncode == 0, p.stderr
    assert "num_workers=0 (the script's)" in p.stdout
    assert "Paste into the DataLoader(...) call: num_workers=" in p.stdout
    assert 'stallscope run --loader-args "num_workers=' in p.stdout
    assert "[0] baseline:" in p.stderr
    doc = json.loads((out / "tune.json").read_text())  # kept beside the recordings
    assert doc["schema"] == "stallscope.tune/1" and os.path.exists(doc["winner"]["recording"])
    # `stallscope ui DIR` opens the runs as a set: the table of all of them over the compare view,
    # the baseline as A and the winner as B; `ui DIR 01` shows run 01 as B. The folder is moved
    # first: the recordings are found in it by name.
    moved = tmp_path / "moved"
    os.rename(out, moved)
    runs = [doc["baseline"], *doc["candidates"]]
    winner = next(i for i, r in enumerate(runs) if r["recording"] == doc["winner"]["recording"])
    with xvfb_display() as display:
        if display is not None:
            def ui(*extra):
                layout = tmp_path / "ui.json"
                r = subprocess.run([str(LAUNCHER), "ui", "--screenshot", str(tmp_path / "ui.png"), "--layout-dump",
                                    str(layout), str(moved), *extra], capture_output=True, text=True,
                                   env={**base_env(), "DISPLAY": f":{display}"}, timeout=120)
                assert r.returncode == 0, r.stderr
                return json.loads(layout.read_text())
            d = ui()
            assert d["state"] == "compare" and d["panels"][0]["name"] == "tune"
            rows = d["tune"]["rows"]
            assert len(rows) == len(runs)
            assert rows[0].startswith("A: 00 | ") and "(the script's)" in rows[0]
            assert "winner" in rows[winner] and sum("winner" in r for r in rows) == 1
            b = d["tune"]["b"]
            assert b == (winner if winner != 0 else 1) and rows[b].startswith("B: ")
            assert d["sides"][1]["panels"], "B is drawn"
            d = ui("01")
            assert d["tune"]["b"] == 1 and d["tune"]["rows"][1].startswith("B: 01 | ")
            assert runs[1]["arguments"] in d["tune"]["rows"][1]
            assert os.path.basename(runs[1]["recording"]) in " ".join(d["compare"]["figures"])
    # The dashboard (stallscope-ui) reads the folder, and `stallscope ui` runs it only where a display
    # is named; these refusals come before it is connected to.
    named = {**base_env(), "DISPLAY": ":999"}
    r = subprocess.run([str(LAUNCHER), "ui", str(moved), "99"], capture_output=True, text=True, env=named,
                       timeout=60)
    assert r.returncode == 2 and "'99' is not a run of" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    os.rename(moved, out)
    bad = subprocess.run([str(LAUNCHER), "ui", str(tmp_path)], capture_output=True, text=True, env=named,
                         timeout=60)
    assert bad.returncode == 1 and "without tune.json" in bad.stderr
    # The folder holds files now: refused, before anything runs.
    again = tune(["-o", out, "--", sys.executable, prog, mark])
    assert again.returncode == 2 and "holds files already" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1
    # --force removes that tune's files (its numbered runs and tune.json) and nothing else.
    (out / "notes.txt").write_text("mine")
    earlier = sorted(p.name for p in out.glob("0[1-9]-*"))
    assert earlier, sorted(os.listdir(out))
    forced = tune(["--force", "-o", out, "--", sys.executable, "-c", "raise SystemExit(3)"])
    assert forced.returncode == 1, forced.stderr
    left = sorted(os.listdir(out))
    assert "notes.txt" in left and "tune.json" not in left and not set(earlier) & set(left), left
    for bad in (["--steps", "1"], ["--budget", "-3"], ["--candidates", "0"]):
        r = tune([*bad, "--", sys.executable, prog, mark])
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, (bad, r.stderr)
    r = tune([])
    assert r.returncode == 2 and "no program given" in r.stderr


def test_tune_says_in_one_line_when_the_script_cannot_run(tmp_path):
    r = tune(["-o", tmp_path / "a", "--", sys.executable, "-c", "raise SystemExit(3)"])
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert "failed (exit status 3" in lines[-1], r.stderr
    r = tune(["-o", tmp_path / "b", "--", sys.executable, "-c", "print('no loader here')"])
    assert r.returncode == 1
    assert "no DataLoader was recorded" in r.stderr.strip().splitlines()[-1], r.stderr
    r = tune(["-o", tmp_path / "c", "--", str(tmp_path / "no-such-program")])
    assert r.returncode == 1, r.stderr


def test_ctrl_c_prints_what_was_measured(tmp_path):
    prog = script(tmp_path)
    out = tmp_path / "int"
    mark = f"tune-mark-{os.getpid()}-c"
    # 1,500 steps: the first candidate (5-7 workers, about 280 steps a second here) is still running
    # 3 s after it starts; with 400 it once finished first, and Ctrl-C came between two candidates.
    p = subprocess.Popen([str(LAUNCHER), "tune", "--steps", "1500", "-o", str(out), "--", sys.executable, str(prog),
                          mark], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=base_env())
    try:
        # Into the first candidate: the baseline is measured by then.
        wait_for(lambda: any(f.startswith("01-") for f in os.listdir(out)) if out.exists() else False, timeout=180)
        time.sleep(3)
        p.send_signal(signal.SIGINT)
        stdout, stderr = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, stderr
    assert "Interrupted" in stdout and "num_workers=0 (the script's)" in stdout
    assert "measured" in stdout and "interrupted" in stdout
    assert wait_for(lambda: marked(mark) == [], timeout=10)


def test_loader_args_lower_and_raise_without_changing_the_result(tmp_path):
    prog = script(tmp_path)
    mark = f"tune-mark-{os.getpid()}-d"
    own = subprocess.run([sys.executable, prog, "--epochs", "1", "--workers", "2", "--persistent", "1", "--prefetch",
                          "4", mark], capture_output=True, text=True, env=base_env(), timeout=120)
    assert own.returncode == 0, own.stderr
    for args, want in (("num_workers=0", {"num_workers": 0}),
                       ("num_workers=1, prefetch_factor=2, persistent_workers=False",
                        {"num_workers": 1, "prefetch_factor": 2, "persistent_workers": False})):
        db = tmp_path / f"la-{want['num_workers']}.db"
        r = subprocess.run([str(LAUNCHER), "run", "-o", str(db), "--loader-args", args, "--", sys.executable, prog,
                            "--epochs", "1", "--workers", "2", "--persistent", "1", "--prefetch", "4", mark],
                           capture_output=True, text=True, env=base_env(), timeout=120)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[0] == own.stdout.splitlines()[0]  # the same samples, the same sum
        assert "--loader tuned:" in r.stderr and "num_workers 2 -> " in r.stderr
        cfg = report(db)["loader"]
        for k, v in want.items():
            assert cfg[k] == v, (k, cfg)
    bad = subprocess.run([str(LAUNCHER), "run", "--loader-args", "batch_size=3", "--", sys.executable, prog, mark],
                         capture_output=True, text=True, env=base_env(), timeout=60)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "--loader-args" in bad.stderr and "'batch_size' is not one of" in bad.stderr


# Workers that keep both cores busy (a Python loop in __getitem__) beside a step of small matmuls:
# torch's two intra-op threads wait for each other whenever a worker holds one of the cores, so one
# thread is faster, which the model cannot see in a recording with two (tune measures it).
GANG = textwrap.dedent("""
    import argparse, time
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Busy(Dataset):
        def __len__(self):
            return 10 ** 6

        def __getitem__(self, i):
            s = 0
            for k in range(12000):
                s += k * k
            return torch.full((256,), float(i % 7))

    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10 ** 6)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("mark")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    w = [torch.randn(256, 256) / 16 for _ in range(24)]
    loader = DataLoader(Busy(), batch_size=16, num_workers=2, persistent_workers=True)
    t0 = time.perf_counter()
    for n, x in enumerate(loader, 1):
        for m in w:
            x = torch.tanh(x @ m)
        if n == a.steps:
            break
    print("THREADS", torch.get_num_threads(), flush=True)
    print("LOOP_S", time.perf_counter() - t0, flush=True)
""")


@pytest.mark.timed
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 cores: one intra-op thread against two")
def test_tune_measures_one_intra_op_thread(tmp_path):
    prog = tmp_path / "gang_train.py"
    prog.write_text(GANG)
    mark = f"tune-mark-{os.getpid()}-g"
    out = tmp_path / "tune"
    # The runs' own temporary directory: torch's workers hand batches through file descriptors, for
    # which Python's multiprocessing makes a pymp-* folder there, and a killed run cannot remove it.
    temp = tmp_path / "temp"
    temp.mkdir()
    p = tune(["--steps", "60", "--warmup", "10", "-o", out, "--", sys.executable, prog, mark],
             env={**base_env(), "TMPDIR": str(temp)})
    assert p.returncode == 0, p.stderr
    assert list(temp.iterdir()) == []  # tune removed what its killed runs left there
    doc = json.loads((out / "tune.json").read_text())
    assert report(doc["baseline"]["recording"])["loader"]["torch_threads"] == 2
    one = [c for c in doc["candidates"] if c["settings"].get("torch_threads") == 1]
    assert one and all(c["loader_args"].endswith(", torch_threads=1") for c in one), doc["candidates"]
    first = one[0]
    assert first["status"] in ("measured", "stopped early"), first
    # Applied by `run --loader-args`, unedited: the hooks set torch's threads at the first DataLoader.
    assert report(first["recording"])["loader"]["torch_threads"] == 1
    with open(first["log"]) as f:
        assert "torch's intra-op threads 2 -> 1" in f.read()
    assert not [c for c in doc["candidates"] if c["settings"].get("torch_threads") not in (None, 1)]
    win = doc["winner"]
    assert win["settings"].get("torch_threads") == 1, win
    assert win["loader_args"] == win["arguments"] + ", torch_threads=1"
    assert "torch.set_num_threads(1)" in p.stdout
    assert f'--loader-args "{win["loader_args"]}"' in p.stdout
    assert marked(mark) == []

    # The advice holds apart from tune: the script on one thread, edited by hand, is faster.
    def timed(*flags):
        lines = script_lines(prog, "--steps", "300", *flags, mark)
        return float(lines["LOOP_S"]), int(lines["THREADS"])

    own = [timed() for _ in range(2)]
    pasted = [timed("--threads", "1") for _ in range(2)]
    assert {t for _, t in own} == {2} and {t for _, t in pasted} == {1}
    assert min(s for s, _ in pasted) < min(s for s, _ in own) / 1.2, (own, pasted)


def need(module):
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (scripts/setup.sh installs it)")


@pytest.mark.parametrize("framework", ["lightning", "hf"])
def test_tune_under_frameworks(tmp_path, framework):
    need("pytorch_lightning" if framework == "lightning" else "transformers")
    if framework == "lightning":
        cmd = [sys.executable, PROGRAMS / "lightning_prog.py", "--epochs", "100", "--workers", "0"]
    else:
        cmd = [sys.executable, PROGRAMS / "hf_prog.py", tmp_path / "hf-out", "100"]
    p = tune(["--json", "--steps", "30", "--warmup", "5", "--candidates", "2", "--budget", "240", "-o",
              tmp_path / "t", "--", *cmd], cwd=PROGRAMS, timeout=600)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["baseline"]["status"] == "measured", doc["baseline"]
    assert doc["baseline"]["settings"]["num_workers"] == 0
    # Each run measured the training loader, not the validation one, with the setting it was given.
    ran = [c for c in doc["candidates"] if c["status"] in ("measured", "stopped early")]
    assert ran, doc["candidates"]
    for c in ran:
        rep = report(c["recording"])
        assert rep["loader"]["role"] == "train", rep["loader"]
        assert rep["loader"]["num_workers"] == c["settings"]["num_workers"]
    assert doc["winner"]["samples_per_s"] > 0


# A TensorDataset loop: one the reference loader reads natively.
TENSORS = textwrap.dedent("""
    import sys, time
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    ds = TensorDataset(torch.arange(4096 * 64, dtype=torch.float32).reshape(4096, 64), torch.arange(4096))
    loader = DataLoader(ds, batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(0))
    for _ in range(1000):
        for x, y in loader:
            time.sleep(0.001)
""")


@pytest.mark.timed
def test_tune_includes_the_reference_loader(tmp_path):
    if LOADER_MODULE is None:
        pytest.skip("the reference loader's module is not built")
    prog = tmp_path / "tensors.py"
    prog.write_text(TENSORS)
    p = tune(["--json", "--steps", "30", "--warmup", "5", "--candidates", "1", "--include-reference", "-o",
              tmp_path / "t", "--", sys.executable, prog])
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    (ref,) = [c for c in doc["candidates"] if c["loader"] == "reference"]
    assert ref["status"] == "measured" and ref["measured"]["samples_per_s"] > 0, ref
    assert ref["predicted"] is None  # the model does not cover the reference loader
    assert report(ref["recording"])["loader"]["kind"] == "reference"
    # The script's generator seeds the shuffle: tuned keeps num_workers, and tune says that the
    # setting was not applied rather than measuring the script's own under another name.
    tuned = [c for c in doc["candidates"] if c["loader"] == "tuned"]
    assert tuned
    for c in tuned:
        assert c["status"] == "not applied" and "generator" in c["not_applied"], c
    assert doc["winner"]["loader"] in ("torch", "reference")
