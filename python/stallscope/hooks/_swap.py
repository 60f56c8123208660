"""`stallscope run --loader tuned|reference`: the DataLoader a script makes runs with the settings
stallscope chose (tuned, _tuned.py) or is served by stallscope.ReferenceLoader (reference,
_replace.py), without editing the script. docs/report.md ("Loader swap") says what each does.

The launcher passes the mode in STALLSCOPE_LOADER and tuned's settings in STALLSCOPE_LOADER_TUNED
(JSON, analysis/loader_tuning.h); read_mode() reads them once, at install(). Under `--loader
torch` (the default) nothing here runs: _main tests S._swap_mode once per DataLoader(...) and per
iter(), never per batch.

Where each mode acts:
  DataLoader.__init__  init(): decides (a Swap on the loader's _LoaderInfo). tuned: torch's
                       __init__ runs with the call's arguments rebound (positional ones too);
                       reference: with the script's own, and the loader is served at iteration;
                       a reference that cannot serve the call falls back to tuned, with one line.
  DataLoader.__iter__  tuned: before_iter() (pin_memory when CUDA is used, restart of persistent
                       workers whose dataset changed), after_iter() (the CUDA-stream prefetch,
                       _prefetch.py); reference: reference_iter(), the ReferenceLoader's epoch.
  DataLoader.__len__   (reference mode only) the ReferenceLoader's len, equal to torch's.
  dl.config            "kind" (what ran) and "replaced" (replaced_doc()).
The object the script holds stays its DataLoader: isinstance, attributes and len() are torch's.
"""

from __future__ import annotations

import json
import os
import sys

from .. import _vocab as V
from . import _state as S

ENV_MODE = "STALLSCOPE_LOADER"
ENV_TUNED = "STALLSCOPE_LOADER_TUNED"

# The script's own values that dl.config's "replaced" keeps.
_SETTINGS = ("batch_size", "shuffle", "num_workers", "persistent_workers", "prefetch_factor", "pin_memory",
             "drop_last")


def say(msg: str) -> None:
    """One `stallscope:` line on stderr, once per text."""
    if msg in S._swap_said:
        return
    S._swap_said.add(msg)
    try:
        sys.stderr.write(f"stallscope: {msg}\n")
    except Exception:
        pass


def read_mode() -> None:
    """Sets S._swap_mode and S._tuned from the environment (install() calls it once)."""
    mode = os.environ.get(ENV_MODE, "") or V.LOADER_TORCH
    if mode == V.LOADER_TORCH:
        return
    if mode not in V.LOADER_KINDS:
        say(f"{ENV_MODE}={mode!r} is not a loader (torch, tuned, reference); the DataLoader runs as the script made it")
        return
    try:
        tuned = json.loads(os.environ.get(ENV_TUNED, ""))
        if not isinstance(tuned, dict) or not isinstance(tuned.get("num_workers"), int):
            raise ValueError
    except ValueError:
        say(f"--loader {mode}: no tuned settings in {ENV_TUNED} (`stallscope run --loader` sets them); "
            "the DataLoader runs as the script made it")
        return
    import inspect

    try:
        S._dl_signature = inspect.signature(S._orig_dl_init)
    except (TypeError, ValueError):
        say(f"--loader {mode}: cannot read torch's DataLoader.__init__ signature; the DataLoader runs as the "
            "script made it")
        return
    S._tuned = tuned
    S._swap_mode = mode


class Swap:
    """What --loader did to one DataLoader (kept on its _LoaderInfo)."""

    __slots__ = ("asked", "kind", "where", "dataset_class", "settings", "changed", "kept", "fallback", "plan", "ref",
                 "first_iter_done", "device", "stream", "fingerprint", "iterator")

    def __init__(self, asked, where):
        self.asked = asked  # the --loader asked for: tuned or reference
        self.kind = V.LOADER_TORCH  # what runs: torch (nothing could be changed), tuned or reference
        self.where = where  # "file.py:line" of the DataLoader(...) call
        self.dataset_class = None
        self.settings = {}  # the script's own values of _SETTINGS (torch's defaults filled in)
        self.changed = {}  # tuned: setting -> the value this run uses instead
        self.kept = {}  # tuned: setting -> why it stays as the script had it
        self.fallback = None  # why reference could not serve the call ("Class: reason")
        self.plan = None  # reference: _replace.Plan
        self.ref = None  # reference: the ReferenceLoader, from the first iter()
        self.first_iter_done = False
        self.device = None  # the CUDA device batches are handed on (CUDA used at the first iter())
        self.stream = None  # tuned with CUDA: the side stream of the prefetch
        self.fingerprint = None  # tuned with persistent workers: the dataset as its workers saw it
        self.iterator = None  # ... and torch's iterator that runs those workers

    def label(self) -> str:
        where = f" at {self.where}" if self.where else ""
        return f"DataLoader{where} ({self.dataset_class})"

    def replaced_doc(self) -> dict:
        """What this run did instead of what the script asked for: "replaced" in the loader's config."""
        return {
            "asked": self.asked,
            "settings": self.settings,
            "changed": self.changed,
            "kept": self.kept,
            "fallback": self.fallback,
            "device": str(self.device) if self.device is not None else None,
        }


def _bind(loader, args, kwargs):
    """(BoundArguments, val) for the call, or (None, None) when it does not bind (torch raises)."""
    try:
        ba = S._dl_signature.bind(loader, *args, **kwargs)
    except TypeError:
        return None, None
    given = ba.arguments
    params = S._dl_signature.parameters

    def val(name):
        if name in given:
            return given[name]
        p = params.get(name)
        return None if p is None or p.default is p.empty else p.default

    return ba, val


def _settings(val) -> dict:
    out = {k: val(k) for k in _SETTINGS}
    nw = out["num_workers"]
    if out["prefetch_factor"] is None and isinstance(nw, int) and nw > 0:
        out["prefetch_factor"] = 2  # torch's default with workers
    if out["shuffle"] is None:
        out["shuffle"] = False
    return {k: v if isinstance(v, (bool, int, float, str, type(None))) else repr(v) for k, v in out.items()}


def _set_torch_threads() -> None:
    """`--loader-args torch_threads=N`: torch.set_num_threads(N) once, at the training process's
    first DataLoader (torch is imported in full by then; the loop has not started), said in one
    line. Process-wide, so not one loader's setting."""
    n = S._tuned.get("torch_threads") if isinstance(S._tuned, dict) else None
    if S._threads_set or isinstance(n, bool) or not isinstance(n, int) or n < 1:
        return
    S._threads_set = True
    import torch

    before = torch.get_num_threads()
    if before != n:
        torch.set_num_threads(n)
    say(f"--loader-args: torch's intra-op threads {before} -> {n} (torch.set_num_threads) for the whole process")


def _decide(loader, where, args, kwargs):
    """(Swap or None, the rebound (args, kwargs) for torch's __init__ or None to use the script's)."""
    if S._wctx is not None:
        return None, None  # a worker process: its loaders are the dataset's business
    _set_torch_threads()
    ba, val = _bind(loader, args, kwargs)
    if ba is None:
        return None, None
    ds = val("dataset")
    swap = Swap(S._swap_mode, where)
    swap.dataset_class = type(ds).__name__
    swap.settings = _settings(val)
    if S._swap_mode == V.LOADER_REFERENCE:
        from . import _replace

        plan, why = _replace.plan(loader, val, ds, S._DL)
        if plan is not None:
            swap.kind = V.LOADER_REFERENCE
            swap.plan = plan
            return swap, None
        swap.fallback = f"{swap.dataset_class}: {why}"
        say(f"--loader {V.LOADER_REFERENCE}: {swap.fallback}; running torch's DataLoader tuned")
    from . import _tuned

    changes = _tuned.decide(swap, val, ds, S._dl_signature.parameters, S._tuned)
    swap.kind = V.LOADER_TUNED
    swap.changed = dict(changes)
    if not changes:
        return swap, None
    for k, v in changes.items():
        ba.arguments[k] = v
    return swap, (ba.args[1:], ba.kwargs)


def init(loader, where, args, kwargs):
    """Runs torch's DataLoader.__init__ for the script's call under --loader; returns the Swap
    (None: the loader is left as the script made it). Errors of the script's own call are torch's,
    raised as they are: a tuned call is made only once the script's own call went through on a
    throwaway DataLoader (tuned values could otherwise make a wrong call pass, e.g. prefetch_factor
    with num_workers=0)."""
    orig = S._orig_dl_init
    try:
        swap, call = _decide(loader, where, args, kwargs)
    except Exception as e:
        swap, call = None, None
        say(f"--loader {S._swap_mode}: cannot decide ({type(e).__name__}: {e}); the DataLoader runs as the script "
            "made it")
    if call is None:
        orig(loader, *args, **kwargs)
        _said_tuned(swap)
        return swap
    # Outside the except blocks below, the script's own call raises with no "During handling of
    # the above exception" chained to it: its traceback is the one it has without stallscope.
    refused = None
    try:
        orig(S._DL.__new__(S._DL), *args, **kwargs)
    except Exception as e:
        refused = e
    if refused is not None:
        refused = None
        orig(loader, *args, **kwargs)  # the script's own error, from its own loader
        return None
    try:
        orig(loader, *call[0], **call[1])
    except Exception as e:
        refused = f"{type(e).__name__}: {e}"
    if refused is not None:
        orig(loader, *args, **kwargs)
        swap.kept.update(dict.fromkeys(swap.changed, f"torch refused the tuned value ({refused})"))
        swap.changed = {}
    _said_tuned(swap)
    return swap


def _said_tuned(swap) -> None:
    """--loader tuned says what it did to each loader (a fallback from reference said why already)."""
    if swap is not None and swap.asked == V.LOADER_TUNED and swap.kind == V.LOADER_TUNED:
        from ._tuned import describe

        say(describe(swap))


def _cuda_device():
    """The device batches go to when the script uses CUDA (initialised by the first iter())."""
    import torch  # imported already: a DataLoader is iterating

    cuda = getattr(torch, "cuda", None)
    try:
        if cuda is not None and cuda.is_available() and cuda.is_initialized():
            return torch.device("cuda", cuda.current_device())
    except Exception:
        pass
    return None


def before_iter(loader, swap) -> None:
    """tuned, before torch's __iter__: the first time, pin_memory and the prefetch device when CUDA
    is used; with the persistent workers stallscope turned on, fresh workers when the dataset
    changed since they started."""
    if not swap.first_iter_done:
        swap.first_iter_done = True
        swap.device = _cuda_device()
        if swap.device is not None and not loader.pin_memory:
            loader.pin_memory = True
            swap.changed["pin_memory"] = True
    it = loader.__dict__.get("_iterator")
    if swap.changed.get("persistent_workers") and it is not None and swap.fingerprint is not None:
        from ._tuned import fingerprint

        if fingerprint(loader.dataset) != swap.fingerprint:
            shutdown = getattr(it, "_shutdown_workers", None)
            if shutdown is not None:
                shutdown()
                loader._iterator = None  # torch's __iter__ starts new workers, with the dataset as it is now
                say(f"--loader {V.LOADER_TUNED}: {swap.label()}: the dataset changed since its persistent workers "
                    "started; they are restarted when that happens, so they see it")


def after_iter(loader, swap, it):
    """tuned, after torch's __iter__: the dataset as new persistent workers got it; torch's
    iterator, wrapped in the CUDA-stream prefetch when CUDA is used."""
    current = loader.__dict__.get("_iterator")
    if swap.changed.get("persistent_workers") and (swap.fingerprint is None or current is not swap.iterator):
        from ._tuned import fingerprint

        # Taken once the workers started (and the sampler or torch may have cached things on the
        # dataset while starting them): what a later iter() compares with.
        swap.fingerprint = fingerprint(loader.dataset)
        swap.iterator = current
    if swap.device is None:
        return it
    import torch

    from ._prefetch import CudaOps, DevicePrefetch

    ops = CudaOps(torch, swap.device)
    if swap.stream is None:
        swap.stream = ops.new_stream()  # one side stream per loader, not per epoch
    return DevicePrefetch(it, ops, torch.is_tensor, swap.stream)


def reference_iter(loader, swap):
    """reference: the ReferenceLoader's next epoch; None when it could not be built (the loader
    then runs as the script made it, said in one line)."""
    from . import _replace

    if swap.ref is None:
        if not swap.first_iter_done:
            swap.first_iter_done = True
            swap.device = _cuda_device()
        try:
            swap.ref = _replace.build(swap, swap.device)
        except Exception as e:
            swap.kind = V.LOADER_TORCH
            swap.fallback = f"{swap.dataset_class}: {type(e).__name__}: {e}"
            say(f"--loader {V.LOADER_REFERENCE}: {swap.fallback}; running torch's DataLoader as the script made it")
            return None
    else:
        _replace.next_epoch(swap)
    return iter(swap.ref)


def of(loader):
    """The Swap of a loader, or None."""
    info = loader.__dict__.get("_stallscope_loader")
    return info.swap if info is not None and info.owner == id(loader) else None


def dl_len(self):
    # Replaces DataLoader.__len__ under --loader reference only.
    try:
        swap = of(self)
        if swap is not None and swap.ref is not None:
            return len(swap.ref)
    except Exception:
        pass
    return S._orig_dl_len(self)
