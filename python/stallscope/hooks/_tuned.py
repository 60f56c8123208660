"""`--loader tuned`: which of the launcher's settings a DataLoader(...) call gets, and which it
keeps as the script wrote them because changing them could change what the script computes.

The settings (analysis/loader_tuning.h): num_workers for the usable cores, persistent_workers=True,
prefetch_factor 4; pin_memory and the CUDA-stream prefetch when CUDA is used (decided at the
first iter(), _swap.py). Each is left as the script had it, with the reason recorded, when:

  num_workers       - the dataset is an IterableDataset: each worker runs the whole stream unless
                      the dataset shards it by get_worker_info(), which cannot be seen from here;
                    - a sampler or batch_sampler that is not torch's own: indices are drawn
                      num_workers x prefetch_factor batches ahead of the loop, so a sampler that
                      follows the training (curriculum, hard-example mining) would draw others;
                    - a generator: each worker's random stream is seeded from it by worker id, so
                      another worker count gives other random augmentations for the same seed;
                    - a worker_init_fn that reads the worker count (its code, or a function it
                      names, mentions get_worker_info or num_workers; or it cannot be inspected):
                      it may shard or configure by the count;
                    - the script already runs at least as many workers (tuned never lowers it:
                      an I/O-bound dataset may want more workers than cores);
                    - from 0 workers: a start method other than fork (the dataset, never pickled
                      so far, would be pickled into each worker), or a dataset holding CUDA
                      tensors (CUDA cannot run in forked workers);
  prefetch_factor   - an IterableDataset or another sampler (as above: read ahead); the script's
                      own deeper value; no workers in the end;
  persistent_workers - a generator: torch draws each iterator's base seed from it, once with
                      persistent workers instead of every epoch, so later epochs would shuffle
                      differently; no workers in the end.
Persistent workers keep the copy of the dataset they started with. When stallscope turned them
on, each later iter() compares the dataset's attributes with those at the workers' start (see
fingerprint()) and restarts the workers when they changed (a set_epoch() on the dataset, a new
transform), so the workers see what the script set, as they would have without persistence.
"""

from __future__ import annotations

import functools
import inspect

from .. import _vocab as V

_COUNT_NAMES = frozenset({"get_worker_info", "num_workers"})
_TORCH_SAMPLER_MODULES = ("torch.utils.data",)


def _torch_sampler(s) -> bool:
    """A sampler of torch's own (Random, Sequential, SubsetRandom, WeightedRandom, Batch over one
    of those, Distributed): its indices do not depend on when they are drawn."""
    mod = type(s).__module__ or ""
    if not mod.startswith(_TORCH_SAMPLER_MODULES):
        return False
    inner = getattr(s, "sampler", None)
    return inner is None or _torch_sampler(inner)


def reads_worker_count(fn, depth=0, seen=None):
    """True when `fn` may read the worker count: its code, or a function it names (three calls
    deep), mentions get_worker_info or num_workers, or it has no Python code to look at."""
    seen = set() if seen is None else seen
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.ismethod(fn):
        fn = fn.__func__
    if not inspect.isfunction(fn):
        call = type(fn).__call__ if callable(fn) else None  # a callable object: its class's __call__
        if not inspect.isfunction(call):
            return True  # a builtin, a C function: cannot tell
        fn = call
    if id(fn) in seen:
        return False
    seen.add(id(fn))
    names = set()
    codes = [fn.__code__]
    while codes:
        code = codes.pop()
        names.update(code.co_names)
        codes.extend(c for c in code.co_consts if inspect.iscode(c))
    if names & _COUNT_NAMES:
        return True
    if depth >= 3:
        return False
    g = fn.__globals__
    called = [g.get(n) for n in names]
    called += [c.cell_contents for c in (fn.__closure__ or ()) if _cell_set(c)]
    return any(reads_worker_count(f, depth + 1, seen) for f in called
               if inspect.isfunction(f) or inspect.ismethod(f) or isinstance(f, functools.partial))


def _cell_set(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 (an empty cell raises)
        return True
    except ValueError:
        return False


def _start_method(val):
    ctx = val("multiprocessing_context")
    if isinstance(ctx, str):
        return ctx
    if ctx is not None:
        try:
            return ctx.get_start_method()
        except Exception:
            return None
    import torch.multiprocessing as tmp

    # allow_none: asking without it would fix the default context as a side effect (as _main._config).
    return tmp.get_start_method(allow_none=True) or tmp.get_all_start_methods()[0]


def _holds_cuda(torch, ds) -> bool:
    """The dataset is, or holds as an attribute (TensorDataset.tensors included), a CUDA tensor."""
    values = [ds, *getattr(ds, "__dict__", {}).values()]
    for v in values:
        for t in (v if isinstance(v, (tuple, list)) else (v,)):
            if torch.is_tensor(t) and t.device.type != "cpu":
                return True
    return False


def decide(swap, val, ds, params, tuned):
    """The arguments to change ({name: value}) for a call whose values `val(name)` gives;
    records in swap.kept what is kept and why. `params`: the names torch's DataLoader.__init__
    takes; `tuned`: the launcher's settings."""
    import torch
    from torch.utils.data import IterableDataset

    kept = swap.kept
    changes = {}
    exact = bool(tuned.get("exact"))  # `run --loader-args`: the settings as given, lower or higher
    nw0 = val("num_workers")
    if isinstance(nw0, bool) or not isinstance(nw0, int) or nw0 < 0:
        kept["num_workers"] = f"the script's num_workers={nw0!r} is not a worker count"
        return changes
    want = int(tuned.get("num_workers", 0))
    iterable = isinstance(ds, IterableDataset)
    sampler = val("batch_sampler") if val("batch_sampler") is not None else val("sampler")
    ahead = None  # why batches must not be read further ahead than the script reads them
    if iterable:
        ahead = ("an IterableDataset: each worker would run the whole stream unless the dataset shards it by "
                 "get_worker_info(), which stallscope cannot see")
    elif sampler is not None and not _torch_sampler(sampler):
        ahead = (f"the script's own sampler {type(sampler).__name__}: indices are drawn num_workers x prefetch_factor "
                 "batches ahead of the loop, so a sampler that follows the training would draw others")
    nw = nw0
    if ahead is not None:
        kept["num_workers"] = ahead
    elif val("generator") is not None:
        kept["num_workers"] = ("a generator: each worker's random stream is seeded from it by worker id, so another "
                               "worker count changes the random draws of the same seed")
    elif val("worker_init_fn") is not None and reads_worker_count(val("worker_init_fn")):
        kept["num_workers"] = "its worker_init_fn may read the worker count (get_worker_info / num_workers)"
    elif exact and nw0 > want:
        nw = want
        changes["num_workers"] = want
    elif nw0 >= want:
        if nw0 > want:
            kept["num_workers"] = (f"the script's {nw0} workers are more than the {want} tuned for "
                                   f"{tuned.get('usable_cores', '?')} usable cores (tuned never lowers it)")
    elif nw0 == 0 and _start_method(val) not in (None, "fork"):
        kept["num_workers"] = (f"start method {_start_method(val)}: the dataset would be pickled into each worker, "
                               "which it never was with num_workers=0")
    elif nw0 == 0 and _holds_cuda(torch, ds):
        kept["num_workers"] = "the dataset holds CUDA tensors, which worker processes cannot use"
    else:
        nw = want
        changes["num_workers"] = want
    if nw == 0:
        if nw0 > 0:  # torch refuses these without workers
            if val("prefetch_factor") is not None and "prefetch_factor" in params:
                changes["prefetch_factor"] = None
            if val("persistent_workers"):
                changes["persistent_workers"] = False
            if val("multiprocessing_context") is not None and "multiprocessing_context" in params:
                changes["multiprocessing_context"] = None
        return changes  # prefetch_factor and persistent_workers need workers
    pf0 = val("prefetch_factor")
    pf = int(tuned.get("prefetch_factor", pf0 if exact and pf0 is not None else 2))
    if "prefetch_factor" not in params:
        kept["prefetch_factor"] = "this torch's DataLoader has no prefetch_factor"
    elif ahead is not None:
        kept["prefetch_factor"] = ahead
    elif exact:
        if pf0 != pf and (pf0 is not None or pf != 2):
            changes["prefetch_factor"] = pf
    elif pf0 is not None and pf0 >= pf:
        if pf0 > pf:
            kept["prefetch_factor"] = f"the script's prefetch_factor {pf0} is deeper than {pf}"
    else:
        changes["prefetch_factor"] = pf
    want_persistent = tuned.get("persistent_workers", bool(val("persistent_workers")) if exact else True)
    if bool(val("persistent_workers")) == bool(want_persistent) or (not exact and not want_persistent):
        pass
    elif "persistent_workers" not in params:
        kept["persistent_workers"] = "this torch's DataLoader has no persistent_workers"
    elif val("generator") is not None:
        kept["persistent_workers"] = ("a generator: torch draws each iterator's base seed from it, once with "
                                      "persistent workers instead of every epoch, so later epochs would shuffle "
                                      "differently")
    else:
        changes["persistent_workers"] = bool(want_persistent)
    return changes


def fingerprint(ds, depth=0):
    """What persistent workers would miss of the dataset: its attributes, by value for scalars,
    by identity and length for containers, by identity and their own attributes (two levels) for
    other objects; arrays and tensors by identity. In-place writes into an array or a list item
    are not seen (documented in docs/report.md)."""
    d = getattr(ds, "__dict__", None)
    if not isinstance(d, dict):
        return (id(ds),)
    out = []
    for k, v in d.items():
        if v is None or isinstance(v, (bool, int, float, complex, str, bytes)):
            out.append((k, repr(v)))
        elif isinstance(v, (list, tuple, dict, set, frozenset)):
            out.append((k, id(v), len(v)))
        elif depth < 2 and isinstance(getattr(v, "__dict__", None), dict) and not (
                inspect.ismodule(v) or inspect.isclass(v) or inspect.isroutine(v)):
            out.append((k, id(v), fingerprint(v, depth + 1)))
        else:
            out.append((k, id(v)))
    return tuple(out)


def describe(swap) -> str:
    """The one line `--loader tuned` prints for a loader: what changed, what was kept."""
    parts = [f"{k} {swap.settings.get(k)!r} -> {v!r}" for k, v in swap.changed.items()]
    line = ", ".join(parts) if parts else "settings left as the script made them"
    if swap.kept:
        line += "; kept " + "; ".join(f"{k} ({why})" for k, why in swap.kept.items())
    return f"--loader {V.LOADER_TUNED}: {swap.label()}: {line}"
