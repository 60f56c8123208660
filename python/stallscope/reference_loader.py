"""stallscope.ReferenceLoader: a prefetching loader with native worker threads, in place of
torch.utils.data.DataLoader for the datasets it reads natively.

    loader = stallscope.ReferenceLoader.from_tensors(images, labels, batch_size=256, shuffle=True)
    loader = stallscope.ReferenceLoader.from_npy("x.npy", "y.npy", batch_size=256, shuffle=True)
    loader = stallscope.ReferenceLoader.from_image_folder("train/", T.Compose([T.RandomResizedCrop(224),
        T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(mean, std)]), batch_size=256, shuffle=True)
    loader = stallscope.ReferenceLoader.from_tar_shards("shards/train-{000000..000146}.tar", transform, ...)
    for epoch in range(epochs):
        loader.set_epoch(epoch)        # optional, as with a DistributedSampler
        for images, labels in loader:  # each iter() is one epoch
            ...

What it does (the C++ core is loader/; docs/decisions.md says why each choice):
- worker threads in this process (no worker processes, no pickling): each assembles a whole batch,
  writing every sample straight into a reused buffer (page-locked with pin_memory); batches come
  out in order, at most `prefetch` ahead of the training loop; the GIL is released for all of it;
- batches reach torch without a copy (DLPack) and look like torch's default collate over the same
  dataset: for a TensorDataset (or several arrays), a list of tensors with the arrays' dtypes and
  shapes behind a leading batch dimension; with unwrap=True and one array, the tensor itself; for
  JPEGs (an ImageFolder tree, WebDataset tar shards), [images, labels] as over torchvision's
  ImageFolder: images float32 [B, 3, H, W] (uint8 when the chain ends in PILToTensor), labels
  int64 [B]. The transform is a torchvision chain mapped to the native one (native_transform says
  which map, and why not) or an ImageTransform; decoding, crop, resize, flip and normalisation run
  in the loader's threads (loader/image_ops.h);
- the order of an epoch is a Fisher-Yates shuffle from (seed, epoch) (none without shuffle), cut
  into shards by rank (rank r takes positions r, r+W, ...: each index once per epoch across ranks;
  shards may differ by one sample) and into batches (drop_last drops a last, shorter one);
- epochs: each iter() runs the next epoch (0, 1, 2, ...); set_epoch(e) makes the next one e. A new
  iter() while an epoch runs ends the old iterator (its threads stop), as in torch;
- state_dict() is the position of the next batch the training loop will get; load_state_dict() on
  a loader of the same settings makes the next iter() continue there, with the same samples in
  the same order (and the same random augmentation); a state saved after an epoch's last batch
  continues with the next epoch; set_epoch(e) after loading keeps the position when e is the
  saved epoch;
- an error in a worker (a malformed or truncated file, a failing source) raises LoaderError in the
  training loop at the batch it belongs to, naming the file and the sample index; the threads
  stop. Leaving the loop (break, an exception, Ctrl-C, the iterator collected) stops and joins them;
- with device="cuda": each batch is copied on the loader's own CUDA stream while the previous one
  is used; the training loop's current stream waits on the copy's event (the host does not); a
  host buffer goes back to the pool only once its copy completed; the tensors handed over are
  record_stream'ed on the consumer's stream, so PyTorch's caching allocator cannot reuse their
  memory while kernels queued there still read them. A float32 image chain then sends uint8 and
  normalises on the device (4x fewer bytes over PCIe), with torch's own arithmetic.

Recording: under `stallscope run` (or stallscope.record()) it writes the loader events of
docs/events.md, "Reference loader": dl.config ("kind": "reference"), dl.epoch_begin, a dl.next
span per next(), dl.recv, dl.epoch_end on the training thread; dl.sent, dl.fetch, dl.stages and
dl.put from its threads (ss-loader-W); dl.copy with a device.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import weakref

from . import _ext
from ._image_transform import ImageTransform, native_transform

__all__ = ["ReferenceLoader", "LoaderError", "ImageTransform", "native_transform"]

_MODULE = "_stallscope_loader"
_M = None  # the native module once loaded
_M_error: str | None = None
_lock = threading.Lock()
_said: set[str] = set()  # one-line notes already printed


class LoaderError(RuntimeError):
    """A sample could not be read: the message names the file and the sample index."""


def _say_once(msg: str) -> None:
    if msg in _said:
        return
    _said.add(msg)
    try:
        sys.stderr.write(f"stallscope: {msg}\n")
    except Exception:
        pass


def _module_dirs() -> list[str]:
    """Where the extension module may be, most specific first (_ext.module_dirs)."""
    return _ext.module_dirs()


def _native_module():
    """The _stallscope_loader module, or an ImportError with one line saying why not."""
    global _M, _M_error
    with _lock:
        if _M is not None:
            return _M
        if _M_error is None:
            try:
                _M = _ext.load(_MODULE, _module_dirs())
                return _M
            except ImportError as e:
                _M_error = (f"the reference loader's native module is not built ({e}); configure stallscope "
                            "with pybind11 and Python's development files")
    raise ImportError(f"stallscope: {_M_error}")


# ---------------------------------------------------------------------------------------------
# Settings


def _dist_default(rank, world_size):
    """rank and world_size as torch.distributed has them when initialised, else $RANK and
    $WORLD_SIZE, else 0 and 1. An argument given wins."""
    r = w = None
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            r, w = dist.get_rank(), dist.get_world_size()
    except Exception:
        pass
    if r is None:
        try:
            r = int(os.environ["RANK"]) if "RANK" in os.environ else None
            w = int(os.environ["WORLD_SIZE"]) if "WORLD_SIZE" in os.environ else None
        except ValueError:
            r = w = None
    rank = rank if rank is not None else (r if r is not None else 0)
    world_size = world_size if world_size is not None else (w if w is not None else 1)
    return int(rank), int(world_size)


def _caller_site():
    """'file.py:line' of the ReferenceLoader(...) call: the first frame outside this package."""
    from . import _tb

    f = sys._getframe(1)
    while f is not None and _tb.is_ours(f.f_code.co_filename):
        f = f.f_back
    return f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno}" if f is not None else None


_TORCH_DTYPES = None


def _dtype_name(torch, dtype) -> str:
    global _TORCH_DTYPES
    if _TORCH_DTYPES is None:
        _TORCH_DTYPES = {torch.uint8: "uint8", torch.int8: "int8", torch.int16: "int16", torch.int32: "int32",
                         torch.int64: "int64", torch.float16: "float16", torch.float32: "float32",
                         torch.float64: "float64", torch.bool: "bool"}
    name = _TORCH_DTYPES.get(dtype)
    if name is None:
        raise ValueError(f"ReferenceLoader: dtype {dtype} is not supported (supported: "
                         f"{', '.join(sorted(_TORCH_DTYPES.values()))})")
    return name


def _array_field(torch, i, a):
    """(field tuple, what keeps the memory) for one tensor or array: C-contiguous, on the CPU."""
    if torch.is_tensor(a):
        if a.device.type != "cpu":
            raise ValueError(f"ReferenceLoader: tensor {i} is on {a.device}; the loader reads tensors in host memory")
        a = a.detach()
        if a.is_conj() or a.is_neg():
            a = a.resolve_conj().resolve_neg()
        if not a.is_contiguous():
            a = a.contiguous()  # a copy, once: rows are then one memcpy each
        if a.dim() == 0:
            raise ValueError(f"ReferenceLoader: tensor {i} is 0-d; its first dimension must index the samples")
        return (str(i), _dtype_name(torch, a.dtype), list(a.shape), a.data_ptr()), a
    import numpy as np

    arr = np.asarray(a)
    if arr.dtype.byteorder == ">" or (arr.dtype.byteorder == "=" and sys.byteorder == "big"):
        raise ValueError(f"ReferenceLoader: array {i} is big-endian; convert it with .astype('<{arr.dtype.char}')")
    if not arr.flags["C_CONTIGUOUS"]:
        arr = np.ascontiguousarray(arr)
    name = arr.dtype.name if arr.dtype.kind in "biuf" else arr.dtype.str
    if name not in ("uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "bool"):
        raise ValueError(f"ReferenceLoader: array {i} has dtype {name}, which the loader does not support")
    if arr.ndim == 0:
        raise ValueError(f"ReferenceLoader: array {i} is 0-d; its first dimension must index the samples")
    return (str(i), name, list(arr.shape), arr.__array_interface__["data"][0]), arr


def _device_of(torch, device):
    if device is None:
        return None
    d = torch.device(device)
    if d.type == "cpu":
        return None
    if d.type != "cuda":
        raise ValueError(f"ReferenceLoader: device {d} is not supported (cpu or cuda)")
    if not torch.cuda.is_available():
        raise ValueError(f"ReferenceLoader: device {d} asked for, but torch.cuda.is_available() is false")
    if d.index is None:
        d = torch.device("cuda", torch.cuda.current_device())
    return d


# Loaders alive, so that the interpreter's exit and a fork can deal with their threads.
_live: weakref.WeakSet = weakref.WeakSet()
_forked_away: list = []  # native loaders a forked child must never touch (their threads are not there)


@atexit.register
def _stop_all() -> None:
    for loader in list(_live):
        try:
            loader._stop()
        except Exception:
            pass


def _after_fork_in_child() -> None:
    # The parent's loader threads do not exist here; joining them would hang. Keep the native
    # objects from being destroyed in this process, and make the loaders refuse to run.
    for loader in list(_live):
        _forked_away.append(loader._native)
        loader._native = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# ---------------------------------------------------------------------------------------------
# Events (training thread)


class _Rec:
    """The recording side of one loader: its id L (from the hooks' allocator, so it never collides
    with a torch DataLoader's) and the session whose database has its dl.config."""

    __slots__ = ("L", "gen")

    def __init__(self):
        self.L = None
        self.gen = -1


def _recording_possible() -> bool:
    # Load nothing when nothing can record (stallscope.is_recording's test).
    return "stallscope._native" in sys.modules or bool(os.environ.get("STALLSCOPE_SHM"))


class ReferenceLoader:
    """A prefetching loader with native threads over arrays or .npy files (see the module's doc).

    source: a TensorDataset, a tensor or NumPy array, a list of them (fields of one sample), or a
    source made by the package. rank/world_size: default to torch.distributed when initialised,
    else $RANK/$WORLD_SIZE, else 0/1. threads: default the usable cores (affinity and cgroup
    quota) less one for the training step, at least 1. prefetch: batches assembled ahead of the
    training loop (default 2 per thread). pin_memory: page-locked batches (default: when device is
    CUDA). device: None or "cpu" (batches in host memory) or a CUDA device.
    """

    def __init__(self, source, batch_size=1, *, shuffle=False, seed=0, drop_last=False, rank=None,
                 world_size=None, threads=None, prefetch=None, pin_memory=None, device=None, unwrap=False,
                 _device_transforms=None, _dataset_class=None, _transform=None):
        import torch

        M = _native_module()
        self._native = None
        self._created_at = _caller_site()
        self._torch = torch
        if isinstance(source, M.Source):
            self._source = source
            self._dataset_class = _dataset_class or source.kind
        else:
            self._source, self._dataset_class = _arrays_source(torch, M, source)
            self._dataset_class = _dataset_class or self._dataset_class
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"ReferenceLoader: batch_size must be a positive integer, not {batch_size!r}")
        rank, world_size = _dist_default(rank, world_size)
        self._device = _device_of(torch, device)
        if pin_memory is None:
            pin_memory = self._device is not None
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise ValueError(f"ReferenceLoader: threads must be a positive integer, not {threads!r}")
        if prefetch is not None and (not isinstance(prefetch, int) or prefetch < 1):
            raise ValueError(f"ReferenceLoader: prefetch must be a positive integer, not {prefetch!r}")
        nfields = len(self._source.fields)
        if unwrap and nfields != 1:
            raise ValueError(f"ReferenceLoader: unwrap=True needs exactly one field, the source has {nfields}")
        self._unwrap = bool(unwrap)
        self._settings = {
            "batch_size": batch_size, "shuffle": bool(shuffle), "seed": int(seed) % (1 << 64),
            "drop_last": bool(drop_last), "rank": rank, "world_size": world_size, "pin_memory": bool(pin_memory),
        }
        try:
            self._native = M.Loader(self._source, batch_size, bool(shuffle), int(seed) % (1 << 64), bool(drop_last),
                                    rank, world_size, threads or 0, prefetch or 0, bool(pin_memory), -1)
        except ValueError as e:
            raise ValueError(f"ReferenceLoader: {e}") from None
        if pin_memory and not self._native.pinned:
            _say_once(f"ReferenceLoader: {self._native.pin_note}")
        self._transforms = list(_device_transforms) if _device_transforms else None
        if self._transforms is not None and len(self._transforms) != nfields:
            raise ValueError(f"ReferenceLoader: {len(self._transforms)} device transforms for {nfields} fields")
        self._image_transform = _transform  # the ImageTransform of a JPEG source, for dl.config
        self._rec = _Rec()
        self._events_bound = False
        self._iterator = None  # weak reference to the iterator of the epoch in progress
        self._stream = None  # the CUDA stream of the copies, created at the first epoch
        self._cuda = None  # the torch.cuda calls of the device path (_Cuda)
        _live.add(self)

    # -- constructors --------------------------------------------------------------------------

    @classmethod
    def from_tensors(cls, *tensors, **kwargs):
        """Over tensors or NumPy arrays in memory, or one TensorDataset: sample i is row i of each.
        The arrays are read in place (kept alive by the loader; do not change them while it runs);
        a non-contiguous one is made contiguous once. Keyword arguments as ReferenceLoader()."""
        if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
            tensors = tuple(tensors[0])
        if not tensors:
            raise ValueError("ReferenceLoader.from_tensors: no tensors")
        return cls(tensors[0] if len(tensors) == 1 else list(tensors), **kwargs)

    @classmethod
    def from_npy(cls, *paths, **kwargs):
        """Over .npy files, one per field, memory-mapped (files larger than memory work): sample i
        is row i of each. A malformed file raises LoaderError naming it. Keyword arguments as
        ReferenceLoader()."""
        if not paths:
            raise ValueError("ReferenceLoader.from_npy: no files")
        M = _native_module()
        try:
            src = M.npy_source([os.fspath(p) for p in paths])
        except M.LoaderError as e:
            raise LoaderError(str(e)) from None
        kwargs.setdefault("_dataset_class", "npy")
        return cls(src, **kwargs)

    @classmethod
    def from_image_folder(cls, root, transform=None, **kwargs):
        """Over JPEGs in a torchvision ImageFolder tree (root/class/.../image.jpg): batches are
        [images, labels] as torch's DataLoader gives over torchvision.datasets.ImageFolder(root,
        transform), with the same classes (root's folders, sorted) and samples (torchvision's
        order and extensions).

        root: the tree's folder, or a torchvision ImageFolder itself (its samples, classes and
        transform are then used as they are, filtered or reordered ones included; it must keep
        torchvision's PIL loader and have no target_transform). transform: a torchvision
        transform or Compose (v1 or v2) that native_transform maps, or an ImageTransform.
        ValueError, with the reason in one line, for a chain that does not map, a dataset that
        does not read as an ImageFolder does, or a file whose name is not .jpg/.jpeg (only JPEG is
        decoded natively: read such a tree with torch's DataLoader). A file that cannot be read or
        decoded raises LoaderError in the training loop naming it and its index. Keyword
        arguments as ReferenceLoader()."""
        M = _native_module()
        dataset = None if isinstance(root, (str, bytes, os.PathLike)) else root
        if dataset is not None:
            root, classes, samples, ds_transform = _image_folder_parts(dataset)
            if transform is None:
                transform = ds_transform
        desc = _image_transform_of("from_image_folder", transform)
        native, kwargs = _image_settings(M, desc, kwargs)
        try:
            if dataset is None:
                src = M.image_folder_source(os.fspath(root), native)
            else:
                src = M.image_samples_source(root, classes, samples, native)
        except M.LoaderError as e:
            raise LoaderError(str(e)) from None
        i = src.first_non_jpeg
        if i >= 0:
            raise ValueError(f"ReferenceLoader.from_image_folder: {src.describe(i)} (sample {i}) is not a JPEG by its "
                             "name; the reference loader decodes JPEG only (read this tree with torch's DataLoader)")
        kwargs.setdefault("_dataset_class", type(dataset).__name__ if dataset is not None else "ImageFolder")
        return cls(src, **kwargs)

    @classmethod
    def from_tar_shards(cls, paths, transform, **kwargs):
        """Over JPEGs in WebDataset-style tar shards: each sample is `key.jpg` (or .jpeg) and
        `key.cls` (its class as decimal text) side by side in an uncompressed tar; batches are
        [images, labels] as for from_image_folder. Samples are numbered shard by shard in the
        order of `paths`, members in tar order; the loader shuffles them all (not a shuffle
        buffer). paths: a path, a list of them, or WebDataset's brace notation
        ("train-{000000..000146}.tar"). transform: as from_image_folder. A malformed or truncated
        shard raises LoaderError naming it (and the member) when the loader is made, or in the
        training loop at the sample it belongs to. Keyword arguments as ReferenceLoader()."""
        M = _native_module()
        if isinstance(paths, (str, bytes, os.PathLike)):
            paths = [paths]
        shards = []
        for p in paths:
            p = os.fsdecode(os.fspath(p))
            shards.extend(_brace_expand(p))
        if not shards:
            raise ValueError("ReferenceLoader.from_tar_shards: no shard")
        desc = _image_transform_of("from_tar_shards", transform)
        native, kwargs = _image_settings(M, desc, kwargs)
        try:
            src = M.tar_shard_source(shards, native)
        except M.LoaderError as e:
            raise LoaderError(str(e)) from None
        kwargs.setdefault("_dataset_class", "tar_shards")
        return cls(src, **kwargs)

    # -- torch DataLoader-like interface ------------------------------------------------------

    def __len__(self) -> int:
        """Batches per epoch for this rank."""
        return self._loader().batches_per_epoch

    def __iter__(self):
        return _Iterator(self)

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iter() runs (each iter() otherwise runs the one after the last)."""
        self._loader().set_epoch(int(epoch))

    def state_dict(self) -> dict:
        """The position of the next batch the training loop gets, with the settings it holds for."""
        d = dict(self._loader().state())
        d["version"] = 1
        return d

    def load_state_dict(self, state: dict) -> None:
        """Continue from `state` at the next iter(). ValueError, in one line, for a state of other
        settings (batch size, seed, dataset length, shuffle, drop_last, rank, world size)."""
        if not isinstance(state, dict) or state.get("version") != 1:
            raise ValueError("ReferenceLoader.load_state_dict: not a state of this loader (no 'version': 1)")
        try:
            self._loader().load_state({k: v for k, v in state.items() if k != "version"})
        except ValueError as e:
            raise ValueError(f"ReferenceLoader.load_state_dict: {e}") from None

    @property
    def batch_size(self) -> int:
        return self._settings["batch_size"]

    @property
    def num_workers(self) -> int:
        """The loader's threads (the name torch's DataLoader uses for its workers)."""
        return self._loader().threads

    threads = num_workers

    @property
    def prefetch(self) -> int:
        return self._loader().prefetch

    @property
    def drop_last(self) -> bool:
        return self._settings["drop_last"]

    @property
    def pin_memory(self) -> bool:
        return self._loader().pinned

    @property
    def device(self):
        return self._device

    @property
    def classes(self):
        """An ImageFolder's class names (label i is classes[i]), as torchvision's dataset has them;
        None for other sources."""
        return self._source.classes

    @property
    def class_to_idx(self):
        classes = self.classes
        return None if classes is None else {c: i for i, c in enumerate(classes)}

    @property
    def transform(self):
        """The ImageTransform a JPEG source runs (None for other sources)."""
        return self._image_transform

    def pool_stats(self) -> dict:
        """The batch buffers: slots, free, grown (slots added because the loop kept batches),
        allocations, bytes, pinned."""
        return dict(self._loader().pool_stats())

    def close(self) -> None:
        """Stops the epoch in progress and joins its threads (also done when the loader goes)."""
        self._stop()

    # -- internals -----------------------------------------------------------------------------

    def _loader(self):
        if self._native is None:
            raise RuntimeError("ReferenceLoader: this loader was made before a fork; make a new one in this process")
        return self._native

    def _stop(self) -> None:
        n = self._native
        if n is not None:
            n.stop(-1)

    def _recorder(self):
        """(N, V, L) when this process may record, after binding the native events; else None."""
        if not _recording_possible():
            return None
        try:
            from . import _native as N
            from . import _vocab as V
            from .hooks import _state as S

            if not N.available:
                return None
            rec = self._rec
            with S._lock:
                if rec.L is None:
                    rec.L = S.take_loader_id()
                first = rec.gen != S._session_gen
                rec.gen = S._session_gen
            if not self._events_bound and N.lib_path:
                self._events_bound = self._native.bind_events(N.lib_path)
            self._native.set_loader_id(rec.L)
            if first:
                N.instant(N.intern(V.DL_CONFIG), rec.L, N.intern_once(self._config(rec.L)), 0)
            return N, V, rec.L
        except Exception:
            return None

    def _config(self, L) -> str:
        n = self._native
        s = self._settings
        doc = {
            "loader": L,
            "kind": "reference",
            "source": self._source.kind,
            "batch_size": s["batch_size"],
            "num_workers": n.threads,
            "prefetch": n.prefetch,
            "prefetch_factor": None,
            "seed": s["seed"],
            "shuffle": s["shuffle"],
            "drop_last": s["drop_last"],
            "rank": s["rank"],
            "world_size": s["world_size"],
            "pin_memory": s["pin_memory"],
            "pin_memory_effective": bool(n.pinned),
            "device": str(self._device) if self._device is not None else None,
            "persistent_workers": None,
            "start_method": None,
            "dataset_type": "map",
            "dataset_class": self._dataset_class,
            "transform": self._image_transform.describe() if self._image_transform is not None else None,
            "dataset_len": n.dataset_len,
            "batches_per_epoch": n.batches_per_epoch,
            "in_order": True,
            "created_at": self._created_at,
            "torch_version": str(self._torch.__version__),
        }
        return json.dumps(doc, separators=(",", ":"))

    def __del__(self):
        try:
            self._stop()
        except Exception:
            pass


def _arrays_source(torch, M, source):
    """(native source, dataset class name) for a TensorDataset, a tensor/array, or a list of them."""
    cls_name = type(source).__name__
    tensors = getattr(source, "tensors", None)
    if tensors is not None and isinstance(tensors, tuple):  # TensorDataset
        arrays = list(tensors)
    elif isinstance(source, (list, tuple)):
        arrays = list(source)
        cls_name = "arrays"
    else:
        arrays = [source]
        cls_name = type(source).__name__
    if not arrays:
        raise ValueError("ReferenceLoader: no arrays")
    fields, keep = [], []
    for i, a in enumerate(arrays):
        f, k = _array_field(torch, i, a)
        fields.append(f)
        keep.append(k)
    try:
        return M.array_source(fields, tuple(keep)), cls_name
    except ValueError as e:
        raise ValueError(f"ReferenceLoader: {e}") from None


# ---------------------------------------------------------------------------------------------
# JPEG sources


def _image_transform_of(who: str, transform) -> ImageTransform:
    desc, why = native_transform(transform)
    if desc is None:
        raise ValueError(f"ReferenceLoader.{who}: the transform does not run natively: {why}")
    return desc


def _image_settings(M, desc: ImageTransform, kwargs: dict):
    """(native ImageTransform, ReferenceLoader keyword arguments) for a JPEG source: with a CUDA
    device and a float32 chain, the batch is built as uint8 and normalised on the device."""
    import torch

    kwargs = dict(kwargs)
    kwargs["_transform"] = desc
    device = _device_of(torch, kwargs.get("device"))
    if device is None or desc.output != "float32":
        return desc._native(M), kwargs
    if kwargs.get("_device_transforms") is None:
        kwargs["_device_transforms"] = [_DeviceNormalize(torch, device, desc.mean, desc.std), None]
    return desc._native(M, layout="uint8_chw"), kwargs


class _DeviceNormalize:
    """ToTensor then Normalize on a uint8 [B, 3, H, W] batch on the device, in torchvision's own
    operations and order (to float32, / 255, - mean, / std): the values the CPU path gives."""

    def __init__(self, torch, device, mean, std):
        self._torch = torch
        self._normalize = tuple(mean) != (0.0,) * 3 or tuple(std) != (1.0,) * 3
        self._mean = torch.tensor(mean, dtype=torch.float32, device=device).view(1, 3, 1, 1)
        self._std = torch.tensor(std, dtype=torch.float32, device=device).view(1, 3, 1, 1)

    def __call__(self, x):
        x = x.to(self._torch.float32).div_(255)
        if self._normalize:
            x.sub_(self._mean).div_(self._std)
        return x


def _brace_expand(pattern: str) -> list[str]:
    """WebDataset's shard notation (braceexpand): {000..146} a zero-padded range, {a,b} a list;
    several braces multiply. A name without braces is itself."""
    import re

    m = re.search(r"\{([^{}]*)\}", pattern)
    if m is None:
        return [pattern]
    head, body, tail = pattern[:m.start()], m.group(1), pattern[m.end():]
    r = re.fullmatch(r"(-?\d+)\.\.(-?\d+)", body)
    if r:
        a, b = r.group(1), r.group(2)
        width = len(a) if a.startswith("0") else 0
        lo, hi = int(a), int(b)
        step = 1 if hi >= lo else -1
        items = [str(i).zfill(width) for i in range(lo, hi + step, step)]
    else:
        items = body.split(",")
    return [p for item in items for p in _brace_expand(head + item + tail)]


def _image_folder_parts(dataset):
    """(root, classes, samples, transform) of a torchvision ImageFolder that the loader reads as
    torchvision would; ValueError naming what differs."""
    cls = type(dataset)
    who = f"ReferenceLoader.from_image_folder: {cls.__name__}"
    getitem = getattr(cls, "__getitem__", None)
    if getattr(getitem, "__qualname__", "") != "DatasetFolder.__getitem__" or \
            getattr(getitem, "__module__", "") != "torchvision.datasets.folder":
        raise ValueError(f"{who} is not a torchvision ImageFolder (or redefines __getitem__)")
    if getattr(dataset, "target_transform", None) is not None:
        raise ValueError(f"{who} has a target_transform, which the loader does not run")
    loader = getattr(dataset, "loader", None)
    if getattr(loader, "__module__", "") != "torchvision.datasets.folder" or \
            getattr(loader, "__name__", "") not in ("default_loader", "pil_loader"):
        raise ValueError(f"{who} reads its images with {getattr(loader, '__name__', loader)!r}, not torchvision's "
                         "PIL loader")
    if loader.__name__ == "default_loader":
        import torchvision

        if torchvision.get_image_backend() != "PIL":
            raise ValueError(f"{who} reads with the {torchvision.get_image_backend()} backend, not PIL")
    samples = [(os.fspath(p), int(c)) for p, c in dataset.samples]
    if not samples:
        raise ValueError(f"{who} has no sample")
    return os.fspath(dataset.root), [str(c) for c in dataset.classes], samples, dataset.transform


class _Iterator:
    """One epoch of a ReferenceLoader: starts its threads when made, stops them when exhausted,
    left (break), failed, or collected."""

    def __init__(self, loader: ReferenceLoader):
        self._loader = loader
        n = loader._loader()
        old = loader._iterator() if loader._iterator is not None else None
        if old is not None:
            old._finish(stop=False)  # begin_epoch stops its threads; its next() ends the iteration
        # A KeyboardInterrupt can land between any two lines here (Python runs the SIGINT handler
        # when a call returns): what _finish() reads is set before the epoch starts, and from the
        # moment the threads may run, something stops them.
        self._done = True  # until the epoch started: nothing to finish
        self._yielded = 0
        self._from_dlpack = loader._torch.from_dlpack
        self._fields = 1 if loader._unwrap else None
        self._device = loader._device
        self._dev = None
        self._rec = loader._recorder()
        try:
            self._epoch, first, self._token = n.begin_epoch()
            self._done = False  # from here on _finish() (and so __del__) stops them
        except sys.modules[_MODULE].LoaderError as e:
            raise LoaderError(str(e)) from None
        except BaseException:
            # Ctrl-C while begin_epoch ran or the moment it returned: the threads it started have
            # no iterator yet to stop them, and would go on assembling batches for nobody.
            n.stop(-1)
            raise
        loader._iterator = weakref.ref(self)
        self._next_b = first
        if self._rec is not None:
            N, V, L = self._rec
            self._L = L
            self._i_next = N.intern(V.DL_NEXT)
            self._i_recv = N.intern(V.DL_RECV)
            self._i_end = N.intern(V.DL_EPOCH_END)
            N.instant(N.intern(V.DL_EPOCH_BEGIN), L, self._epoch, n.threads)
            from .hooks import _state as S  # dl.step names the loader whose batch was handed last

            self._hooks_state = S
            self._step_mark = S._ItState(L, self._epoch, False)
        if self._device is not None:
            self._dev = _DeviceCopies(loader)

    def __iter__(self):
        return self

    def __len__(self):
        return self._loader.__len__()

    def __next__(self):
        if self._done:
            raise StopIteration
        rec = self._rec
        B = self._next_b
        if rec is not None:
            N = rec[0]
            N.span_begin_args(self._i_next, self._L, B, self._epoch)
        try:
            if self._device is None:
                got = self._take(block=True)
                if got is None:
                    raise StopIteration
                b, tensors = got[0], [self._from_dlpack(c) for c in got[3]]
            else:
                got = self._dev.next(self._take)
                if got is None:
                    raise StopIteration
                b, tensors = got
            self._loader._native.handed(self._token, b + 1)
        except StopIteration:
            if rec is not None:
                N.span_end_args(self._L, -1, self._epoch)
            self._finish()
            raise
        except BaseException as e:
            if rec is not None:
                N.span_end_args(self._L, -1, self._epoch)
            self._finish()
            M = sys.modules.get(_MODULE)
            if M is not None and isinstance(e, M.LoaderError):
                raise LoaderError(str(e)) from None
            raise
        self._next_b = b + 1
        self._yielded += 1
        if rec is not None:
            N.span_end()  # the batch handed is the one the span began with (they come in order)
            self._hooks_state._last_it = self._step_mark
        return tensors[0] if self._fields == 1 else tensors

    def _take(self, block: bool):
        """The next host batch (B, W, samples, capsules, lease), None at the end; with block=False
        also False when it is not ready yet."""
        n = self._loader._native
        if n is None:
            raise RuntimeError("ReferenceLoader: this loader was made before a fork; make a new one in this process")
        got = n.next(self._token) if block else n.try_next(self._token)
        if got is None or got is False:
            return got
        if self._rec is not None:
            N = self._rec[0]
            N.instant(self._i_recv, self._L, got[0], got[1])
        return got

    def _finish(self, stop: bool = True) -> None:
        if self._done:
            return
        self._done = True
        if self._dev is not None:
            self._dev.close()
        if stop and self._loader._native is not None:
            self._loader._native.stop(self._token)
        if self._rec is not None:
            try:
                self._rec[0].instant(self._i_end, self._L, self._epoch, self._yielded)
            except Exception:
                pass

    def __del__(self):
        try:
            self._finish()
        except Exception:
            pass


class _DeviceCopies:
    """The copies of one epoch's batches to a CUDA device, one batch ahead of the training loop.

    Batch k+1's copy is enqueued on the loader's stream when its host batch is ready (without
    waiting for it) while the training loop works on batch k. Per batch:
      1. on the loader's stream: device tensors allocated (so the caching allocator ties their
         memory to that stream), copy_(non_blocking) from the page-locked slot, the optional device
         transforms (uint8 -> normalised float), then an event;
      2. the host slot is handed to the native copy watcher, which holds it until an event recorded
         after the copies completed (with pageable memory the copy is synchronous for the host and
         the slot can go at once);
      3. at hand-over: the consumer's current stream waits on the event (on the GPU, not the host),
         and each tensor is record_stream'ed on the consumer's stream: when the training loop drops
         it, the allocator does not reuse the memory until the work queued on that stream so far
         has finished. Without this, the next batch's copy on the loader's stream could overwrite a
         batch that kernels still read (the race SPDL documents).
    """

    def __init__(self, loader: ReferenceLoader):
        if loader._cuda is None:
            loader._cuda = _Cuda(loader._torch, loader._device)
        self._cuda = cuda = loader._cuda
        self._from_dlpack = loader._torch.from_dlpack
        if loader._stream is None:
            loader._stream = cuda.new_stream()
        self._stream = loader._stream
        self._transforms = loader._transforms
        self._native = loader._native
        self._pinned = bool(loader._native.pinned)
        self._ready = None  # (B, tensors, event) copied ahead
        self._ended = False
        # Debug switches for tests/gpu/loader_race.py: show that its check catches the race.
        self._skip_record_stream = os.environ.get("STALLSCOPE_LOADER_UNSAFE_NO_RECORD_STREAM") == "1"
        self._early_release = os.environ.get("STALLSCOPE_LOADER_UNSAFE_EARLY_RELEASE") == "1"

    def _enqueue(self, got):
        cuda = self._cuda
        B, _W, _n, capsules, lease = got
        host = [self._from_dlpack(c) for c in capsules]
        nbytes = sum(t.numel() * t.element_size() for t in host)
        with cuda.using(self._stream):
            dev = [cuda.empty_like(t) for t in host]
            for d, h in zip(dev, host, strict=True):
                d.copy_(h, non_blocking=self._pinned)
            if self._pinned and not self._early_release:
                self._native.watch_copy(lease, cuda.index, cuda.handle(self._stream), B, nbytes)
            if self._transforms:
                dev = [f(d) if f is not None else d for d, f in zip(dev, self._transforms, strict=True)]
            event = cuda.event_after(self._stream)
        return B, dev, event

    def next(self, take):
        """(B, device tensors) of the next batch, None at the end. `take` is the iterator's _take
        (passed, not kept: a reference back to the iterator would keep it from being freed)."""
        if self._ready is None:
            if self._ended:
                return None
            got = take(block=True)
            if got is None:
                self._ended = True
                return None
            self._ready = self._enqueue(got)
        B, dev, event = self._ready
        self._ready = None
        if not self._ended:
            got = take(block=False)  # the next batch's copy now, if it is ready
            if got is None:
                self._ended = True
            elif got is not False:
                self._ready = self._enqueue(got)
        cuda = self._cuda
        consumer = cuda.current_stream()
        cuda.wait(consumer, event)
        if not self._skip_record_stream:
            for t in dev:
                cuda.record_stream(t, consumer)
        return B, dev

    def close(self):
        self._ready = None  # its tensors were never handed: nothing but the loader's stream used them


class _Cuda:
    """The torch.cuda calls of the device path, in one place (a test puts a stand-in here to run
    the path's logic on a machine without a GPU)."""

    def __init__(self, torch, device):
        self._torch = torch
        self._device = device
        self.index = device.index

    def new_stream(self):
        return self._torch.cuda.Stream(device=self._device)

    def using(self, stream):
        return self._torch.cuda.stream(stream)

    def empty_like(self, host):
        # Allocated while the loader's stream is current: the caching allocator ties the block to it.
        return self._torch.empty(host.shape, dtype=host.dtype, device=self._device)

    def handle(self, stream) -> int:
        return stream.cuda_stream

    def event_after(self, stream):
        event = self._torch.cuda.Event()
        event.record(stream)
        return event

    def current_stream(self):
        return self._torch.cuda.current_stream(self._device)

    def wait(self, stream, event):
        stream.wait_event(event)

    def record_stream(self, tensor, stream):
        tensor.record_stream(stream)
