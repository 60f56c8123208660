"""`--loader reference`: whether a DataLoader(...) call can be served by stallscope.ReferenceLoader
with the same batches, and the ReferenceLoader that serves it.

Accepted (plan() says why not otherwise; the caller falls back to tuned):
- datasets: a torchvision ImageFolder (a DatasetFolder keeping its __getitem__) of JPEGs, read with
  torchvision's PIL loader, no target_transform, and a transform that native_transform maps (the
  classic RandomResizedCrop / Resize / CenterCrop / RandomHorizontalFlip / ToTensor / Normalize
  chain): its own samples, classes and transform are used (ReferenceLoader.from_image_folder);
  a TensorDataset (tensors on the CPU); a NumPy array, np.memmap included (np.load with
  mmap_mode: rows are read through the mapping, so a file larger than memory works), or a CPU
  tensor used as the dataset itself: sample i is row i; dtypes bool, int8/16/32/64, uint8,
  float16/32/64; at least one dimension; arrays little-endian, and a memmap C-contiguous (making
  it contiguous would read it whole into memory). A subclass counts only when it keeps the
  base class's __getitem__ and __len__;
- the call: batch_size set (not None), no sampler, batch_sampler or collate_fn (torch's
  default_collate is fine), no worker_init_fn when it would have run (num_workers > 0); shuffle,
  drop_last, pin_memory, generator, timeout, prefetch_factor, persistent_workers, in_order and the
  multiprocessing context are taken or irrelevant; a DataLoader subclass must not override
  __iter__.
What the script then gets per epoch, against torch's default collate over the same dataset: the
same samples (a permutation with shuffle, else in order; drop_last drops a short last batch as
torch does, with shuffle other samples than torch's as any other shuffle would), the
same batch structure (a list of one tensor per field for a TensorDataset, [images, labels] for an
ImageFolder; the tensor itself for an array or a tensor), shapes, dtypes and values (for images:
torchvision's within the tolerance docs/decisions.md states, and random crops and flips drawn from
torchvision's distributions by the loader's own generator). The order of a shuffled epoch is the
ReferenceLoader's (seed, epoch) permutation; its seed is drawn from torch's generator (the
DataLoader's, else the global one) at the first iter(), and each iter() draws from it what torch's
iterator and RandomSampler draw, so the script's own random numbers after the loop follow the same
stream as under torch (without a generator; with one, one draw an epoch stands for RandomSampler's
randperm; and not for an ImageFolder, whose random transforms drew from torch's generator under
torch's DataLoader without workers). Threads: the ReferenceLoader's default (usable cores less one). When CUDA is used,
batches are copied to the device on the loader's stream (ReferenceLoader(device=...)), as tuned's
prefetch does.
"""

from __future__ import annotations

import json

from ..reference_loader import ReferenceLoader, _native_module

_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64")
_READS = "reads TensorDataset, NumPy arrays and memmaps, CPU tensors and ImageFolder natively"


class Plan:
    """How to build the ReferenceLoader of one DataLoader(...) call."""

    __slots__ = ("arrays", "image_folder", "unwrap", "dataset_class", "batch_size", "shuffle", "drop_last",
                 "pin_memory", "generator", "persistent")

    def __init__(self):
        self.arrays = None  # the fields, in memory or mapped
        self.image_folder = None  # or the torchvision ImageFolder, read with its samples and transform
        self.unwrap = False  # one field handed as the tensor itself (an array or tensor dataset)
        self.dataset_class = None
        self.batch_size = 1
        self.shuffle = False
        self.drop_last = False
        self.pin_memory = False
        self.generator = None
        self.persistent = False  # the script's loader had persistent workers: one base seed draw in all


class _Replacement(ReferenceLoader):
    """A ReferenceLoader in place of a DataLoader: its dl.config says what it replaced, and where
    the DataLoader was made."""

    _stallscope_swap = None

    def _config(self, L) -> str:
        doc = json.loads(super()._config(L))
        swap = self._stallscope_swap
        if swap is not None:
            doc["created_at"] = swap.where
            doc["replaced"] = swap.replaced_doc()
        return json.dumps(doc, separators=(",", ":"))


def _same_method(cls, base, name) -> bool:
    return getattr(cls, name, None) is getattr(base, name, None)


def _array_reason(torch, i, a):
    """Why field i cannot be read natively, or None."""
    if torch.is_tensor(a):
        if a.device.type != "cpu":
            return f"tensor {i} is on {a.device}"
        if a.dim() == 0:
            return f"tensor {i} is 0-d"
        name = str(a.dtype).replace("torch.", "")
        if name not in _DTYPES:
            return f"tensor {i} has dtype {name}"
        return None
    import numpy as np

    if not isinstance(a, np.ndarray):
        return f"field {i} is a {type(a).__name__}"
    if a.ndim == 0:
        return f"array {i} is 0-d"
    if a.dtype.name not in _DTYPES:
        return f"array {i} has dtype {a.dtype}"
    if a.dtype.byteorder == ">":
        return f"array {i} is big-endian"
    if isinstance(a, np.memmap) and not a.flags["C_CONTIGUOUS"]:
        return f"memmap {i} is not C-contiguous (making it so would read it whole into memory)"
    return None


def _image_folder(ds):
    """For a torchvision ImageFolder (or DatasetFolder with its __getitem__): None when the reference
    loader reads it as torchvision does, else why not. Any other dataset: False."""
    mro = [(c.__module__, c.__name__) for c in type(ds).__mro__]
    if ("torchvision.datasets.folder", "DatasetFolder") not in mro:
        return False
    from .._image_transform import native_transform
    from ..reference_loader import _image_folder_parts

    try:
        _root, _classes, samples, transform = _image_folder_parts(ds)
    except ValueError as e:  # "ReferenceLoader.from_image_folder: <class> has a target_transform, ..."
        msg, prefix = str(e), f"ReferenceLoader.from_image_folder: {type(ds).__name__} "
        return "it " + msg[len(prefix):] if msg.startswith(prefix) else msg
    desc, why = native_transform(transform)
    if desc is None:
        return f"its transform does not run natively: {why}"
    for i, (path, _) in enumerate(samples):
        if not path.lower().endswith((".jpg", ".jpeg")):
            return f"{path} (sample {i}) is not a JPEG by its name; the reference loader decodes JPEG only"
    return None


def _source(torch, ds):
    """(fields, unwrap) for a dataset read natively ("image_folder", False for an ImageFolder),
    or (None, why not)."""
    import numpy as np
    from torch.utils.data import TensorDataset

    folder = _image_folder(ds)
    if folder is None:
        return ("image_folder", False), None
    if folder is not False:
        return None, folder
    if isinstance(ds, TensorDataset):
        cls = type(ds)
        if not all(_same_method(cls, TensorDataset, m) for m in ("__getitem__", "__len__", "__getitems__")):
            return None, f"a TensorDataset subclass with its own __getitem__; the reference loader {_READS}"
        fields = list(ds.tensors)
        unwrap = False
    elif torch.is_tensor(ds) or isinstance(ds, np.ndarray):
        fields = [ds]
        unwrap = True
    else:
        return None, f"its __getitem__ is Python code; the reference loader {_READS}"
    for i, a in enumerate(fields):
        why = _array_reason(torch, i, a)
        if why is not None:
            return None, why
    if len(fields[0]) == 0:
        return None, "the dataset is empty"
    return (fields, unwrap), None


def plan(loader, val, ds, dl_class):
    """(Plan, None) when the call can be served by a ReferenceLoader, else (None, reason)."""
    import torch
    from torch.utils.data import default_collate

    if not _same_method(type(loader), dl_class, "__iter__"):
        return None, f"the loader is a {type(loader).__name__}, which overrides DataLoader.__iter__"
    if val("batch_size") is None:
        return None, "batch_size=None (samples handed one by one, not collated)"
    if val("batch_sampler") is not None:
        return None, f"a batch_sampler ({type(val('batch_sampler')).__name__})"
    if val("sampler") is not None:
        return None, f"a sampler ({type(val('sampler')).__name__})"
    if val("collate_fn") not in (None, default_collate):
        return None, "a collate_fn"
    nw = val("num_workers")
    if val("worker_init_fn") is not None and isinstance(nw, int) and nw > 0:
        return None, "a worker_init_fn, which would run in torch's worker processes"
    src, why = _source(torch, ds)
    if src is None:
        return None, why
    bs = val("batch_size")
    if isinstance(bs, bool) or not isinstance(bs, int) or bs < 1:
        return None, f"batch_size={bs!r}"
    try:
        _native_module()
    except ImportError as e:
        return None, str(e).removeprefix("stallscope: ")
    p = Plan()
    p.arrays, p.unwrap = src
    if p.arrays == "image_folder":
        p.arrays, p.image_folder = None, ds
    p.dataset_class = type(ds).__name__
    p.batch_size = bs
    p.shuffle = bool(val("shuffle"))
    p.drop_last = bool(val("drop_last"))
    p.pin_memory = bool(val("pin_memory"))
    p.generator = val("generator")
    p.persistent = bool(val("persistent_workers")) and isinstance(nw, int) and nw > 0
    return p, None


def _draw(torch, generator) -> int:
    return int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())


def _epoch_draws(torch, p: Plan, first: bool):
    """What torch's iterator and RandomSampler draw when an epoch starts; returns the sampler's."""
    if first or not p.persistent:
        _draw(torch, p.generator)  # _BaseDataLoaderIter's base seed (once with persistent workers)
    return _draw(torch, p.generator) if p.shuffle else 0


def build(swap, device):
    """The ReferenceLoader for swap.plan, with the first epoch's draws done."""
    import torch

    p = swap.plan
    seed = _epoch_draws(torch, p, first=True) % (1 << 64)
    # rank and world_size: the script's DataLoader read the whole dataset in every process (it
    # had no DistributedSampler: a sampler makes a fallback), whatever torch.distributed says.
    kw = {"batch_size": p.batch_size, "shuffle": p.shuffle, "seed": seed, "drop_last": p.drop_last, "rank": 0,
          "world_size": 1, "pin_memory": p.pin_memory or device is not None, "device": device,
          "_dataset_class": p.dataset_class}
    if p.image_folder is not None:
        ref = _Replacement.from_image_folder(p.image_folder, **kw)
    else:
        ref = _Replacement(list(p.arrays), unwrap=p.unwrap, **kw)
    ref._created_at = swap.where
    ref._stallscope_swap = swap
    return ref


def next_epoch(swap):
    """The draws of a later epoch (the order itself comes from the loader's seed and epoch)."""
    import torch

    _epoch_draws(torch, swap.plan, first=False)

