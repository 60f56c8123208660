"""`stallscope run --loader torch|tuned|reference` on unmodified training scripts.

- A/B end to end on the CPU: a data-bound script over a TensorDataset under --loader torch and
  --loader reference, interleaved and repeated: the reference run is faster and waits less (from
  the reports), `stallscope compare` says so, both recordings hold their loader's events, and the
  script's own checksums of labels and pixels per epoch are the same multisets.
- tuned: its settings reach the DataLoader (the launcher's numbers), the script's results stay
  the same, and each reason to keep a setting as the script had it holds (IterableDataset, a
  sampler, a generator, a worker_init_fn reading the worker count, more workers than tuned, a
  dataset that changes between epochs, positional arguments, a subclass).
- reference: the datasets it serves give the batches torch gives (structure, shapes, dtypes,
  values, samples per epoch); anything else falls back to tuned with one line; exit codes and
  tracebacks stay the script's.
- the CUDA-stream prefetch of tuned, on the CPU with a stand-in for torch.cuda (no GPU here).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BUILD, LAUNCHER, PROGRAMS, PYTHON_DIR, Recording, Run, base_env
from test_torchvision_parity import venv_dir  # one rule for where torchvision's environment is

pytestmark = pytest.mark.torch

AB = PROGRAMS / "ab_train.py"
SWAP = PROGRAMS / "swap_prog.py"
LOADER_PROG = PROGRAMS / "loader_prog.py"
HAVE_LOADER_MODULE = any((BUILD / "lib").glob("_stallscope_loader*.so"))
needs_loader = pytest.mark.skipif(not HAVE_LOADER_MODULE, reason=f"the loader's Python module is not built in "
                                                                 f"{BUILD / 'lib'}")


def run_loader(tmp_path: Path, mode: str | None, args, *, name=None, python=sys.executable, timeout=300, check=True):
    """`stallscope run [--loader MODE] -o DB -- python ARGS` -> (Run, Recording)."""
    db = tmp_path / f"{name or mode or 'default'}.db"
    cmd = [str(LAUNCHER), "run", "-o", str(db)]
    if mode is not None:
        cmd += ["--loader", mode]
    p = subprocess.run([*cmd, "--", str(python), *map(str, args)], capture_output=True, text=True,
                       env=base_env(), timeout=timeout)
    r = Run(p.returncode, p.stdout, p.stderr, db)
    if check:
        assert r.rc == 0, f"rc={r.rc}\nstdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
    return r, Recording(db)


def report(db: Path) -> dict:
    p = subprocess.run([str(LAUNCHER), "report", "--json", str(db)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def report_text(db: Path) -> str:
    p = subprocess.run([str(LAUNCHER), "report", str(db)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def compare(a: Path, b: Path) -> dict:
    p = subprocess.run([str(LAUNCHER), "compare", "--json", str(a), str(b)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def swap_lines(r: Run) -> list[str]:
    return [line for line in r.stderr.splitlines() if line.startswith("stallscope: --loader")]


def meta(rec: Recording) -> dict:
    return {m["key"]: m["value"] for m in rec.q("SELECT key, value FROM meta")}


def only_config(rec: Recording) -> dict:
    cfgs = rec.configs()
    assert len(cfgs) == 1, cfgs
    return next(iter(cfgs.values()))


# ---------------------------------------------------------------------------------------------
# A/B: TensorDataset, torch against reference


# 100,000 digits-sized samples (1x8x8 uint8) for 24 epochs in batches of 512: torch's DataLoader
# (num_workers=0) spends ~3 us a sample in Python indexing and collating, the step ~1 ms a batch,
# so the torch run waits for data ~2/3 of its time; the reference run's window stays above the 2 s
# that `compare` needs.
AB_ARGS = ["--samples", 100000, "--epochs", 24, "--batch-size", 512]


def _check_same_epochs(a: dict, b: dict) -> None:
    assert len(a["epochs"]) == len(b["epochs"])
    for i, (ea, eb) in enumerate(zip(a["epochs"], b["epochs"], strict=True)):
        assert ea == eb, f"epoch {i}: {ea} != {eb}"
        assert ea["labels_sha"] == a["dataset_labels_sha"]  # every sample once per epoch
    assert a["first"] == b["first"]  # batch structure, shapes, dtypes, value ranges
    assert a["len"] == b["len"] and a["loader_type"] == b["loader_type"] == "DataLoader"


@pytest.mark.timed
@needs_loader
def test_ab_tensor_dataset_reference_is_faster_and_stalls_less(tmp_path):
    runs = {"torch": [], "reference": []}
    for i in range(2):  # interleaved, so that a change of machine load hits both
        for mode in ("torch", "reference"):
            r, rec = run_loader(tmp_path, mode, [AB, *AB_ARGS], name=f"{mode}{i}")
            runs[mode].append((r, rec, report(r.db)))
    figures = {m: [(rep["samples_per_s"], rep["stall"]["fraction"]) for _, _, rep in v] for m, v in runs.items()}
    print("A/B samples/s, stall:", figures)
    for i in range(2):
        (ta, ra, rep_t), (tb, rb, rep_r) = runs["torch"][i], runs["reference"][i]
        _check_same_epochs(ta.result, tb.result)
        assert ta.result["rng_after"] == tb.result["rng_after"]  # the script's random stream is torch's
        # The torch run is data-bound, and the reference loader takes the wait away.
        assert rep_t["stall"]["fraction"] >= 0.35, figures
        assert rep_r["samples_per_s"] >= 1.5 * rep_t["samples_per_s"], figures
        assert rep_r["stall"]["fraction"] <= 0.5 * rep_t["stall"]["fraction"], figures
        cmp = compare(ta.db, tb.db)
        assert cmp["verdict"] == "faster", cmp["verdict_text"]
        assert cmp["ratio"]["low"] > 1.0, cmp["ratio"]
        assert not [p for p in cmp["problems"] if p["blocking"]], cmp["problems"]
        # Each recording shows its loader.
        assert rep_t["loader"]["kind"] == "torch" and rep_r["loader"]["kind"] == "reference"
        assert meta(ra)["loader"] == "torch" and meta(rb)["loader"] == "reference"
        ct, cr = only_config(ra), only_config(rb)
        assert ct["kind"] == "torch" and ct["replaced"] is None and ct["num_workers"] == 0
        assert cr["kind"] == "reference" and cr["dataset_class"] == "TensorDataset"
        assert cr["replaced"]["asked"] == "reference" and cr["replaced"]["fallback"] is None
        assert cr["replaced"]["settings"]["num_workers"] == 0 and cr["replaced"]["settings"]["shuffle"] is True
        assert cr["created_at"] == ct["created_at"]  # the script's DataLoader(...) line
        assert cr["batch_size"] == 512 and cr["shuffle"] is True and cr["dataset_len"] == 100000
        main_t = {t["tid"] for t in ra.q("SELECT tid FROM threads WHERE name = 'MainThread'")}
        assert {s["tid"] for s in ra.spans("dl.fetch")} <= main_t and len(ra.spans("dl.collate")) > 0
        names = rb.thread_names()
        fetch_threads = {names.get((s["pid"], s["tid"])) for s in rb.spans("dl.fetch")}
        assert fetch_threads and all(n.startswith("ss-loader-") for n in fetch_threads), fetch_threads
        for ev in ("dl.sent", "dl.put", "dl.stages", "dl.recv"):
            assert rb.instants(ev), ev
        # No separate collate: a zero-length dl.collate inside each fetch says how many samples B holds
        # (one timestamp for both ends, ss_span_empty: no preemption between two calls lengthens it).
        collates = rb.spans("dl.collate")
        assert collates and all(c["depth"] == 1 and c["dur_ns"] == 0 for c in collates), max(
            (c["dur_ns"], c["depth"]) for c in collates
        )
        assert {names.get((c["pid"], c["tid"])) for c in collates} <= fetch_threads
        assert sum(c["arg2"] for c in collates) == 24 * 100000  # every epoch's short last batch counted as short
        steps = rep_t["steps"]
        assert rep_r["steps"] == steps == 24 * 196
    torch_sps = statistics.median(s for s, _ in figures["torch"])
    ref_sps = statistics.median(s for s, _ in figures["reference"])
    print(f"median samples/s: torch {torch_sps:.0f}, reference {ref_sps:.0f} ({ref_sps / torch_sps:.2f}x)")
    text = report_text(runs["reference"][0][0].db)
    assert "stallscope.ReferenceLoader" in text and "--loader reference, in place of the script's DataLoader" in text


# ---------------------------------------------------------------------------------------------
# A/B: ImageFolder of JPEGs, torch against reference (torchvision's own environment)

# torchvision runs in the environment scripts/venv_torchvision.sh makes (torch 2.14.1 +
# torchvision 0.29.1: the main environment's torch has no torchvision that imports); the script
# runs there under `stallscope run`, as test_torchvision_parity.py runs its tests there.
VENV_PYTHON = venv_dir() / "bin" / "python"
needs_torchvision = pytest.mark.skipif(not VENV_PYTHON.exists(), reason=(
    f"no torchvision environment at {venv_dir()}: scripts/venv_torchvision.sh makes it "
    "(torch 2.14.1 + torchvision 0.29.1, about 5.5 GB)"))

MAKE_JPEGS = """
import os, sys
import numpy as np
from PIL import Image
root, per, w, h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
g = np.random.default_rng(0)
yy, xx = np.mgrid[0:h, 0:w]
for c in range(4):
    os.makedirs(os.path.join(root, f"class{c}"), exist_ok=True)
    for i in range(per):
        a = np.stack([(xx * (c + 1) + i) % 256, (yy * 2 + i * 3) % 256, ((xx + yy) * c + i * 7) % 256], -1)
        a = a.astype(np.uint8)
        x0, y0 = g.integers(0, w - 30), g.integers(0, h - 20)
        a[y0:y0 + 20, x0:x0 + 30] = g.integers(0, 256, 3)
        Image.fromarray(a).save(os.path.join(root, f"class{c}", f"img{i:04d}.jpg"), quality=90)
"""


def make_image_folder(root: Path, per_class: int, w=320, h=240) -> Path:
    """4 classes of synthetic JPEGs (gradients and a block: they compress as photos do)."""
    p = subprocess.run([str(VENV_PYTHON), "-c", MAKE_JPEGS, str(root), str(per_class), str(w), str(h)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return root


# 1024 JPEGs of 320x240 to RandomResizedCrop(64) + flip + ToTensor + Normalize, 5 epochs in
# batches of 32. torch (num_workers=0) decodes and augments ~1 ms a sample in the loop; the step
# (an MLP over 3x64x64, hidden 512) ~18 ms; so the torch run waits for data ~2/3 of its time, and
# the reference run trains ~3 s, over the 2 s `compare` needs.
IMAGE_ARGS = ["--dataset", "imagefolder", "--size", 64, "--batch-size", 32, "--epochs", 5, "--hidden", 512]


@pytest.mark.timed
@needs_loader
@needs_torchvision
def test_ab_image_folder_reference_is_faster_and_stalls_less(tmp_path):
    root = make_image_folder(tmp_path / "images", 256)
    # 8 epochs: on a fast machine 5 left the reference run 1.76 s of training, under the 2 s that
    # `compare` needs to call start-up small beside the steady state.
    epochs = 8
    args = [AB, *IMAGE_ARGS, "--epochs", epochs, "--root", root]
    runs = {"torch": [], "reference": []}
    for i in range(2):
        for mode in ("torch", "reference"):
            r, rec = run_loader(tmp_path, mode, args, name=f"img-{mode}{i}", python=VENV_PYTHON)
            runs[mode].append((r, rec, report(r.db)))
    figures = {m: [(rep["samples_per_s"], rep["stall"]["fraction"]) for _, _, rep in v] for m, v in runs.items()}
    print("A/B ImageFolder samples/s, stall:", figures)
    for i in range(2):
        (ta, ra, rep_t), (tb, rb, rep_r) = runs["torch"][i], runs["reference"][i]
        a, b = ta.result, tb.result
        assert swap_lines(tb) == []
        for ea, eb in zip(a["epochs"], b["epochs"], strict=True):
            assert ea == eb and ea["labels_sha"] == a["dataset_labels_sha"] and ea["samples"] == 1024
        # Batch structure, shapes, dtypes; values within Normalize's range (crops differ).
        lo, hi = (0 - 0.485) / 0.229, (1 - 0.406) / 0.225
        for d in (a["first"], b["first"]):
            img, lab = d["items"]
            assert d["type"] == "list" and img["shape"] == [32, 3, 64, 64] and img["dtype"] == "torch.float32"
            assert lo - 1e-3 <= img["min"] and img["max"] <= hi + 1e-3
            assert lab["shape"] == [32] and lab["dtype"] == "torch.int64" and 0 <= lab["min"] <= lab["max"] <= 3
        # (Not rng_after: torchvision's random crops drew from torch's generator in the torch run.)
        assert a["len"] == b["len"] == 32
        assert rep_t["stall"]["fraction"] >= 0.35, figures
        assert rep_r["samples_per_s"] >= 1.5 * rep_t["samples_per_s"], figures
        assert rep_r["stall"]["fraction"] <= 0.5 * rep_t["stall"]["fraction"], figures
        cmp = compare(ta.db, tb.db)
        assert cmp["verdict"] == "faster", cmp["verdict_text"]
        assert not [p for p in cmp["problems"] if p["blocking"]], cmp["problems"]
        cr = only_config(rb)
        assert cr["kind"] == "reference" and cr["source"] == "image_folder" and cr["dataset_class"] == "ImageFolder"
        assert cr["transform"].startswith("RandomResizedCrop(size=(64, 64)") and "Normalize(" in cr["transform"]
        assert cr["replaced"]["settings"]["num_workers"] == 0
        assert only_config(ra)["kind"] == "torch" and only_config(ra)["dataset_class"] == "ImageFolder"
        names = rb.thread_names()
        assert {names.get((s["pid"], s["tid"]), "")[:10] for s in rb.spans("dl.fetch")} == {"ss-loader-"}
        assert rep_r["loader"]["stages"]["decode_s"] > 0 and rep_r["loader"]["stages"]["augment_s"] > 0
        assert len(ra.spans("dl.fetch")) == len(ra.spans("dl.collate")) == epochs * 32
    med = {m: statistics.median(s for s, _ in v) for m, v in figures.items()}
    print(f"median samples/s: torch {med['torch']:.0f}, reference {med['reference']:.0f}")


@needs_loader
@needs_torchvision
def test_image_folder_with_a_transform_it_cannot_run_falls_back(tmp_path):
    root = make_image_folder(tmp_path / "images", 8, 64, 48)
    r, rec = run_loader(tmp_path, "reference", [AB, *IMAGE_ARGS, "--epochs", 1, "--root", root, "--jitter"],
                        python=VENV_PYTHON)
    lines = swap_lines(r)
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("stallscope: --loader reference: ImageFolder: its transform does not run natively: ")
    assert "ColorJitter" in lines[0] and lines[0].endswith("; running torch's DataLoader tuned")
    cfg = only_config(rec)
    assert cfg["kind"] == "tuned" and cfg["replaced"]["fallback"].startswith("ImageFolder: its transform")
    assert r.result["epochs"][0]["samples"] == 32


# ---------------------------------------------------------------------------------------------
# tuned


def _tuned_meta(rec):
    return json.loads(meta(rec)["loader_tuned"])


def test_tuned_applies_its_settings_and_keeps_the_results(tmp_path):
    args = [SWAP, "--case", "map", "--samples", 48, "--epochs", 3, "--sleep-ms", 1]
    t, rec_t = run_loader(tmp_path, "torch", args)
    u, rec_u = run_loader(tmp_path, "tuned", args)
    assert u.result["epochs"] == t.result["epochs"]  # the same samples in the same order
    tuned = _tuned_meta(rec_u)
    assert meta(rec_u)["loader"] == "tuned" and tuned["persistent_workers"] is True
    cfg = only_config(rec_u)
    assert cfg["kind"] == "tuned"
    assert cfg["num_workers"] == tuned["num_workers"] == u.result["num_workers"] >= 1
    assert cfg["persistent_workers"] is True and cfg["prefetch_factor"] == tuned["prefetch_factor"] == 4
    assert cfg["pin_memory"] is False  # no CUDA here
    rep = cfg["replaced"]
    assert rep["asked"] == "tuned" and rep["fallback"] is None and rep["kept"] == {}
    assert rep["settings"]["num_workers"] == 0 and rep["settings"]["persistent_workers"] is False
    assert rep["changed"] == {"num_workers": tuned["num_workers"], "prefetch_factor": 4, "persistent_workers": True}
    # The workers ran: their processes are in the recording, started once (persistent).
    assert len(rec_u.instants("dl.worker_start")) == tuned["num_workers"]
    assert len(rec_u.spans("dl.fetch")) == 3 * 12
    lines = swap_lines(u)
    # The DataLoader(...) call, its path relative to the working directory.
    head = "stallscope: --loader tuned: DataLoader at "
    assert len(lines) == 1 and lines[0].startswith(head), lines
    assert lines[0][len(head):].split(":")[0].endswith("tests/python/programs/swap_prog.py"), lines
    assert "num_workers 0 -> " in lines[0]
    assert report(u.db)["loader"]["kind"] == "tuned"
    text = report_text(u.db)
    assert "torch DataLoader, tuned: batch_size 4" in text and "--loader tuned changed num_workers 0 -> " in text
    # --loader torch leaves the loader alone: no line, kind torch.
    assert swap_lines(t) == [] and only_config(rec_t)["kind"] == "torch" and meta(rec_t)["loader"] == "torch"


@pytest.mark.parametrize("case,kept", [
    ("iterable", {"num_workers": "an IterableDataset"}),
    ("sampler", {"num_workers": "the script's own sampler EveryOther", "prefetch_factor": None}),
    ("generator", {"num_workers": "a generator", "persistent_workers": None}),
    ("init_count", {"num_workers": "worker_init_fn may read the worker count"}),
    ("many_workers", {"num_workers": "the script's 3 workers are more than"}),
])
def test_tuned_keeps_what_could_change_the_results(tmp_path, case, kept):
    args = [SWAP, "--case", case, "--samples", 24, "--epochs", 2]
    t, _ = run_loader(tmp_path, "torch", args)
    u, rec = run_loader(tmp_path, "tuned", args)
    assert u.result["epochs"] == t.result["epochs"]
    assert u.result["num_workers"] == t.result["num_workers"]
    cfg = only_config(rec)
    assert cfg["kind"] == "tuned" and cfg["num_workers"] == t.result["num_workers"]
    reasons = cfg["replaced"]["kept"]
    for setting, start in kept.items():
        if start is None:  # kept silently: no workers to apply it to, or it is kept for the same reason
            assert setting not in cfg["replaced"]["changed"], cfg["replaced"]
        else:
            assert reasons.get(setting, "").startswith(start) or start in reasons.get(setting, ""), reasons
    lines = swap_lines(u)
    assert len(lines) == 1 and "kept num_workers (" in lines[0], lines
    if case == "generator":  # same seed, same order in every epoch: nothing that draws from g changed
        assert cfg["persistent_workers"] is False
        assert u.result["rng_after"] == t.result["rng_after"]


@pytest.mark.parametrize("case", ["positional", "subclass", "init_seed", "shuffled", "tensor1d"])
def test_tuned_rebinds_every_form_of_call(tmp_path, case):
    args = [SWAP, "--case", case, "--samples", 24, "--epochs", 2]
    t, _ = run_loader(tmp_path, "torch", args)
    u, rec = run_loader(tmp_path, "tuned", args)
    tuned = _tuned_meta(rec)
    assert u.result["num_workers"] == tuned["num_workers"] != t.result["num_workers"]
    assert only_config(rec)["replaced"]["changed"]["num_workers"] == tuned["num_workers"]
    if case == "shuffled":  # another order from epoch 1 on (one draw less per epoch), the same samples
        assert [sorted(e) for e in u.result["epochs"]] == [sorted(e) for e in t.result["epochs"]]
        assert u.result["epochs"][0] == t.result["epochs"][0]
    else:
        assert u.result["epochs"] == t.result["epochs"]
    assert u.result["subclass"] == t.result["subclass"] == (case == "subclass")


def test_tuned_restarts_persistent_workers_when_the_dataset_changes(tmp_path):
    args = [SWAP, "--case", "mutate", "--samples", 12, "--epochs", 3]
    t, _ = run_loader(tmp_path, "torch", args)
    u, rec = run_loader(tmp_path, "tuned", args)
    # set_epoch() changed the dataset each epoch: the tuned workers saw it as fresh ones would.
    assert u.result["epochs"] == t.result["epochs"]
    assert u.result["epochs"][2][0] == 2000.0
    assert only_config(rec)["persistent_workers"] is True
    tuned = _tuned_meta(rec)
    assert len(rec.instants("dl.worker_start")) == 3 * tuned["num_workers"]  # restarted at epochs 1 and 2
    assert any("the dataset changed since its persistent workers started" in x for x in swap_lines(u))
    # A dataset that does not change keeps its workers (test_tuned_applies_its_settings...: started once).


def test_tuned_and_reference_keep_exit_codes_and_tracebacks(tmp_path):
    # The script's own wrong call: torch's error, the same traceback, no chained exception of ours.
    outs = {m: run_loader(tmp_path, m, [SWAP, "--case", "bad_call"], name=f"bad-{m}", check=False)[0]
            for m in ("torch", "tuned", "reference")}
    for m, r in outs.items():
        assert r.rc == 1, (m, r.stderr)
        assert r.stderr_without_stallscope() == outs["torch"].stderr_without_stallscope(), m
        assert "During handling" not in r.stderr
    # An exception in the training loop.
    outs = {m: run_loader(tmp_path, m, [AB, "--samples", 3000, "--raise-at", 5], name=f"loop-{m}", check=False)[0]
            for m in ("torch", "tuned", "reference")}
    for m, r in outs.items():
        assert r.rc == 1, (m, r.stderr)
        assert r.stderr_without_stallscope() == outs["torch"].stderr_without_stallscope(), m
        assert r.stderr_without_stallscope().rstrip().endswith("ValueError: step 5 is broken")
    # A failing sample in the dataset: with tuned's workers torch raises it from the worker, with the
    # original traceback in its message; the exit status is the script's.
    t = run_loader(tmp_path, "torch", [LOADER_PROG, "--fail-at", 5], name="fail-torch", check=False)[0]
    u = run_loader(tmp_path, "tuned", [LOADER_PROG, "--fail-at", 5], name="fail-tuned", check=False)[0]
    assert t.rc == u.rc == 1
    assert "ValueError: sample 5 is broken" in t.stderr and "ValueError: sample 5 is broken" in u.stderr


# ---------------------------------------------------------------------------------------------
# reference


@needs_loader
@pytest.mark.parametrize("case", ["tensor", "ndarray", "memmap", "tensor1d"])
def test_reference_serves_the_datasets_it_reads_with_torchs_batches(tmp_path, case):
    args = [SWAP, "--case", case, "--samples", 23, "--epochs", 3, "--dir", tmp_path]
    t, _ = run_loader(tmp_path, "torch", args)
    r, rec = run_loader(tmp_path, "reference", args)
    assert swap_lines(r) == []

    # Structure, shapes and dtypes of the first batch; its values differ with another shuffle.
    def shape(d):
        if "items" in d:
            return {"type": d["type"], "items": [shape(i) for i in d["items"]]}
        return {k: v for k, v in d.items() if k not in ("min", "max")}

    assert shape(r.result["first"]) == shape(t.result["first"])
    for et, er in zip(t.result["epochs"], r.result["epochs"], strict=True):
        if case in ("ndarray", "memmap"):  # shuffled with drop_last: each drops 3 samples of its own choosing
            assert len(er) == len(et) == 20 and len(set(er)) == 20 and set(er) <= set(range(0, 3 * 23, 3))
        else:
            assert sorted(er) == sorted(et)  # the same samples each epoch
    if case == "tensor1d":  # no shuffle: the same order
        assert r.result["epochs"] == t.result["epochs"]
    assert r.result["len"] == t.result["len"] and r.result["loader_type"] == "DataLoader"
    assert r.result["rng_after"] == t.result["rng_after"]
    cfg = only_config(rec)
    assert cfg["kind"] == "reference" and cfg["replaced"]["fallback"] is None
    assert cfg["dataset_class"] == {"tensor": "TensorDataset", "ndarray": "ndarray", "memmap": "memmap",
                                    "tensor1d": "Tensor"}[case]


@needs_loader
def test_reference_falls_back_to_tuned_in_one_line(tmp_path):
    args = [SWAP, "--case", "map", "--samples", 24, "--epochs", 2]
    t, _ = run_loader(tmp_path, "torch", args)
    r, rec = run_loader(tmp_path, "reference", args)
    assert r.result["epochs"] == t.result["epochs"]
    lines = swap_lines(r)
    assert lines == [("stallscope: --loader reference: MapDS: its __getitem__ is Python code; the reference loader "
                      "reads TensorDataset, NumPy arrays and memmaps, CPU tensors and ImageFolder natively; "
                      "running torch's DataLoader tuned")], r.stderr
    cfg = only_config(rec)
    assert cfg["kind"] == "tuned" and cfg["replaced"]["asked"] == "reference"
    assert cfg["replaced"]["fallback"].startswith("MapDS: its __getitem__ is Python code")
    assert cfg["num_workers"] == _tuned_meta(rec)["num_workers"]
    assert meta(rec)["loader"] == "reference"
    assert "--loader reference fell back to tuned: MapDS: its __getitem__" in report_text(r.db).replace("\n      ", " ")
    # Other reasons, one line each.
    for case, reason in (("sampler", "MapDS: a sampler (EveryOther)"),
                         ("init_count", "MapDS: a worker_init_fn, which would run in torch's worker processes"),
                         ("iterable", "Stream: its __getitem__ is Python code")):
        r, rec = run_loader(tmp_path, "reference", [SWAP, "--case", case], name=f"fallback-{case}")
        lines = swap_lines(r)
        assert len(lines) == 1 and lines[0].startswith(f"stallscope: --loader reference: {reason}"), lines
        assert lines[0].endswith("; running torch's DataLoader tuned")
        assert only_config(rec)["replaced"]["fallback"].startswith(reason)


def test_loader_torch_leaves_the_dataloader_alone(tmp_path):
    prog = tmp_path / "probe.py"
    prog.write_text(
        "import json, torch\n"
        "from torch.utils.data import DataLoader\n"
        "from stallscope.hooks import _state as S\n"
        "loader = DataLoader(list(range(8)), batch_size=2)\n"
        "print('RESULT ' + json.dumps({'mode': S._swap_mode, 'len_patched': S._orig_dl_len is not None,\n"
        "      'batches': [b.tolist() for b in loader]}))\n")
    for mode in ("torch", None):
        r, rec = run_loader(tmp_path, mode, [prog], name=f"probe-{mode}")
        assert r.result == {"mode": None, "len_patched": False, "batches": [[0, 1], [2, 3], [4, 5], [6, 7]]}
        assert only_config(rec)["kind"] == "torch" and swap_lines(r) == []
    r, _ = run_loader(tmp_path, "reference", [prog], name="probe-reference")
    assert r.result["mode"] == "reference" and r.result["len_patched"] is True


# ---------------------------------------------------------------------------------------------
# The CUDA-stream prefetch (tuned with CUDA), on the CPU


def _prefetch_module():
    if str(PYTHON_DIR) not in sys.path:
        sys.path.insert(0, str(PYTHON_DIR))
    from stallscope.hooks import _prefetch

    return _prefetch


class FakeCuda:
    """Stands in for torch.cuda: a tensor is "on the device" when it is in self.device_tensors;
    every call is logged in order."""

    def __init__(self, torch):
        self.torch = torch
        self.log = []
        self.device_tensors = set()
        self.consumer = "consumer-stream"

    def new_stream(self):
        return "side-stream"

    def using(self, stream):
        fake = self

        class Ctx:
            def __enter__(self):
                fake.log.append(("enter", stream))

            def __exit__(self, *a):
                fake.log.append(("exit", stream))

        return Ctx()

    def needs_copy(self, t):
        return id(t) not in self.device_tensors

    def copy(self, t):
        out = t.clone()
        self.device_tensors.add(id(out))
        self.log.append(("copy", int(t.reshape(-1)[0])))
        return out

    def event_after(self, stream):
        self.log.append(("event", stream))
        return ("event", len(self.log))

    def current_stream(self):
        return self.consumer

    def wait(self, stream, event):
        self.log.append(("wait", stream, event))

    def record_stream(self, t, stream):
        assert id(t) in self.device_tensors
        self.log.append(("record", stream, int(t.reshape(-1)[0])))


def test_device_prefetch_copies_one_batch_ahead_on_the_cpu():
    torch = pytest.importorskip("torch")
    P = _prefetch_module()
    fake = FakeCuda(torch)
    on_device = torch.full((2,), 7.0)
    fake.device_tensors.add(id(on_device))
    Point = __import__("collections").namedtuple("Point", "x y")
    batches = [
        [torch.full((2,), 1.0), torch.tensor([10])],
        {"x": torch.full((2,), 2.0), "name": "b2", "y": on_device},
        Point(torch.full((2,), 3.0), 5),
        ("only", "strings"),
    ]

    class Inner:
        def __init__(self):
            self.it = iter(batches)
            self._num_yielded = 0

        def __next__(self):
            b = next(self.it)
            self._num_yielded += 1
            return b

        def __len__(self):
            return len(batches)

    inner = Inner()
    pf = P.DevicePrefetch(inner, fake, torch.is_tensor)
    assert len(pf) == 4 and iter(pf) is pf
    b1 = next(pf)
    # Batch 2 was taken and its copy enqueued before batch 1 was handed (the overlap).
    assert inner._num_yielded == 2
    assert isinstance(b1, list) and torch.equal(b1[0], batches[0][0]) and id(b1[0]) in fake.device_tensors
    assert fake.log[:5] == [("enter", "side-stream"), ("copy", 1), ("copy", 10), ("event", "side-stream"),
                            ("exit", "side-stream")]
    assert ("wait", "consumer-stream", ("event", 4)) == fake.log[5]
    assert fake.log[6:8] == [("record", "consumer-stream", 1), ("record", "consumer-stream", 10)]
    assert fake.log[8:] == [("enter", "side-stream"), ("copy", 2), ("event", "side-stream"), ("exit", "side-stream")]
    b2 = next(pf)
    assert type(b2) is dict and b2["name"] == "b2" and b2["y"] is on_device  # already on the device: as it is
    assert id(b2["x"]) in fake.device_tensors
    assert not any(e[0] == "record" and e[2] == 7 for e in fake.log)
    b3 = next(pf)
    assert type(b3) is Point and b3.y == 5 and id(b3.x) in fake.device_tensors
    n_log = len(fake.log)
    b4 = next(pf)
    assert b4 == ("only", "strings")
    assert not [e for e in fake.log[n_log:] if e[0] in ("wait", "event", "copy")]  # nothing to copy, nothing to wait
    with pytest.raises(StopIteration):
        next(pf)
    with pytest.raises(StopIteration):
        next(pf)
    assert pf._num_yielded == 4  # attributes of torch's iterator


def test_device_prefetch_raises_a_loader_error_where_the_script_would_see_it():
    torch = pytest.importorskip("torch")
    P = _prefetch_module()

    def gen():
        yield torch.zeros(1)
        raise ValueError("sample 9 is broken")

    pf = P.DevicePrefetch(gen(), FakeCuda(torch), torch.is_tensor)
    assert torch.equal(next(pf), torch.zeros(1))  # the error while staging batch 2 waits for its turn
    with pytest.raises(ValueError, match="sample 9 is broken"):
        next(pf)


def test_worker_count_detection():
    pytest.importorskip("torch")
    if str(PYTHON_DIR) not in sys.path:
        sys.path.insert(0, str(PYTHON_DIR))
    import functools
    import random

    from stallscope.hooks._tuned import reads_worker_count

    sys.path.insert(0, str(PROGRAMS))
    try:
        import swap_prog
    finally:
        sys.path.remove(str(PROGRAMS))

    def helper():
        from torch.utils.data import get_worker_info

        return get_worker_info().id

    def calls_helper(worker_id):
        random.seed(helper())

    class Init:
        def __call__(self, worker_id):
            random.seed(worker_id)

    assert reads_worker_count(swap_prog.init_count) is True
    assert reads_worker_count(swap_prog.seed_worker) is False  # the docs' recipe
    assert reads_worker_count(calls_helper) is True  # through a function it names (a closure here)
    assert reads_worker_count(functools.partial(swap_prog.init_count)) is True
    assert reads_worker_count(Init()) is False
    assert reads_worker_count(print) is True  # cannot be read: assume it does
