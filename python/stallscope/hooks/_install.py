"""Installation: which torch function gets which wrapper, and when. install() at import of
torch.utils.data.dataloader, _deep_install() at the first DataLoader use, _install_worker_side()
in each worker process; problem() and the `stallscope.hooks` instant when some part of torch's
internals is missing; on_session_change() when a session starts or stops in this process.
Also the create_fetcher wrapper, which runs in both kinds of process and hands the fetcher to
the main-process or the worker instrumentation.
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading

from .. import _native as N
from .. import _tb
from .. import _vocab as V
from . import _dist, _fast, _main, _pin, _profiler, _swap, _worker
from . import _state as S

_instant = N.instant


def on_session_change() -> None:
    """A session started or stopped in this process: ids of the old one are meaningless, and a
    loader seen in an earlier session announces its settings (dl.config) again in the new one."""
    S._session_gen += 1
    N.forget_ids()
    S.refresh_ids()
    if N.is_recording():
        _name_main_thread()
        if S._problem is not None:
            _instant(S._I_HOOKS, N.intern(S._problem), 0, 0)


def _name_main_thread() -> None:
    if threading.current_thread() is threading.main_thread() and S._wctx is None:
        N.thread_name(V.THREAD_MAIN)


def problem() -> str | None:
    """The warning printed when some part of the DataLoader could not be instrumented, or None."""
    return S._problem


def _torch_version_xy(torch) -> str:
    v = str(getattr(torch, "__version__", "?")).split("+")[0].split(".")
    return ".".join(v[:2])


def _params(fn):
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return None


def _warn_problem(torch, missing) -> None:
    if S._problem is not None or not missing:
        return
    S._problem = (f"stallscope: cannot instrument the DataLoader of torch {_torch_version_xy(torch)} "
                  f"(missing {', '.join(missing)}); training continues, DataLoader events not recorded")
    try:
        sys.stderr.write(S._problem + "\n")
    except Exception:
        pass
    _instant(S._I_HOOKS, N.intern(S._problem), 0, 0)


def _create_fetcher(*args, **kwargs):
    # Replaces _DatasetKind.create_fetcher, in the training process and in workers alike.
    fetcher = S._orig_create_fetcher(*args, **kwargs)
    try:
        w = S._wctx
        if w is not None:
            _worker._instrument_fetcher(fetcher, w)
        else:
            _main._instrument_fetcher(fetcher)
    except Exception:
        pass
    return fetcher


def install() -> None:
    """Step 1, at import of torch.utils.data.dataloader: wrap DataLoader.__init__ and __iter__ (and
    __len__ under --loader reference)."""
    with S._lock:
        if S._shallow_done:
            return
        if not N.available or not N.is_recording():
            # Nothing would be recorded (_native already said why if the library is missing): keep
            # torch untouched. record() calls install() again once its session runs.
            return
        S._shallow_done = True
        S.refresh_ids()
        _tb.install_excepthooks()
        _name_main_thread()
        import torch
        from torch.utils.data import dataloader as dl

        DL = getattr(dl, "DataLoader", None)
        if DL is None or not callable(DL.__dict__.get("__iter__")) or not callable(DL.__dict__.get("__init__")):
            _warn_problem(torch, ["DataLoader.__iter__"])
            return
        _profiler._install_profiler_check()
        S._orig_dl_init = DL.__init__
        S._orig_dl_iter = DL.__iter__
        # functools.wraps keeps __wrapped__, so inspect.signature(DataLoader) (used by frameworks
        # that re-create loaders) still sees torch's parameters.
        DL.__init__ = functools.wraps(S._orig_dl_init)(_main._dl_init)
        DL.__iter__ = functools.wraps(S._orig_dl_iter)(_main._dl_iter)
        S._DL = DL
        _swap.read_mode()  # `stallscope run --loader`: None (torch) leaves everything above as it is
        if S._swap_mode == V.LOADER_REFERENCE and callable(DL.__dict__.get("__len__")):
            S._orig_dl_len = DL.__len__
            DL.__len__ = functools.wraps(S._orig_dl_len)(_swap.dl_len)


def _deep_install() -> None:
    """Step 2, at the first DataLoader.__iter__: check each part's internals, patch complete parts."""
    with S._lock:
        if S._deep_done:
            return
        S._deep_done = True
        import torch
        from torch.utils.data import _utils
        from torch.utils.data import dataloader as dl

        missing = []

        def need(owner, owner_name, names):
            lacking = [f"{owner_name}.{n}" for n in names if owner is None or not hasattr(owner, n)]
            missing.extend(lacking)
            return not lacking

        base = getattr(dl, "_BaseDataLoaderIter", None)
        if not need(base, "_BaseDataLoaderIter", ["__next__"]):
            _warn_problem(torch, missing)
            return  # without next() there is nothing worth recording
        S._S = getattr(dl, "_SingleProcessDataLoaderIter", None)
        kind = getattr(dl, "_DatasetKind", None)
        fetcher_ok = need(kind, "_DatasetKind", ["create_fetcher"]) and isinstance(
            kind.__dict__.get("create_fetcher"), staticmethod)
        if kind is not None and hasattr(kind, "create_fetcher") and not fetcher_ok:
            missing.append("_DatasetKind.create_fetcher (as staticmethod)")

        M = getattr(dl, "_MultiProcessingDataLoaderIter", None)
        worker_mod = getattr(_utils, "worker", None)
        mp_ok = need(M, "_MultiProcessingDataLoaderIter",
                     ["_reset", "_try_put_index", "_get_data", "_shutdown_workers"])
        mp_ok = need(worker_mod, "_utils.worker",
                     ["_worker_loop", "_ResumeIteration", "_IterableDatasetStopIteration"]) and mp_ok
        if mp_ok:
            params = _params(worker_mod._worker_loop)
            lacking = [p for p in ("index_queue", "data_queue", "worker_id") if params is None or p not in params]
            if lacking:
                missing.append(f"_worker_loop parameters {', '.join(lacking)}")
                mp_ok = False
        pin_mod = getattr(_utils, "pin_memory", None)
        pin_ok = need(pin_mod, "_utils.pin_memory", ["_pin_memory_loop"])
        if pin_ok and (_params(pin_mod._pin_memory_loop) or [])[:2] != ["in_queue", "out_queue"]:
            missing.append("_pin_memory_loop(in_queue, out_queue, ...)")
            pin_ok = False
        ew = getattr(getattr(torch, "_utils", None), "ExceptionWrapper", None)
        if (_params(ew.__init__) if ew is not None else None) != ["self", "exc_info", "where"]:
            missing.append("ExceptionWrapper(exc_info, where)")  # worker fetch spans not recorded

        fast = _fast.load()  # the per-batch hooks in C; None: _main's Python twins
        if fast is not None:
            S.refresh_ids()  # hands the session's ids to the C hooks
        S._orig_next = base.__next__
        it_next = fast.next_hook(S._orig_next, vars(S)) if fast is not None else _main._it_next
        base.__next__ = functools.wraps(S._orig_next)(it_next)
        if fetcher_ok:
            S._orig_create_fetcher = kind.__dict__["create_fetcher"].__func__
            kind.create_fetcher = staticmethod(functools.wraps(S._orig_create_fetcher)(_create_fetcher))
        if mp_ok:
            S._M = M
            S._StopMarker = worker_mod._IterableDatasetStopIteration
            S._ResumeMarker = worker_mod._ResumeIteration
            S._orig_reset, S._orig_try_put_index = M._reset, M._try_put_index
            S._orig_get_data, S._orig_shutdown = M._get_data, M._shutdown_workers
            M._reset = functools.wraps(S._orig_reset)(_main._mp_reset)
            put_index, get_data = _main._mp_try_put_index, _main._mp_get_data
            if fast is not None:  # dl.sent and dl.recv from C
                put_index = fast.sent_hook(S._orig_try_put_index)
                get_data = fast.recv_hook(S._orig_get_data, S._StopMarker)
            M._try_put_index = functools.wraps(S._orig_try_put_index)(put_index)
            M._get_data = functools.wraps(S._orig_get_data)(get_data)
            M._shutdown_workers = functools.wraps(S._orig_shutdown)(_main._mp_shutdown_workers)
            if worker_mod._worker_loop is not _worker._worker_loop:
                S._orig_worker_loop = worker_mod._worker_loop
                S._wl_signature = inspect.signature(S._orig_worker_loop)
                worker_mod._worker_loop = _worker._worker_loop  # looked up at Process(...) time by torch
        if pin_ok and pin_mod._pin_memory_loop is not _pin._pin_memory_loop:
            S._orig_pin_loop = pin_mod._pin_memory_loop
            pin_mod._pin_memory_loop = _pin._pin_memory_loop  # looked up at Thread(...) time by torch
        try:
            _main.install_step_hook(torch)
        except Exception:
            pass  # the training loader is then the most-consumed one
        try:
            _dist.install(torch)
        except Exception:
            pass  # collectives then go unrecorded
        _warn_problem(torch, missing)


def _install_worker_side() -> None:
    """In a worker process: the fetcher patch and the ExceptionWrapper patch (worker-only, so that
    the training process's own ExceptionWrapper is never touched). Idempotent; after fork most of it
    is inherited from the parent.

    No lock: a worker runs this single-threaded at its start, and after fork S._lock may be held
    forever by a thread of the parent that does not exist in the child."""
    import torch
    from torch.utils.data import _utils
    from torch.utils.data import dataloader as dl

    worker_mod = _utils.worker
    if S._orig_worker_loop is None and worker_mod._worker_loop is not _worker._worker_loop:
        S._orig_worker_loop = worker_mod._worker_loop
        S._wl_signature = inspect.signature(S._orig_worker_loop)
    if S._ResumeMarker is None:
        S._StopMarker = worker_mod._IterableDatasetStopIteration
        S._ResumeMarker = worker_mod._ResumeIteration
    if S._orig_excwrap_init is None:
        ew = torch._utils.ExceptionWrapper
        if _params(ew.__init__) == ["self", "exc_info", "where"]:
            S._orig_excwrap_init = ew.__init__
            ew.__init__ = functools.wraps(S._orig_excwrap_init)(_worker._excwrap_init)
            S._excwrap_ok = True
    kind = dl._DatasetKind
    if S._orig_create_fetcher is None and isinstance(kind.__dict__.get("create_fetcher"), staticmethod):
        S._orig_create_fetcher = kind.__dict__["create_fetcher"].__func__
        kind.create_fetcher = staticmethod(functools.wraps(S._orig_create_fetcher)(_create_fetcher))
    S.refresh_ids()


S._deep_install = _deep_install
S._install_worker_side = _install_worker_side
