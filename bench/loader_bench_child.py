"""The measured process of bench/loader_bench.py: builds one loader after another over one case's
data, and times each in steady state. Run by loader_bench.py, never by hand:
    python loader_bench_child.py SPEC_JSON

For each row of the spec it builds the loader, prints `READY <pid>` and waits for a line on stdin
(the parent reads the process tree's memory then, as the baseline), iterates epochs back to back
as a training loop does (warm-up batches, then the timed ones), and prints `RESULT <json>`:
samples, seconds, CPU seconds of this process and its descendants over the timed batches, and
what the loader ran with. Nothing is done with a batch but checking the first one's shapes and
dtypes, so a loader is timed on the work of producing it.

The loaders are each used the way their documentation shows for the case (docs/decisions.md,
"The loader benchmark"): torch's DataLoader over a map-style Dataset (torchvision's ImageFolder
and transforms for JPEGs); torchdata.nodes as its migration guide builds a DataLoader (Sampler ->
Batcher -> ParallelMapper(map and collate) -> Prefetcher -> Loader); SPDL as a thread pipeline
(PipelineBuilder: source -> stages -> sink) with batch-level gathers for arrays and FFmpeg-filter
decoding for JPEGs; ReferenceLoader through its constructors.
"""

from __future__ import annotations

import gc
import importlib.util
import itertools
import json
import os
import sys
import time
import warnings

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


# ---------------------------------------------------------------------------------------------
# The process tree's CPU time


def _children(pid: int) -> list[int]:
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    out.extend(int(c) for c in f.read().split())
            except OSError:
                pass
    except OSError:
        pass
    return out


def tree_cpu_s(root: int) -> float:
    """CPU seconds of `root` and its live descendants, with the children each has reaped
    (cutime, cstime): a DataLoader worker that exits within the timed batches still counts."""
    tick = os.sysconf("SC_CLK_TCK")
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        except (OSError, IndexError, ValueError):
            continue
        todo.extend(_children(pid))
    return total / tick


# ---------------------------------------------------------------------------------------------
# Datasets (map-style, as a PyTorch user writes them)


def memory_arrays(data):
    """The in-memory images and labels: read whole from the .npy files (anonymous memory, like a
    dataset built in the script), as torch tensors."""
    import numpy as np
    import torch

    images = torch.from_numpy(np.load(data["images"]))
    labels = torch.from_numpy(np.load(data["labels"]))
    return images, labels


class NpyDataset:
    """Rows of memory-mapped .npy files: (image tensor, label). The mapping is opened in each
    process that reads (after the DataLoader's fork), as is usual for memmaps."""

    def __init__(self, images_path, labels_path):
        import numpy as np

        self.paths = (images_path, labels_path)
        self._arrays = None
        self._n = len(np.load(labels_path, mmap_mode="r"))

    def __len__(self):
        return self._n

    def _open(self):
        import numpy as np

        if self._arrays is None or self._arrays[0] != os.getpid():
            self._arrays = (os.getpid(), np.load(self.paths[0], mmap_mode="r"), np.load(self.paths[1], mmap_mode="r"))
        return self._arrays[1], self._arrays[2]

    def __getitem__(self, i):
        import torch

        images, labels = self._open()
        with warnings.catch_warnings():  # a read-only view: collate copies it into the batch
            warnings.simplefilter("ignore", UserWarning)
            x = torch.from_numpy(images[i])
        return x, int(labels[i])


class TarDataset:
    """JPEGs in WebDataset-style tar shards (key.jpg + key.cls), map-style: the members' offsets
    are indexed once, a sample is one pread, Pillow's decode and the torchvision transform (the
    same work as torchvision's ImageFolder, from tar members)."""

    def __init__(self, shards, transform):
        import tarfile

        self.transform = transform
        self.shards = list(shards)
        self.items = []  # (shard index, offset, size, label)
        for s, path in enumerate(self.shards):
            with tarfile.open(path) as tf:
                members = tf.getmembers()
                labels = {}
                jpgs = []
                for m in members:
                    key, _, ext = m.name.rpartition(".")
                    if ext == "cls":
                        labels[key] = int(tf.extractfile(m).read())
                    elif ext in ("jpg", "jpeg"):
                        jpgs.append((key, m.offset_data, m.size))
                self.items.extend((s, off, size, labels[key]) for key, off, size in jpgs)
        self._fds = None

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        import io

        from PIL import Image

        if self._fds is None or self._fds[0] != os.getpid():
            self._fds = (os.getpid(), [os.open(p, os.O_RDONLY) for p in self.shards])
        s, off, size, label = self.items[i]
        img = Image.open(io.BytesIO(os.pread(self._fds[1][s], size, off))).convert("RGB")
        return self.transform(img), label


def image_folder_samples(root):
    """(path, class index) of an ImageFolder tree in torchvision's order (classes sorted, files
    sorted within each), for loaders that take a list."""
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    out = []
    for c, name in enumerate(classes):
        for dirpath, _, files in sorted(os.walk(os.path.join(root, name))):
            out.extend((os.path.join(dirpath, f), c) for f in sorted(files) if f.lower().endswith((".jpg", ".jpeg")))
    return out


def torchvision_transform():
    import torchvision.transforms as T

    return T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])


# ---------------------------------------------------------------------------------------------
# Loaders: each returns (make_stream, close, info). make_stream() is an endless iterator of
# batches [images, labels] across epochs.


def _epochs(loader):
    while True:
        yield from loader


def _dataset(case, data, bs_params):
    """The map-style dataset torch's DataLoader and torchdata read for this case."""
    import torch

    if case == "memory":
        return torch.utils.data.TensorDataset(*memory_arrays(data))
    if case == "npy":
        return NpyDataset(data["images"], data["labels"])
    if case == "folder":
        import torchvision

        return torchvision.datasets.ImageFolder(data["root"], torchvision_transform())
    if case == "tar":
        return TarDataset(data["shards"], torchvision_transform())
    raise ValueError(case)


def torch_loader(case, data, p, num_workers=0, tuned=None):
    import torch

    ds = _dataset(case, data, p)
    kwargs = {"batch_size": p["batch_size"], "shuffle": True, "num_workers": num_workers}
    if tuned is not None:  # the settings `stallscope run --loader tuned` gives this call
        kwargs.update(tuned)
    loader = torch.utils.data.DataLoader(ds, **kwargs)
    info = {"num_workers": loader.num_workers, "persistent_workers": loader.persistent_workers,
            "prefetch_factor": loader.prefetch_factor, "pin_memory": loader.pin_memory}
    return (lambda: _epochs(loader)), (lambda: None), info


def reference_loader(case, data, p, threads=None):
    import stallscope

    R = stallscope.ReferenceLoader
    kw = {"batch_size": p["batch_size"], "shuffle": True, "threads": threads}
    if case == "memory":
        loader = R.from_tensors(*memory_arrays(data), **kw)
    elif case == "npy":
        loader = R.from_npy(data["images"], data["labels"], **kw)
    else:
        try:
            transform = torchvision_transform()  # the user's chain, mapped to the native one
        except ImportError:
            transform = stallscope.ImageTransform(flip=0.5, mean=MEAN, std=STD)  # the same chain, stated natively
        if case == "folder":
            loader = R.from_image_folder(data["root"], transform, **kw)
        else:
            loader = R.from_tar_shards(data["shards"], transform, **kw)
    info = {"threads": loader.num_workers, "prefetch": loader.prefetch}
    info["transform"] = loader.transform.describe() if loader.transform is not None else None
    state = {"loader": loader}

    def close():
        state["pool"] = loader.pool_stats()
        loader.close()

    info["_pool"] = state
    return (lambda: _epochs(loader)), close, info


class MapAndCollate:
    """torchdata's migration guide's map function: a batch of indices through the dataset, then
    torch's default collate."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __call__(self, indices):
        from torch.utils.data import default_collate

        return default_collate([self.dataset[i] for i in indices])


def torchdata_loader(case, data, p, method, workers):
    import torch
    import torchdata.nodes as tn

    ds = _dataset(case, data, p)
    node = tn.SamplerWrapper(torch.utils.data.RandomSampler(ds))
    node = tn.Batcher(node, batch_size=p["batch_size"], drop_last=False)
    node = tn.ParallelMapper(node, map_fn=MapAndCollate(ds), num_workers=workers, method=method, in_order=True)
    node = tn.Prefetcher(node, prefetch_factor=workers * 2)
    loader = tn.Loader(node)
    info = {"method": method, "num_workers": workers, "prefetch_factor": workers * 2}
    return (lambda: _epochs(loader)), (lambda: None), info


def _index_stream(n, batch_size, seed=0):
    """Shuffled indices, epoch after epoch, cut into batches (the last of an epoch shorter)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    while True:
        perm = rng.permutation(n)
        for i in range(0, n, batch_size):
            yield perm[i:i + batch_size]


def spdl_loader(case, data, p, threads):
    import numpy as np
    import spdl.io
    import torch
    from spdl.pipeline import PipelineBuilder

    bs = p["batch_size"]
    b = PipelineBuilder()
    if case in ("memory", "npy"):
        if case == "memory":
            images, labels = (t.numpy() for t in memory_arrays(data))
        else:
            images, labels = np.load(data["images"], mmap_mode="r"), np.load(data["labels"], mmap_mode="r")

        def gather(idx):  # NumPy's take releases the GIL; rows land in one new batch array
            return [torch.from_numpy(images[idx]), torch.from_numpy(labels[idx])]

        b.add_source(_index_stream(len(labels), bs)).pipe(gather, concurrency=threads)
    else:
        mean = torch.tensor(MEAN).view(1, 3, 1, 1) * 255
        std = torch.tensor(STD).view(1, 3, 1, 1) * 255
        rrc = _RandomResizedCrop(224)

        def decode(item):  # one image: FFmpeg decodes, crops, scales and flips it (a filter graph)
            src, label = item
            packets = spdl.io.demux_image(src)
            return spdl.io.decode_packets(packets, filter_desc=rrc.filter_desc(packets.width, packets.height)), label

        def batchify(items):  # the frames into one uint8 NHWC buffer, then ToTensor + Normalize
            frames = spdl.io.convert_frames([f for f, _ in items])
            x = spdl.io.to_torch(frames).permute(0, 3, 1, 2).float().sub_(mean).div_(std).contiguous()
            return [x, torch.tensor([label for _, label in items])]

        if case == "folder":
            samples = image_folder_samples(data["root"])

            def paths():
                for idx in _index_stream(len(samples), len(samples)):
                    yield from (samples[i] for i in idx)

            b.add_source(paths())
        else:
            shards = list(data["shards"])

            def shard_stream():  # WebDataset's order: shards shuffled each epoch, members in order
                rng = np.random.default_rng(0)
                while True:
                    yield from (shards[i] for i in rng.permutation(len(shards)))

            def read_shard(path):  # spdl.io.iter_tarfile over the shard's bytes, as SPDL's example
                with open(path, "rb") as f:
                    raw = f.read()
                jpgs, labels = {}, {}
                for name, content in spdl.io.iter_tarfile(raw):
                    key, _, ext = name.rpartition(".")
                    if ext == "cls":
                        labels[key] = int(bytes(content))
                    else:
                        jpgs[key] = bytes(content)
                return [(jpgs[k], labels[k]) for k in jpgs]

            b.add_source(shard_stream()).pipe(read_shard).disaggregate()
        b.pipe(decode, concurrency=threads).aggregate(bs).pipe(batchify, concurrency=threads)
    pipeline = b.add_sink(p.get("spdl_buffer", 3)).build(num_threads=threads)
    pipeline.start()
    info = {"threads": threads}
    return (lambda: iter(pipeline.get_iterator())), (lambda: pipeline.stop()), info


class _RandomResizedCrop:
    """torchvision's RandomResizedCrop.get_params (scale (0.08, 1), ratio (3/4, 4/3)) and a 0.5
    flip, as an FFmpeg filter description (crop, bilinear scale, hflip, RGB)."""

    def __init__(self, size, seed=0):
        import random

        self.size = size
        self.rng = random.Random(seed)

    def box(self, width, height):
        import math

        area = width * height
        log_ratio = (math.log(3 / 4), math.log(4 / 3))
        for _ in range(10):
            target = area * self.rng.uniform(0.08, 1.0)
            aspect = math.exp(self.rng.uniform(*log_ratio))
            w = round(math.sqrt(target * aspect))
            h = round(math.sqrt(target / aspect))
            if 0 < w <= width and 0 < h <= height:
                return self.rng.randint(0, width - w), self.rng.randint(0, height - h), w, h
        ratio = width / height
        if ratio < 3 / 4:
            w, h = width, round(width / (3 / 4))
        elif ratio > 4 / 3:
            h, w = height, round(height * (4 / 3))
        else:
            w, h = width, height
        return (width - w) // 2, (height - h) // 2, w, h

    def filter_desc(self, width, height):
        x, y, w, h = self.box(width, height)
        flip = ",hflip" if self.rng.random() < 0.5 else ""
        return (f"crop={w}:{h}:{x}:{y},scale={self.size}:{self.size}:flags=bilinear{flip},"
                "format=pix_fmts=rgb24")


def memcpy_stream(data, p):
    """Not a loader: the in-memory case's bound. One thread copies the in-memory images, batch by
    batch in storage order, into one reused batch buffer with np.copyto (memory to memory, as the
    loaders' gathers are: the 600 MB do not fit in a cache, a 38 MB block would partly)."""
    import numpy as np

    images = np.load(data["images"])
    bs = p["batch_size"]
    dst = np.empty_like(images[:bs])
    starts = list(range(0, len(images) - bs + 1, bs))

    def stream():
        for i in itertools.cycle(starts):
            np.copyto(dst, images[i:i + bs])
            yield [dst[:, 0, 0, 0]]  # only the batch dimension is counted

    return stream, (lambda: None), {"threads": 1, "bytes_per_sample": int(images[0].nbytes)}


def gather_stream(data, p):
    """Not a loader: what one thread does at best for this case's gather. np.take of a shuffled
    batch of rows (150 KB each) into one reused buffer: the loader's work without its threads,
    queues or Python, and with rows too small for the non-temporal stores glibc's memcpy uses on
    large blocks."""
    import numpy as np

    images = np.load(data["images"])
    bs = p["batch_size"]
    dst = np.empty_like(images[:bs])
    batches = _index_stream(len(images), bs)

    def stream():
        for idx in batches:
            n = len(idx)
            np.take(images, idx, axis=0, out=dst[:n])
            yield [dst[:n, 0, 0, 0]]

    return stream, (lambda: None), {"threads": 1}


def build(row, case, data, p):
    kind = row["kind"]
    if kind == "torch":
        return torch_loader(case, data, p, num_workers=row["num_workers"])
    if kind == "tuned":
        return torch_loader(case, data, p, tuned=row["settings"])
    if kind == "reference":
        return reference_loader(case, data, p, threads=row.get("threads"))
    if kind == "torchdata":
        return torchdata_loader(case, data, p, row["method"], row["workers"])
    if kind == "spdl":
        return spdl_loader(case, data, p, row["threads"])
    if kind == "memcpy":
        return memcpy_stream(data, p)
    if kind == "gather":
        return gather_stream(data, p)
    raise ValueError(kind)


# ---------------------------------------------------------------------------------------------
# With a CUDA device: the reference loader's copies against the device's pinned copy rate, and the
# GPU's idle time when the loop's GPU step takes a little longer than the loader needs per batch.


def gpu_measure(data, p):
    """Returns the result fields of the 'gpu' row (called between READY/GO and RESULT)."""
    import torch

    import stallscope

    images, labels = memory_arrays(data)
    dev = torch.device("cuda", torch.cuda.current_device())
    bs = p["batch_size"]
    nbytes = bs * images[0].numel()
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dst = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    pinned = 0.0
    for _ in range(20):  # the device's pinned host-to-device copy rate: the best of 20 batch-sized copies
        start.record()
        dst.copy_(host, non_blocking=True)
        end.record()
        end.synchronize()
        pinned = max(pinned, nbytes / (start.elapsed_time(end) / 1e3))
    del host, dst
    loader = stallscope.ReferenceLoader.from_tensors(images, labels, batch_size=bs, shuffle=True, device=dev)
    stream = _epochs(loader)
    for _ in range(p["warmup"]):
        next(stream)
    torch.cuda.synchronize()
    t0, n = time.perf_counter(), 0
    for _ in range(p["batches"]):  # nothing but the batches: the loader's copies set the pace
        n += len(next(stream)[0])
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    h2d = n * (images[0].numel() + labels[0].element_size()) / seconds
    # A step of matrix products sized to 1.1x the loader's batch interval: a loader that keeps up
    # leaves the GPU idle only between steps.
    a = torch.randn(2048, 2048, device=dev)
    start.record()
    for _ in range(10):
        a @ a
    end.record()
    end.synchronize()
    per_mm = start.elapsed_time(end) / 1e3 / 10
    k = max(1, round(1.1 * seconds / p["batches"] / per_mm))
    events = []
    for _ in range(p["batches"]):
        x, _y = next(stream)
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        x.float().mean()
        for _ in range(k):
            a @ a
        e1.record()
        events.append((e0, e1))
    torch.cuda.synchronize()
    busy = sum(e0.elapsed_time(e1) for e0, e1 in events)
    wall = events[0][0].elapsed_time(events[-1][1])
    loader.close()
    return {"samples": n, "seconds": seconds, "cpu_s": 0.0, "pinned_Bps": pinned, "h2d_Bps": h2d,
            "gpu_idle": max(0.0, 1 - busy / wall), "step_ms": k * per_mm * 1e3,
            "info": {"threads": loader.num_workers, "device": str(dev)}}


# ---------------------------------------------------------------------------------------------
# Timing


def check_batch(case, batch, p):
    """Every loader must hand the same thing: the images at full size and dtype, labels int64."""
    import torch

    x, y = batch[0], batch[1]
    shape = (3, 224, 224)
    dtype = torch.uint8 if case in ("memory", "npy") else torch.float32
    if tuple(x.shape[1:]) != shape or x.dtype != dtype or y.dtype != torch.int64 or len(y) != len(x):
        raise AssertionError(f"{case}: batch {tuple(x.shape)} {x.dtype}, labels {tuple(y.shape)} {y.dtype}; "
                             f"expected [B, {', '.join(map(str, shape))}] {dtype} and int64 [B]")


def measure(row):
    case, data, p = row["case"], row["data"], row["params"]
    if row["kind"] == "gpu":
        print(f"READY {os.getpid()}", flush=True)
        if sys.stdin.readline().strip() != "GO":
            raise SystemExit("loader_bench_child: no GO from the parent")
        print("RESULT " + json.dumps({"id": row["id"], **gpu_measure(data, p)}), flush=True)
        return
    make_stream, close, info = build(row, case, data, p)
    gc.collect()
    print(f"READY {os.getpid()}", flush=True)
    if sys.stdin.readline().strip() != "GO":
        raise SystemExit("loader_bench_child: no GO from the parent")
    stream = make_stream()
    t_first = time.perf_counter()
    first = next(stream)
    if row["kind"] not in ("memcpy", "gather"):
        check_batch(case, first, p)
    del first
    for _ in range(p["warmup"] - 1):
        next(stream)
    warm_s = time.perf_counter() - t_first
    me = os.getpid()
    c0, t0 = tree_cpu_s(me), time.perf_counter()
    n = 0
    for batch in itertools.islice(stream, p["batches"]):
        n += len(batch[0])
        del batch
    t1, c1 = time.perf_counter(), tree_cpu_s(me)
    # torchdata's process workers can block in their shutdown while sending a batch that will not
    # be read (multiprocessing's resource_sharer), so that row's figures go out before it is shut.
    shut_late = row["kind"] == "torchdata"
    if not shut_late:
        if hasattr(stream, "close"):
            stream.close()
        close()
    pool = info.pop("_pool", None)
    if pool is not None and "pool" in pool:
        info["pool_bytes"] = pool["pool"].get("bytes")
        info["pool_slots"] = pool["pool"].get("slots")
        info["pool_grown"] = pool["pool"].get("grown")
    result = {"id": row["id"], "samples": n, "seconds": t1 - t0, "cpu_s": c1 - c0, "warmup_s": warm_s, "info": info}
    if shut_late:
        print("RESULT " + json.dumps(result), flush=True)
        if hasattr(stream, "close"):
            stream.close()
        close()
    del stream, make_stream, close
    gc.collect()
    if not shut_late:
        print("RESULT " + json.dumps(result), flush=True)


def _import_stallscope(spec):
    """stallscope from this work tree, with the loader's module of the build being measured."""
    sys.path.insert(0, spec["python_dir"])
    lib = os.path.join(spec["build"], "lib")
    if "_stallscope_loader" not in sys.modules and os.path.isdir(lib):
        for f in sorted(os.listdir(lib)):
            if f.startswith("_stallscope_loader") and f.endswith(".so"):
                s = importlib.util.spec_from_file_location("_stallscope_loader", os.path.join(lib, f))
                mod = importlib.util.module_from_spec(s)
                s.loader.exec_module(mod)
                sys.modules["_stallscope_loader"] = mod
                break


def main():
    spec = json.loads(sys.argv[1])
    _import_stallscope(spec)
    for row in spec["rows"]:
        try:
            measure(row)
        except Exception as e:
            import traceback

            traceback.print_exc()
            print("RESULT " + json.dumps({"id": row["id"], "error": f"{type(e).__name__}: {e}"}), flush=True)


if __name__ == "__main__":
    main()
