"""Loader throughput, memory and CPU: torch's DataLoader (0, 2, 4 workers and its best), `tuned`,
ReferenceLoader, SPDL and torchdata on the same data, in one run, each figure beside its goal
(issue "Reference prefetching loader", section "Benchmark").

Cases: uint8 images 3x224x224 in memory (a TensorDataset, shuffled); the same images in a
memory-mapped .npy file whose pages are dropped before every run (posix_fadvise DONTNEED), so that
each run reads from disk; JPEGs of 500x375 in an ImageFolder tree and in tar shards, to 224x224
by RandomResizedCrop + flip + normalise. Every measurement is a fresh process
(loader_bench_child.py): warm-up batches, then a fixed number timed, epochs back to back;
repetitions are interleaved across rows so that machine noise hits every row alike; the tables
give the median and the range. Memory is the process tree's proportional set size of anonymous
and shared memory (Pss_Anon + Pss_Shmem: DataLoader workers' shared batches count once, the
dataset's mapped file pages not at all), sampled by this process, less the same figure once the
dataset and loader were made; CPU is the tree's CPU time over the timed batches.
    python3 bench/loader_bench.py [--reps N] [--quick] [--markdown FILE] [--cases ...] [--build DIR]
--quick: a reduced size (seconds, not minutes), for tests/python/test_bench_smoke.py.
Rows that need torchvision (torch's DataLoader and torchdata over JPEGs, and ReferenceLoader
given the torchvision chain) run in the environment of scripts/venv_torchvision.sh;
scripts/bench_deps.sh installs SPDL and torchdata without replacing torch.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import io
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

from bench_rows import row as bench_row

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CHILD = os.path.join(HERE, "loader_bench_child.py")
SAMPLE_BYTES = 3 * 224 * 224  # one image of the array cases (the label's 8 bytes aside)
CASES = ("memory", "npy", "folder", "tar")
CASE_TITLE = {
    "memory": "uint8 images 3x224x224 in memory (TensorDataset, shuffled)",
    "npy": "the same images in a memory-mapped .npy, read from disk (pages dropped before each run)",
    "folder": "JPEGs 500x375 in an ImageFolder tree -> RandomResizedCrop(224) + flip + normalise",
    "tar": "the same JPEGs in tar shards (key.jpg + key.cls) -> the same transform",
}

# Sizes: full and --quick. Per measurement: `warmup` batches, then `batches` timed. The warm-up
# outlasts the deepest prefetch of any row (torch's 4 workers x 2, torchdata's 2 x 2 + 4 in
# flight, SPDL's 8 threads + a sink of 3): the loop takes batches faster than any loader makes
# them, so once the batches made ahead are drained the timed ones come at the loader's own rate.
# The .npy file holds more rows than a run reads (warm-up, timed batches and that prefetch), so
# no row is read twice in a run.
FULL = {"memory": {"n": 4096, "batch_size": 256, "warmup": 12, "batches": 48},
        "npy": {"n": 16384, "batch_size": 256, "warmup": 12, "batches": 30},
        "folder": {"n": 2000, "batch_size": 64, "warmup": 10, "batches": 20},
        "tar": {"n": 2000, "batch_size": 64, "warmup": 10, "batches": 20}}
QUICK = {"memory": {"n": 128, "batch_size": 16, "warmup": 1, "batches": 3},
         "npy": {"n": 256, "batch_size": 16, "warmup": 1, "batches": 3},
         "folder": {"n": 32, "batch_size": 8, "warmup": 1, "batches": 2},
         "tar": {"n": 32, "batch_size": 8, "warmup": 1, "batches": 2}}
SHARDS = 4
CLASSES = 10


# ---------------------------------------------------------------------------------------------
# The machine and what is installed


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def venv_python() -> str | None:
    """The torchvision environment's python (scripts/venv_torchvision.sh's place), if made."""
    given = os.environ.get("STALLSCOPE_TORCHVISION_VENV")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    venv = given or os.path.join(cache, "stallscope", "venv-torchvision-0.29.1")
    py = os.path.join(venv, "bin", "python")
    return py if os.access(py, os.X_OK) else None


# What each environment has, in one process per environment (an import of torch costs seconds).
PROBE = r"""
import importlib.metadata as m, io, json
out = {}
def version(name, check):
    try:
        check()
        out[name] = m.version(name)
    except Exception as e:
        out[name] = None
        out[name + "_why"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
def torch_():
    import torch
    out["cuda"] = bool(torch.cuda.is_available())
def torchvision_():
    import torchvision
def spdl_():
    # SPDL loads FFmpeg's libraries at its first decode: a JPEG is decoded to tell.
    from PIL import Image
    import spdl.io, spdl.pipeline
    b = io.BytesIO()
    Image.new("RGB", (16, 16)).save(b, "JPEG")
    spdl.io.demux_image(b.getvalue())
def torchdata_():
    import torchdata.nodes
for name, check in (("torch", torch_), ("torchvision", torchvision_), ("spdl", spdl_), ("torchdata", torchdata_)):
    version(name, check)
print("PROBE " + json.dumps(out))
"""


def probe(*pythons: str) -> list[dict]:
    """The PROBE document of each python, the processes run side by side."""
    procs = [subprocess.Popen([py, "-c", PROBE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for py in pythons]
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        doc = next((json.loads(line[6:]) for line in stdout.splitlines() if line.startswith("PROBE ")), None)
        out.append(doc or {"torch": None, "torch_why": (stderr.strip().splitlines() or ["no answer"])[-1]})
    return out


def environment(args) -> dict:
    venv = venv_python()
    main, v = probe(sys.executable, venv) if venv else (probe(sys.executable)[0], None)
    env = {"cores": usable_cores(), "python": sys.executable, "torch": main.get("torch"),
           "cuda": bool(main.get("cuda")), "spdl": main.get("spdl"), "spdl_why": main.get("spdl_why"),
           "torchdata": main.get("torchdata"), "torchdata_why": main.get("torchdata_why"),
           "venv": venv, "venv_versions": None, "venv_torchdata": None}
    if v is not None:
        if v.get("torch") and v.get("torchvision"):
            env["venv_versions"] = f"torch {v['torch']}, torchvision {v['torchvision']}"
            env["venv_torchdata"] = v.get("torchdata")
        else:
            env["venv"] = None
    env["tuned"], env["tuned_from"] = tuned_settings(args, env["cores"])
    return env


def tuned_settings(args, cores: int):
    """The settings `--loader tuned` gives a DataLoader(dataset, batch_size, shuffle=True) call:
    from the launcher itself when it has --loader (STALLSCOPE_LOADER_TUNED, as its hooks apply
    them), else the rule of thumb (workers for the usable cores less the training step's,
    persistent, prefetch_factor 4)."""
    launcher = os.path.join(args.build, "bin", "stallscope")
    if os.access(launcher, os.X_OK):
        with tempfile.TemporaryDirectory(prefix="stallscope-loader-bench-") as tmp:
            r = subprocess.run([launcher, "run", "-q", "--loader", "tuned", "-o", os.path.join(tmp, "t.db"), "--",
                                sys.executable, "-c",
                                "import os; print('TUNED ' + os.environ.get('STALLSCOPE_LOADER_TUNED', ''))"],
                               capture_output=True, text=True, timeout=120, check=False)
        for line in r.stdout.splitlines():
            if line.startswith("TUNED {"):
                doc = json.loads(line[6:])
                return ({"num_workers": int(doc["num_workers"]), "persistent_workers": bool(doc["persistent_workers"]),
                         "prefetch_factor": int(doc["prefetch_factor"])}, "stallscope run --loader tuned")
    nw = max(1, cores - 1)
    return ({"num_workers": nw, "persistent_workers": True, "prefetch_factor": 4},
            "the rule of thumb (this build's launcher has no --loader yet)")


# ---------------------------------------------------------------------------------------------
# Data, made once per size under --data and kept


def _fsync_write(path: str, write) -> None:
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())  # dirty pages cannot be dropped: write them now
    os.replace(tmp, path)


def _save_npy(path, array) -> None:
    import numpy as np

    _fsync_write(path, lambda f: np.save(f, array))


def photo(rng, width=500, height=375):
    """A photograph-like RGB image: smooth colour fields, a few hard-edged shapes, sensor noise
    (about 35 KB at quality 90, as camera pictures of this size)."""
    import numpy as np
    from PIL import Image, ImageDraw

    small = Image.fromarray(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)).resize((width, height), Image.BICUBIC)
    draw = ImageDraw.Draw(small)
    for _ in range(4):
        x, y = int(rng.integers(0, width)), int(rng.integers(0, height))
        r = int(rng.integers(10, 80))
        draw.ellipse((x - r, y - r, x + r, y + r), fill=tuple(int(v) for v in rng.integers(0, 256, 3)))
    a = np.asarray(small).astype(np.int16) + rng.normal(0, 4, (height, width, 3)).astype(np.int16)
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))


def make_data(root: str, sizes: dict, cases) -> dict:
    """The data of each case under root (made when missing or of another size)."""
    import numpy as np

    os.makedirs(root, exist_ok=True)
    out = {}
    stamp_path = os.path.join(root, "stamp.json")
    try:
        with open(stamp_path) as f:
            stamp = json.load(f)
    except (OSError, ValueError):
        stamp = {}
    rng = np.random.default_rng(0)
    if "memory" in cases:
        d = os.path.join(root, "memory")
        n = sizes["memory"]["n"]
        if stamp.get("memory") != n:
            os.makedirs(d, exist_ok=True)
            _save_npy(os.path.join(d, "images.npy"), rng.integers(0, 256, (n, 3, 224, 224), dtype=np.uint8))
            _save_npy(os.path.join(d, "labels.npy"), rng.integers(0, 1000, n, dtype=np.int64))
            stamp["memory"] = n
        out["memory"] = {"images": os.path.join(d, "images.npy"), "labels": os.path.join(d, "labels.npy")}
    if "npy" in cases:
        d = os.path.join(root, "npy")
        n = sizes["npy"]["n"]
        if stamp.get("npy") != n:
            os.makedirs(d, exist_ok=True)
            path = os.path.join(d, "images.npy")
            chunk = 1024

            def write(f):
                np.lib.format.write_array_header_1_0(f, {"descr": "|u1", "fortran_order": False,
                                                         "shape": (n, 3, 224, 224)})
                for i in range(0, n, chunk):
                    f.write(rng.integers(0, 256, (min(chunk, n - i), 3, 224, 224), dtype=np.uint8).tobytes())

            _fsync_write(path, write)
            _save_npy(os.path.join(d, "labels.npy"), rng.integers(0, 1000, n, dtype=np.int64))
            stamp["npy"] = n
        out["npy"] = {"images": os.path.join(d, "images.npy"), "labels": os.path.join(d, "labels.npy")}
    if "folder" in cases or "tar" in cases:
        d = os.path.join(root, "jpeg")
        n = max(sizes.get("folder", {}).get("n", 0), sizes.get("tar", {}).get("n", 0))
        folder, shards_dir = os.path.join(d, "folder"), os.path.join(d, "shards")
        shards = [os.path.join(shards_dir, f"train-{s:06d}.tar") for s in range(SHARDS)]
        if stamp.get("jpeg") != n:
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(shards_dir)
            members = [[] for _ in range(SHARDS)]
            for i in range(n):
                buf = io.BytesIO()
                photo(rng).save(buf, "JPEG", quality=90)
                c = i % CLASSES
                os.makedirs(os.path.join(folder, f"class{c:02d}"), exist_ok=True)
                key = f"{i:06d}"
                with open(os.path.join(folder, f"class{c:02d}", key + ".jpg"), "wb") as f:
                    f.write(buf.getvalue())
                members[i % SHARDS].append((key, buf.getvalue(), c))
            for path, items in zip(shards, members, strict=True):
                def write(f, items=items):
                    with tarfile.open(fileobj=f, mode="w", format=tarfile.USTAR_FORMAT) as tf:
                        for key, jpg, c in items:
                            for name, payload in ((key + ".jpg", jpg), (key + ".cls", str(c).encode())):
                                info = tarfile.TarInfo(name)
                                info.size = len(payload)
                                tf.addfile(info, io.BytesIO(payload))

                _fsync_write(path, write)
            stamp["jpeg"] = n
        out["folder"] = {"root": folder}
        out["tar"] = {"shards": shards}
    with open(stamp_path, "w") as f:
        json.dump(stamp, f)
    return out


def drop_pages(paths) -> None:
    """Drops the files' pages from the page cache (clean pages: the files were fsync'ed)."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def warm_pages(paths) -> None:
    for p in paths:
        with open(p, "rb") as f:
            while f.read(1 << 22):
                pass


def jpeg_files(folder: str) -> list[str]:
    out = []
    for dirpath, _, files in os.walk(folder):
        out.extend(os.path.join(dirpath, f) for f in files if f.endswith(".jpg"))
    return sorted(out)


# ---------------------------------------------------------------------------------------------
# Rows


def rows_for(case: str, env: dict) -> list[dict]:
    """The rows of one case: {id, label, kind, python (None: cannot run, with why), ...}."""
    cores = env["cores"]
    jpeg = case in ("folder", "tar")
    tv_python = env["venv"] if jpeg else sys.executable
    tv_why = None if tv_python else "needs torchvision: make its environment with scripts/venv_torchvision.sh"
    rows = []
    for nw in (0, 2, 4):
        rows.append({"id": f"torch{nw}", "label": f"torch DataLoader, num_workers={nw}", "kind": "torch",
                     "num_workers": nw, "python": tv_python, "why": tv_why})
    t = env["tuned"]
    rows.append({"id": "tuned", "label": f"tuned (num_workers={t['num_workers']}, persistent, "
                                         f"prefetch_factor={t['prefetch_factor']})",
                 "kind": "tuned", "settings": t, "python": tv_python, "why": tv_why})
    # ReferenceLoader: with torchvision's chain where the torch rows have it, else the same chain
    # stated natively (an ImageTransform).
    ref_python = (env["venv"] or sys.executable) if jpeg else sys.executable
    default_threads = max(1, cores - 1)  # its default: the usable cores less one (docs/decisions.md)
    rows.append({"id": "reference", "label": f"ReferenceLoader, default threads ({default_threads})",
                 "kind": "reference", "threads": None, "python": ref_python, "why": None})
    if cores > default_threads:
        rows.append({"id": "reference_all", "label": f"ReferenceLoader, threads={cores} (all cores)",
                     "kind": "reference", "threads": cores, "python": ref_python, "why": None})
    spdl_threads = 8  # spdl.dataloader.DataLoader's default num_threads
    rows.append({"id": "spdl", "label": f"SPDL {env['spdl'] or ''} pipeline, {spdl_threads} threads".replace("  ", " "),
                 "kind": "spdl", "threads": spdl_threads, "python": sys.executable if env["spdl"] else None,
                 "why": None if env["spdl"] else f"SPDL: {env['spdl_why']} (scripts/bench_deps.sh)"})
    td_python = (env["venv"] if env["venv_torchdata"] else None) if jpeg else \
        (sys.executable if env["torchdata"] else None)
    td_why = None
    if td_python is None:
        td_why = ("torchdata is not installed in the torchvision environment (scripts/bench_deps.sh)" if jpeg and
                  env["venv"] else tv_why if jpeg else f"torchdata: {env['torchdata_why']} (scripts/bench_deps.sh)")
    for method in ("thread", "process"):
        rows.append({"id": f"torchdata_{method}", "label": f"torchdata.nodes, {cores} {method} workers",
                     "kind": "torchdata", "method": method, "workers": cores, "python": td_python, "why": td_why})
    if case == "memory":
        rows.append({"id": "memcpy", "label": "memcpy, 1 thread: np.copyto of batch-sized blocks", "kind": "memcpy",
                     "python": sys.executable, "why": None})
        rows.append({"id": "gather", "label": "1 thread: np.take of a shuffled batch into one buffer", "kind": "gather",
                     "python": sys.executable, "why": None})
        if env["cuda"]:
            rows.append({"id": "gpu", "label": "ReferenceLoader, device='cuda'", "kind": "gpu",
                         "python": sys.executable, "why": None})
    return rows


# ---------------------------------------------------------------------------------------------
# Running a measured process and watching its memory


def tree(root: int) -> list[int]:
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                try:
                    with open(f"/proc/{pid}/task/{tid}/children") as f:
                        todo.extend(int(c) for c in f.read().split())
                except OSError:
                    pass
        except OSError:
            pass
    return out


def tree_mem_bytes(root: int) -> int:
    """Pss_Anon + Pss_Shmem of root and its descendants (kB in smaps_rollup)."""
    total = 0
    for pid in tree(root):
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith(("Pss_Anon:", "Pss_Shmem:")):
                        total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


class Child:
    """One measured process: the READY/GO/RESULT exchange, and its memory sampled meanwhile."""

    def __init__(self, cmd, spec, env=None):
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([*cmd, CHILD, json.dumps(spec)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, env=env, start_new_session=True)
        self.buf = b""

    def _line(self, timeout: float) -> str | None:
        """The next line of the child's output, None when none came within timeout."""
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.proc.stdout], [], [], left)
            if r:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    raise EOFError
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode(errors="replace")

    def measure(self, limit_s: float, sample_s: float) -> dict:
        """One row: the RESULT document with mem_bytes (peak over baseline) added."""
        deadline = time.monotonic() + limit_s
        baseline = peak = None
        pid = None
        try:
            while time.monotonic() < deadline:
                line = self._line(sample_s if pid else max(0.1, deadline - time.monotonic()))
                if pid is not None:
                    peak = max(peak, tree_mem_bytes(pid))
                if line is None:
                    continue
                if line.startswith("READY "):
                    pid = int(line.split()[1])
                    baseline = peak = tree_mem_bytes(pid)
                    self.proc.stdin.write(b"GO\n")
                    self.proc.stdin.flush()
                elif line.startswith("RESULT "):
                    doc = json.loads(line[7:])
                    if baseline is not None and "error" not in doc:
                        doc["mem_bytes"] = max(0, peak - baseline)
                    return doc
            return {"error": f"no result within {limit_s:.0f} s"}
        except EOFError:
            return {"error": "the measured process ended: " + self.tail()}

    def tail(self) -> str:
        self.log.seek(0)
        lines = [x for x in self.log.read().splitlines() if x.strip()]
        return " | ".join(lines[-3:])[-600:]

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)  # our own child's session
            self.proc.wait()
        self.log.close()


def run_group(python, rows, args) -> list[dict]:
    """Measures `rows` (each with its case's data and sizes) in one process: one row in a full
    run, all of one environment's with --quick."""
    spec = {"rows": [{k: v for k, v in r.items() if k not in ("python", "why", "label")} for r in rows],
            "build": args.build, "python_dir": os.path.join(REPO, "python")}
    child = Child([python], spec)
    out = []
    try:
        for r in rows:
            doc = child.measure(args.limit, args.sample_interval)
            doc["id"] = r["id"]
            if "error" in doc:
                doc["error"] += ("" if "ended" in doc["error"] else " | " + child.tail())
            out.append(doc)
            if "error" in doc and "ended" in doc["error"]:
                out.extend({"id": x["id"], "error": doc["error"]} for x in rows[len(out):])
                break
    finally:
        child.close()
    return out


# ---------------------------------------------------------------------------------------------
# Tables


def fmt_rate(v):
    return "-" if v is None else f"{v:,.0f}".replace(",", " ")


def summarise(results: dict, rows: list[dict]) -> dict:
    """Per row: median samples/s and range, median memory and CPU cores, the info of a run."""
    out = {}
    for r in rows:
        runs = results.get(r["id"], [])
        ok = [x for x in runs if "error" not in x and x.get("seconds")]
        s = {"row": r, "n": len(ok), "errors": [x["error"] for x in runs if "error" in x]}
        if ok:
            rates = [x["samples"] / x["seconds"] for x in ok]
            s["rate"] = statistics.median(rates)
            s["lo"], s["hi"] = min(rates), max(rates)
            s["cores"] = statistics.median(x["cpu_s"] / x["seconds"] for x in ok)
            mem = [x["mem_bytes"] for x in ok if "mem_bytes" in x]
            s["mem"] = statistics.median(mem) if mem else None
            s["info"] = ok[-1].get("info", {})
        out[r["id"]] = s
    return out


def loader_row(case: str, facts: dict, summary: dict, quick: bool) -> None:
    """bench/run's row for one case: the reference loader against the best torch DataLoader."""
    ref, best = facts.get("ref"), facts.get("best")
    if not ref:
        return
    value = f"{fmt_rate(ref)} samples/s"
    goal, met = "", None
    if best:
        x = ref / best
        value += f", {x:.2f}x the best torch DataLoader"
        if case in ("npy", "folder", "tar"):
            goal, met = ">= 3x the best torch DataLoader", x >= 3
    peer = f"torch {fmt_rate(best)} ({facts['best_id']})" if best else ""
    if facts.get("spdl"):
        peer += f"; SPDL {fmt_rate(facts['spdl'])}"
    bench_row(f"reference loader, {CASE_TITLE[case]}{' (--quick size)' if quick else ''}", value, goal, peer, met)


def case_table(case: str, summary: dict, env: dict, limit_rate) -> tuple[list[str], dict]:
    """The Markdown lines of one case's table and the figures its goals need."""
    best_id = None
    for nw in ("torch0", "torch2", "torch4"):
        s = summary.get(nw, {})
        if s.get("rate") is not None and (best_id is None or s["rate"] > summary[best_id]["rate"]):
            best_id = nw
    lines = ["| loader | samples/s (median) | range | memory (MB) | CPU (cores) | samples/s per core | goal |",
             "|---|---|---|---|---|---|---|"]
    ref = summary.get("reference", {})
    best = summary.get(best_id, {}) if best_id else {}
    spdl = summary.get("spdl", {})
    facts = {"best_id": best_id, "best": best.get("rate"), "ref": ref.get("rate"), "spdl": spdl.get("rate")}

    def goal_for(rid):
        if rid == "reference" and ref.get("rate"):
            parts = []
            if case in ("npy", "folder", "tar") and best.get("rate"):
                x = ref["rate"] / best["rate"]
                parts.append(f"{x:.2f}x best torch ({'met' if x >= 3 else 'MISSED'}: >= 3x)")
            if spdl.get("rate"):
                x = ref["rate"] / spdl["rate"]
                parts.append(f"{x:.2f}x SPDL ({'met' if x > 1 else 'MISSED'}: ahead)")
            if case == "memory" and summary.get("memcpy", {}).get("rate"):
                x = ref["rate"] / summary["memcpy"]["rate"]
                parts.append(f"{x * 100:.0f} % of memcpy ({'met' if x >= 0.8 else 'MISSED'}: >= 80 %)")
            if case in ("folder", "tar") and limit_rate and ref.get("cores"):
                per_core = ref["rate"] / ref["cores"]
                parts.append(f"{per_core:.0f}/s per core = {per_core / limit_rate * 100:.0f} % of libjpeg-turbo's "
                             f"full decode ({limit_rate:.0f}/s per core, the limit)")
            pool = ref.get("info", {}).get("pool_bytes")
            if pool is not None:
                parts.append(f"pool {pool / 1e6:.0f} MB in {ref['info'].get('pool_slots')} slots "
                             f"(grown {ref['info'].get('pool_grown')})")
            return "; ".join(parts)
        if rid == "memcpy":
            return "the bound the goal names"
        if rid == "gather":
            return "the same gather without a loader"
        return ""

    for r in [s["row"] for s in summary.values()]:
        s = summary[r["id"]]
        label = r["label"] + (" **(best torch)**" if r["id"] == best_id else "")
        ran = s.get("info", {}).get("threads")
        if r["kind"] == "reference" and r.get("threads") is None and ran is not None:
            label = f"ReferenceLoader, default threads ({ran} here)"  # as the loader chose them
        if r.get("python") is None:
            lines.append(f"| {label} | not run: {r['why']} | | | | | |")
            continue
        if s.get("rate") is None:
            err = (s["errors"] or ["no result"])[0].replace("|", "/")
            lines.append(f"| {label} | failed: {err[:300]} | | | | | |")
            continue
        rate = fmt_rate(s["rate"])
        if r["id"] == "memcpy" or case == "memory":
            rate += f" ({s['rate'] * SAMPLE_BYTES / 1e9:.2f} GB/s)"
        mem = "-" if s.get("mem") is None else f"{s['mem'] / 1e6:.0f}"
        per_core = f"{s['rate'] / s['cores']:.0f}" if s.get("cores") else "-"
        lines.append(f"| {label} | {rate} | {fmt_rate(s['lo'])}-{fmt_rate(s['hi'])} | {mem} | {s['cores']:.2f} "
                     f"| {per_core} | {goal_for(r['id'])} |")
    return lines, facts


def libjpeg_limit(args, folder: str, n: int) -> tuple[float | None, str]:
    """libjpeg-turbo's full decode of the benchmark's own JPEGs, samples/s on one core
    (bench/jpeg_bench.cc), and the line saying so."""
    exe = os.path.join(args.build, "bin", "jpeg_bench")
    if not os.access(exe, os.X_OK):
        return None, f"libjpeg-turbo's decode rate: not measured ({exe} not built)"
    r = subprocess.run([exe, folder, str(min(n, 400))], capture_output=True, text=True, timeout=600, check=False)
    full = src = None
    for line in r.stdout.splitlines():
        if line.startswith("libjpeg-turbo full decode"):
            full = float(line.split()[-4])
        if line.startswith("ImageFolderSource.read"):
            src = float(line.split()[-2])
    if full is None:
        return None, f"libjpeg-turbo's decode rate: jpeg_bench failed: {(r.stderr or r.stdout)[-300:]}"
    return full, (f"libjpeg-turbo full decode of these files: {full:.0f} samples/s on one core (CPU time; "
                  f"jpeg_bench {os.path.basename(folder)} {min(n, 400)}); the loader's JPEG source alone: "
                  f"{src:.0f} samples/s on one core")


def gpu_section(env, results) -> list[str]:
    if not env["cuda"]:
        return [("GPU: no GPU (torch.cuda.is_available() is false here): H2D bandwidth against the device's pinned "
                 "copy rate (goal >= 85 %) and GPU idle in a data-bound loop (goal < 2 %) not measured.")]
    runs = [x for x in results.get("memory", {}).get("gpu", []) if "error" not in x]
    if not runs:
        errors = [x["error"] for x in results.get("memory", {}).get("gpu", [])]
        return [f"GPU: present; not measured ({errors[0] if errors else 'the memory case did not run'})"]
    h2d = statistics.median(x["h2d_Bps"] for x in runs)
    pinned = statistics.median(x["pinned_Bps"] for x in runs)
    idle = statistics.median(x["gpu_idle"] for x in runs)
    step = statistics.median(x["step_ms"] for x in runs)
    ratio = h2d / pinned
    verdict = "met" if ratio >= 0.85 else "MISSED"
    h2d_line = (f"| H2D, batches/s x bytes, nothing else in the loop | {h2d / 1e9:.2f} GB/s = {ratio * 100:.0f} % "
                f"of the device's pinned copy rate ({pinned / 1e9:.2f} GB/s) | >= 85 % ({verdict}) |")
    idle_line = (f"| GPU idle, a {step:.1f} ms GPU step per batch (1.1x the loader's batch interval) | "
                 f"{idle * 100:.1f} % | < 2 % ({'met' if idle < 0.02 else 'MISSED'}) |")
    return ["GPU (the in-memory case, ReferenceLoader(device='cuda'), default threads):", "",
            "| figure | measured | goal |", "|---|---|---|", h2d_line, idle_line]


# ---------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=None, help="interleaved repetitions (default 3; 1 with --quick)")
    ap.add_argument("--quick", action="store_true", help="a reduced size, for the smoke test")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--data", default=None, help="where the data are made and kept (default $TMPDIR/...)")
    ap.add_argument("--markdown", default=None, help="also write the tables to this file")
    ap.add_argument("--limit", type=float, default=600, help="seconds one measurement may take")
    ap.add_argument("--sample-interval", type=float, default=0.1, help="seconds between memory samples")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    cases = [c for c in args.cases.split(",") if c]
    bad = [c for c in cases if c not in CASES]
    if bad:
        ap.error(f"unknown case {', '.join(bad)} (of {', '.join(CASES)})")
    reps = args.reps or (1 if args.quick else 3)
    sizes = QUICK if args.quick else FULL
    data_root = args.data or os.path.join(tempfile.gettempdir(), "stallscope-loader-bench" +
                                          ("-quick" if args.quick else ""))
    t_start = time.monotonic()
    env = environment(args)
    data = make_data(data_root, sizes, cases)
    load_before = os.getloadavg()

    limit_rate, limit_line = (None, "")
    if "folder" in cases or "tar" in cases:
        warm_pages(jpeg_files(data["folder"]["root"]) + list(data["tar"]["shards"]))
        limit_rate, limit_line = libjpeg_limit(args, data["folder"]["root"], sizes["folder"]["n"])

    all_rows = {c: rows_for(c, env) for c in cases}
    for c in cases:
        for r in all_rows[c]:
            r.update(case=c, data=data[c], params=sizes[c])
    results = {c: {} for c in cases}

    loads = []  # the 1-minute load average as each measurement ends

    def record(docs, group):
        loads.append(os.getloadavg()[0])
        for doc, r in zip(docs, group, strict=True):
            results[r["case"]].setdefault(doc["id"], []).append(doc)
            if "error" in doc:
                print(f"loader_bench: {r['case']}/{doc['id']}: {doc['error']}", file=sys.stderr)
            elif not args.quick:  # progress: a full run takes tens of minutes
                print(f"loader_bench: {r['case']}/{doc['id']}: {doc['samples'] / doc['seconds']:.0f} samples/s, "
                      f"{doc['cpu_s'] / doc['seconds']:.2f} cores", file=sys.stderr)

    for _rep in range(reps):
        if args.quick:
            # One process per environment for all cases, the environments side by side: a
            # process start costs seconds, and --quick's figures are not for reading.
            runnable = [r for c in cases for r in all_rows[c] if r["python"]]
            if "npy" in cases:
                drop_pages([data["npy"]["images"], data["npy"]["labels"]])
            groups = [[r for r in runnable if r["python"] == py] for py in dict.fromkeys(r["python"] for r in runnable)]
            with concurrent.futures.ThreadPoolExecutor(len(groups) or 1) as pool:
                done = list(pool.map(lambda g: run_group(g[0]["python"], g, args), groups))
            for docs, group in zip(done, groups, strict=True):
                record(docs, group)
            continue
        for case in cases:  # one process per row: a fresh tree for memory and CPU
            if case in ("folder", "tar"):
                warm_pages(jpeg_files(data["folder"]["root"]) if case == "folder" else list(data["tar"]["shards"]))
            for r in all_rows[case]:
                if not r["python"]:
                    continue
                if case == "npy":
                    drop_pages([data["npy"]["images"], data["npy"]["labels"]])
                record(run_group(r["python"], [r], args), [r])
    load_after = os.getloadavg()

    out = []
    npy_bytes = None
    if "npy" in cases:
        npy_bytes = os.path.getsize(data["npy"]["images"]) + os.path.getsize(data["npy"]["labels"])
    load_seen = (f"load average {load_before[0]:.2f} before, {min(loads):.2f}-{max(loads):.2f} during (median "
                 f"{statistics.median(loads):.2f}), {load_after[0]:.2f} after" if loads else "")
    out.append(f"Loader benchmark ({'--quick, ' if args.quick else ''}{env['cores']} usable cores, {reps} interleaved "
               f"run{'s' if reps > 1 else ''} per row; {load_seen}; {time.monotonic() - t_start:.0f} s)")
    out.append("")
    out.append(f"- torch {env['torch']} ({sys.executable}); JPEG rows with torchvision: "
               + (f"{env['venv_versions']} ({env['venv']})" if env["venv"] else "no torchvision "
                  "environment (scripts/venv_torchvision.sh)") + f"; SPDL {env['spdl'] or 'absent'}; torchdata "
               f"{env['torchdata'] or 'absent'}")
    out.append(f"- tuned settings from {env['tuned_from']}: {json.dumps(env['tuned'])}")
    out.append("- samples/s: timed batches after warm-up, epochs back to back (a non-persistent DataLoader restarts "
               "its workers at each epoch, as in training); memory: peak Pss_Anon + Pss_Shmem of the process tree "
               "beyond the dataset's own; CPU: the tree's CPU time over the timed batches / wall time")
    for case in cases:
        p = sizes[case]
        summary = summarise(results[case], all_rows[case])
        lines, facts = case_table(case, summary, env, limit_rate if case in ("folder", "tar") else None)
        loader_row(case, facts, summary, args.quick)
        out.append("")
        out.append(f"### {CASE_TITLE[case]}")
        detail = f"{p['n']} samples, batch {p['batch_size']}, {p['warmup']} warm-up + {p['batches']} timed batches"
        if case == "npy":
            read = (p["warmup"] + p["batches"]) * p["batch_size"]
            detail += (f"; file {npy_bytes / 1e9:.2f} GB, of which a run reads {read * SAMPLE_BYTES / 1e9:.2f} GB "
                       f"({read} of {p['n']} rows, no row twice): the page cache holds none of it when a run starts "
                       "(pages dropped with posix_fadvise DONTNEED) and never serves a row a second time, i.e. the "
                       "set is bigger than the cache it is allowed")
        if case in ("folder", "tar"):
            detail += "; files in the page cache. " + limit_line
        out.append(detail)
        out.append("")
        out.extend(lines)
    out.append("")
    out.extend(gpu_section(env, results))
    text = "\n".join(out)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
