"""DataLoader hooks: record what torch.utils.data.DataLoader does, in an unmodified training script.

Emits exactly the events of docs/events.md. Which torch function carries which event:

  main process
    DataLoader.__init__                      remember where the loader was created (created_at)
    DataLoader.__iter__                      dl.config (first time), dl.epoch_begin
    _BaseDataLoaderIter.__next__             dl.next span; dl.epoch_end on StopIteration
    _DatasetKind.create_fetcher (no workers) fetcher.fetch -> dl.fetch, fetcher.collate_fn -> dl.collate
    _MultiProcessingDataLoaderIter._reset    per-iterator state; dl.worker_start after the workers start
    ..._try_put_index                        dl.sent (B = _send_idx before, W = _task_info[B][0])
    ..._get_data                             dl.recv (not for the stale results drained by _reset)
    ..._shutdown_workers                     dl.worker_stop
    _utils.pin_memory._pin_memory_loop       dl.pin (queues proxied: get -> begin, put -> end)
  worker processes
    _utils.worker._worker_loop               thread name; queues proxied: index get -> current B, G;
                                             result put -> dl.put
    _DatasetKind.create_fetcher              dl.worker_ready (after worker_init_fn, and on resume);
                                             fetch -> dl.fetch, collate_fn -> dl.collate
    torch._utils.ExceptionWrapper.__init__   drops our frames from the worker traceback text

Installation is in two steps so that the script can still change torch between import and first
use: install() (at import of torch.utils.data.dataloader) wraps only DataLoader.__init__ and
__iter__; the first __iter__ checks the internals each part needs and patches the parts whose
internals are all there. A part whose internals are missing is left untouched (one warning, one
`stallscope.hooks` instant): torch behaves exactly as without stallscope there.

Rules every wrapper follows: the user's code and torch's code run exactly as before (same
arguments, same results, same exceptions, same order); our bookkeeping runs in try/except and its
failures are swallowed; the training loop's per-batch path does a handful of ctypes calls with
precomputed ids and no allocation beyond what Python needs for the call.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import sys
import threading

from . import _native as N
from . import _tb
from . import _vocab as V

# ---------------------------------------------------------------------------------------------
# Event ids. Interned per session (ids are indices into the session's string table); refreshed by
# refresh_ids() when a session starts or stops in this process. 0 while not recording: the C side
# then drops the events anyway.
_I_CONFIG = _I_EPOCH_BEGIN = _I_EPOCH_END = _I_NEXT = _I_SENT = _I_RECV = 0
_I_WSTART = _I_WSTOP = _I_FETCH = _I_COLLATE = _I_PIN = _I_WREADY = _I_PUT = _I_HOOKS = 0

# Hot-path C functions bound once (module globals are cheaper to reach than attributes).
_span_begin = N.span_begin_args
_span_end = N.span_end
_span_end_args = N.span_end_args
_instant = N.instant


def refresh_ids() -> None:
    global _I_CONFIG, _I_EPOCH_BEGIN, _I_EPOCH_END, _I_NEXT, _I_SENT, _I_RECV
    global _I_WSTART, _I_WSTOP, _I_FETCH, _I_COLLATE, _I_PIN, _I_WREADY, _I_PUT, _I_HOOKS
    i = N.intern
    _I_CONFIG, _I_EPOCH_BEGIN, _I_EPOCH_END = i(V.DL_CONFIG), i(V.DL_EPOCH_BEGIN), i(V.DL_EPOCH_END)
    _I_NEXT, _I_SENT, _I_RECV = i(V.DL_NEXT), i(V.DL_SENT), i(V.DL_RECV)
    _I_WSTART, _I_WSTOP = i(V.DL_WORKER_START), i(V.DL_WORKER_STOP)
    _I_FETCH, _I_COLLATE, _I_PIN = i(V.DL_FETCH), i(V.DL_COLLATE), i(V.DL_PIN)
    _I_WREADY, _I_PUT, _I_HOOKS = i(V.DL_WORKER_READY), i(V.DL_PUT), i(V.STALLSCOPE_HOOKS)


def on_session_change() -> None:
    """A session started or stopped in this process: ids of the old one are meaningless, and a
    loader seen in an earlier session announces its settings (dl.config) again in the new one."""
    global _session_gen
    _session_gen += 1
    N.forget_ids()
    refresh_ids()
    if N.is_recording():
        _name_main_thread()
        if _problem is not None:
            _instant(_I_HOOKS, N.intern(_problem), 0, 0)


def _name_main_thread() -> None:
    if threading.current_thread() is threading.main_thread() and _wctx is None:
        N.thread_name(V.THREAD_MAIN)


# ---------------------------------------------------------------------------------------------
# State

_lock = threading.RLock()
_shallow_done = False
_deep_done = False
_problem: str | None = None  # the warning printed when some part could not be instrumented
_tls = threading.local()  # .pending: (_LoaderInfo, E) while DataLoader.__iter__ runs
_next_loader_id = 0
_session_gen = 0  # bumped by on_session_change()

# Originals (None until patched).
_orig_dl_init = _orig_dl_iter = _orig_next = _orig_create_fetcher = None
_orig_reset = _orig_try_put_index = _orig_get_data = _orig_shutdown = None
_orig_worker_loop = None
_orig_pin_loop = None
_orig_excwrap_init = None
_wl_signature = None
_excwrap_ok = False  # ExceptionWrapper can be patched in workers (needed before wrapping fetch there)

# torch objects looked up at deep install.
_M = None  # _MultiProcessingDataLoaderIter
_S = None  # _SingleProcessDataLoaderIter
_StopMarker = None  # _utils.worker._IterableDatasetStopIteration
_ResumeMarker = None  # _utils.worker._ResumeIteration

# In a worker process: that worker's context (W, current B, G); None in the training process.
_wctx = None


class _LoaderInfo:
    """Per DataLoader, stored on the loader as `_stallscope_loader` (owner guards against copies)."""

    __slots__ = ("owner", "L", "epochs", "created_at", "gen")

    def __init__(self, owner, created_at):
        self.owner = id(owner)
        self.L = None  # assigned at the first __iter__
        self.epochs = 0
        self.created_at = created_at
        self.gen = -1  # the session whose database has this loader's dl.config


class _ItState:
    """Per iterator, stored on torch's iterator as `_stallscope_it` (read on every next())."""

    __slots__ = ("L", "E", "mp", "ctx", "recv", "ended", "in_reset")

    def __init__(self, L, E, mp):
        self.L = L
        self.E = E
        self.mp = mp  # multi-process iterator with the mp part installed
        self.ctx = None  # _FetchCtx of the single-process fetcher
        self.recv = set()  # batch indices taken off the result queue, not yet handed
        self.ended = False  # epoch_end emitted
        self.in_reset = False  # _reset is draining stale results of the previous epoch


class _FetchCtx:
    """What the fetch/collate wrappers of one fetcher need to label their spans."""

    __slots__ = ("L", "B", "W", "G")

    def __init__(self, L=-1, B=-1, W=-1, G=0):
        self.L, self.B, self.W, self.G = L, B, W, G


# ---------------------------------------------------------------------------------------------
# Small helpers


def _torch_version_xy(torch) -> str:
    v = str(getattr(torch, "__version__", "?")).split("+")[0].split(".")
    return ".".join(v[:2])


def _torch_dirs():
    torch = sys.modules.get("torch")
    f = getattr(torch, "__file__", None)
    if not f:
        return ()
    d = os.path.dirname(f)
    return tuple({os.path.abspath(d) + os.sep, os.path.realpath(d) + os.sep})


def _caller_site(loader):
    """"file.py:line" of the DataLoader(...) call: the first frame that is not torch's, not ours,
    and not the __init__ of a DataLoader subclass running for this very loader."""
    torch_dirs = _torch_dirs()
    f = sys._getframe(2)
    while f is not None:
        code = f.f_code
        fn = code.co_filename
        if _tb.is_ours(fn) or (torch_dirs and fn.startswith(torch_dirs)):
            f = f.f_back
            continue
        if code.co_name == "__init__" and f.f_locals.get("self") is loader:
            f = f.f_back
            continue
        return f"{os.path.basename(fn)}:{f.f_lineno}"
    return None


def _loader_info(loader):
    info = loader.__dict__.get("_stallscope_loader")
    if info is None or info.owner != id(loader):  # never seen, or a copy of another loader
        info = _LoaderInfo(loader, None)
        object.__setattr__(loader, "_stallscope_loader", info)
    return info


def _pin_effective(loader) -> bool:
    """What torch will do with pin_memory (mirrors _BaseDataLoaderIter.__init__ of torch 2.x)."""
    if not loader.pin_memory:
        return False
    import torch

    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "is_available"):
        if not acc.is_available():
            return False
        cur = acc.current_accelerator() if hasattr(acc, "current_accelerator") else None
        return not (cur is not None and getattr(cur, "type", None) == "mps")
    return bool(torch.cuda.is_available())


def _config(loader, L, created_at) -> str:
    import torch
    import torch.multiprocessing as tmp
    from torch.utils.data.dataloader import _DatasetKind

    nw = loader.num_workers
    start_method = None
    if nw > 0:
        ctx = loader.multiprocessing_context
        if ctx is not None:
            start_method = ctx.get_start_method()
        else:
            # allow_none: asking without it would fix the default context as a side effect.
            start_method = tmp.get_start_method(allow_none=True) or tmp.get_all_start_methods()[0]
    iterable = loader._dataset_kind == _DatasetKind.Iterable
    ds = loader.dataset
    dataset_len = None
    if not iterable or hasattr(type(ds), "__len__"):
        try:
            dataset_len = int(len(ds))
        except Exception:
            dataset_len = None
    batches = None
    if not iterable:  # len(loader) of an IterableDataset loader has side effects: not asked
        try:
            batches = int(len(loader._index_sampler))
        except Exception:
            batches = None
    doc = {
        "loader": L,
        "batch_size": loader.batch_size,
        "num_workers": nw,
        "pin_memory": bool(loader.pin_memory),
        "pin_memory_effective": _pin_effective(loader),
        "persistent_workers": bool(loader.persistent_workers),
        "prefetch_factor": loader.prefetch_factor if nw > 0 else None,
        "start_method": start_method,
        "dataset_type": "iterable" if iterable else "map",
        "dataset_class": type(ds).__qualname__,
        "dataset_len": dataset_len,
        "batches_per_epoch": batches,
        "in_order": bool(getattr(loader, "in_order", True)),
        "drop_last": bool(loader.drop_last),
        "created_at": created_at,
        "torch_version": str(torch.__version__),
    }
    return json.dumps(doc, separators=(",", ":"))


def _begin_epoch(loader):
    """Loader id on first use (+ dl.config), next epoch number, dl.epoch_begin. Returns (info, E)."""
    global _next_loader_id
    info = _loader_info(loader)
    with _lock:
        if info.L is None:
            info.L = _next_loader_id
            _next_loader_id += 1
        first = info.gen != _session_gen
        info.gen = _session_gen
        E = info.epochs
        info.epochs += 1
    if first:
        try:
            _instant(_I_CONFIG, info.L, N.intern_once(_config(loader, info.L, info.created_at)), 0)
        except Exception:
            pass
    _instant(_I_EPOCH_BEGIN, info.L, E, loader.num_workers)
    return info, E


# ---------------------------------------------------------------------------------------------
# DataLoader entry points (installed at import of torch.utils.data.dataloader)


def _dl_init(self, *args, **kwargs):
    try:
        # Also here, not only at the first __iter__: a DataLoader subclass may override __iter__
        # without calling DataLoader.__iter__, and its iterators still go through next().
        if not _deep_done:
            _deep_install()
        where = _caller_site(self)
    except Exception:
        where = None
    _orig_dl_init(self, *args, **kwargs)
    try:
        object.__setattr__(self, "_stallscope_loader", _LoaderInfo(self, where))
    except Exception:
        pass


def _dl_iter(self):
    pending = None
    prev = None
    try:
        if not _deep_done:
            _deep_install()
        pending = _begin_epoch(self)
        prev = getattr(_tls, "pending", None)
        _tls.pending = pending
    except Exception:
        pending = None
    if pending is None:
        return _orig_dl_iter(self)
    try:
        it = _orig_dl_iter(self)
    finally:
        _tls.pending = prev
    try:
        _attach_iterator(it, pending[0], pending[1])
    except Exception:
        pass
    return it


def _attach_iterator(it, info, E):
    d = it.__dict__
    s = d.get("_stallscope_it")
    if s is not None and s.L == info.L and s.E == E:
        return  # the multi-process _reset wrapper already set it up for this epoch
    mp = _M is not None and isinstance(it, _M)
    if s is None or s.L != info.L:
        s = _ItState(info.L, E, mp=mp and _orig_reset is not None)
        fetcher = d.get("_dataset_fetcher")
        ctx = getattr(fetcher, "_stallscope_ctx", None) if fetcher is not None else None
        if ctx is not None:
            ctx.L = info.L
            s.ctx = ctx
        d["_stallscope_it"] = s
    else:  # persistent iterator whose _reset we do not see (mp part not installed)
        s.E = E
        s.ended = False
        s.recv.clear()


# ---------------------------------------------------------------------------------------------
# Iterator: next()


def _it_next(self):
    try:
        s = self.__dict__.get("_stallscope_it")
    except Exception:
        s = None
    if s is None:  # an iterator we do not follow
        return _orig_next(self)
    try:  # our bookkeeping only: on failure, run next() unrecorded (never twice)
        L = s.L
        E = s.E
        B = self._num_yielded
        ctx = s.ctx
        if ctx is not None:
            ctx.B = B
        _span_begin(_I_NEXT, L, B, E)
    except Exception:
        return _orig_next(self)
    try:
        data = _orig_next(self)
    except StopIteration:
        try:
            _span_end_args(L, -1, E)
            if not s.ended:
                s.ended = True
                _instant(_I_EPOCH_END, L, E, self._num_yielded)
        except Exception:
            pass
        raise
    except BaseException:
        try:
            if s.mp:
                _handed(self, s, -1)  # forget the batch that raised (the loop may go on)
            _span_end_args(L, -1, E)
        except Exception:
            pass
        raise
    try:
        if s.mp:
            _span_end_args(L, _handed(self, s, B), E)
        else:
            _span_end()  # the batch handed is the one begun with: keep the begin's arguments
    except Exception:
        pass
    return data


def _handed(it, s, default):
    """The batch just handed by a multi-process iterator: the one received but no longer in
    _task_info (torch pops it right before _process_data). Works for in_order=False too."""
    recv = s.recv
    if recv:
        ti = it._task_info
        for i in recv:
            if i not in ti:
                recv.discard(i)
                return i
    return default


# ---------------------------------------------------------------------------------------------
# Fetcher: dl.fetch / dl.collate (main process with num_workers=0, and workers)


def _create_fetcher(*args, **kwargs):
    fetcher = _orig_create_fetcher(*args, **kwargs)
    try:
        _instrument_fetcher(fetcher)
    except Exception:
        pass
    return fetcher


def _instrument_fetcher(fetcher):
    orig_fetch = fetcher.fetch
    orig_collate = fetcher.collate_fn
    auto = bool(getattr(fetcher, "auto_collation", True))
    w = _wctx
    if w is not None:
        # Worker. Without the ExceptionWrapper patch our frames would appear in the traceback text
        # of a dataset error: then record no fetch spans rather than change what the user sees.
        _instant(_I_WREADY, w.W, w.G, 0)
        if not _excwrap_ok:
            return
        ctx = w
    else:
        ctx = _FetchCtx()
    in_worker = w is not None

    # Each wrapper begins its span in a try (a failure there must neither stop the user's call nor
    # close someone else's span), runs torch's function untouched, and ends the span it began.
    # An iterator that no DataLoader.__iter__ of ours attached keeps ctx.L = -1: no spans then.
    def fetch(possibly_batched_index):
        begun = False
        try:
            if in_worker:
                _span_begin(_I_FETCH, ctx.B, ctx.W, ctx.G)
                begun = True
            elif ctx.L >= 0:
                _span_begin(_I_FETCH, ctx.L, ctx.B, -1)
                begun = True
        except Exception:
            pass
        try:
            return orig_fetch(possibly_batched_index)
        finally:
            if begun:
                _span_end()

    def collate_fn(data):
        begun = False
        try:
            if in_worker:
                _span_begin(_I_COLLATE, ctx.B, len(data) if auto else 1, ctx.G)
                begun = True
            elif ctx.L >= 0:
                _span_begin(_I_COLLATE, ctx.L, ctx.B, len(data) if auto else 1)
                begun = True
        except Exception:
            pass
        try:
            return orig_collate(data)
        finally:
            if begun:
                _span_end()

    fetcher.collate_fn = collate_fn  # instance attributes: torch's fetch() reads self.collate_fn
    fetcher.fetch = fetch
    fetcher._stallscope_ctx = ctx


# ---------------------------------------------------------------------------------------------
# Multi-process iterator (training process)


def _mp_reset(self, *args, **kwargs):
    # *args: torch's own _reset raises its own TypeError for a bad call, not ours.
    s = None
    try:
        loader = args[0] if args else kwargs["loader"]
        first_iter = kwargs.get("first_iter", args[1] if len(args) > 1 else False)
        pending = getattr(_tls, "pending", None)
        info = _loader_info(loader)
        if pending is not None and pending[0] is info:
            E = pending[1]
        else:  # iterator made or reset without DataLoader.__iter__ (e.g. loader._get_iterator())
            info, E = _begin_epoch(loader)
        d = self.__dict__
        s = d.get("_stallscope_it")
        if first_iter or s is None:
            s = _ItState(info.L, E, mp=True)
            d["_stallscope_it"] = s
            # Workers are started (pids known) and no index is sent yet: announce them now so that
            # worker_start precedes every event of the workers' batches.
            for wid, w in enumerate(self._workers):
                _instant(_I_WSTART, info.L, wid, w.pid or -1)
            try:  # lets the pin-memory thread, which reads this queue, label its spans
                self._worker_result_queue._stallscope_L = info.L
            except Exception:
                pass
        else:
            s.L = info.L
            s.E = E
            s.ended = False
            s.recv.clear()
        s.in_reset = True
    except Exception:
        s = None
    try:
        return _orig_reset(self, *args, **kwargs)
    finally:
        if s is not None:
            s.in_reset = False


def _mp_try_put_index(self, *args, **kwargs):
    try:
        before = self._send_idx
    except Exception:
        return _orig_try_put_index(self, *args, **kwargs)
    r = _orig_try_put_index(self, *args, **kwargs)
    try:
        if self._send_idx != before:
            s = self.__dict__.get("_stallscope_it")
            if s is not None:
                _instant(_I_SENT, s.L, before, self._task_info[before][0])
    except Exception:
        pass
    return r


def _mp_get_data(self, *args, **kwargs):
    r = _orig_get_data(self, *args, **kwargs)
    try:
        s = self.__dict__.get("_stallscope_it")
        if s is not None and not s.in_reset:
            idx = r[0]
            if type(idx) is int and not isinstance(r[1], _StopMarker):
                s.recv.add(idx)
                info = self._task_info.get(idx)
                _instant(_I_RECV, s.L, idx, info[0] if info else -1)
    except Exception:
        pass
    return r


def _mp_shutdown_workers(self, *args, **kwargs):
    try:
        was = self._shutdown
    except Exception:
        was = True
    try:
        return _orig_shutdown(self, *args, **kwargs)
    finally:
        try:
            if not was and self._shutdown:
                s = self.__dict__.get("_stallscope_it")
                if s is not None:
                    for wid, w in enumerate(self._workers):
                        _instant(_I_WSTOP, s.L, wid, w.pid or -1)
        except Exception:
            pass


# ---------------------------------------------------------------------------------------------
# Worker processes


class _IndexQueueProxy:
    """The worker's index queue: notes the batch index (B) and the generation (G) it hands out."""

    __slots__ = ("_q", "_c")

    def __init__(self, q, ctx):
        self._q = q
        self._c = ctx

    def get(self, *args, **kwargs):
        r = self._q.get(*args, **kwargs)
        try:
            if type(r) is tuple:
                self._c.B = r[0]
            elif isinstance(r, _ResumeMarker):
                self._c.G += 1  # persistent workers: a new epoch; dl.worker_ready follows at create_fetcher
        except Exception:
            pass
        return r

    def __getattr__(self, name):
        return getattr(self._q, name)


class _ResultQueueProxy:
    """The worker's result queue: dl.put for every batch result (data or error), not for the
    end-of-data marker of an IterableDataset or the acknowledgement of a resume."""

    __slots__ = ("_q", "_c")

    def __init__(self, q, ctx):
        self._q = q
        self._c = ctx

    def put(self, obj, *args, **kwargs):
        try:
            idx = obj[0]
            if type(idx) is int and not isinstance(obj[1], _StopMarker):
                c = self._c
                _instant(_I_PUT, idx, c.W, c.G)
        except Exception:
            pass
        return self._q.put(obj, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._q, name)


def _worker_loop(*args, **kwargs):
    # Replaces torch.utils.data._utils.worker._worker_loop. Deliberately a plain top-level function
    # without functools.wraps: spawn/forkserver pickle the Process target by reference, i.e. as
    # "stallscope.hooks._worker_loop", so the child imports this module (which joins the session
    # through _native) before running it. With wraps it would pickle as torch's name and run
    # torch's loop, unrecorded.
    global _wctx
    orig = _orig_worker_loop
    if orig is None or _ResumeMarker is None:  # spawned child: this module was just imported
        try:
            _install_worker_side()
        except Exception:
            pass
        orig = _orig_worker_loop
        if orig is None:  # cannot happen with the torch the parent used; run torch's loop as is
            from torch.utils.data._utils import worker

            orig = worker._worker_loop
            if orig is _worker_loop:
                raise RuntimeError("stallscope: torch's DataLoader worker loop is not available")
    else:
        try:
            _install_worker_side()  # forked child: add what only workers need
        except Exception:
            pass
    try:
        ba = _wl_signature.bind(*args, **kwargs)
        a = ba.arguments
        ctx = _FetchCtx(L=-1, B=-1, W=int(a["worker_id"]), G=0)
        a["index_queue"] = _IndexQueueProxy(a["index_queue"], ctx)
        a["data_queue"] = _ResultQueueProxy(a["data_queue"], ctx)
        _wctx = ctx
        args, kwargs = ba.args, ba.kwargs
        N.thread_name(f"{V.THREAD_WORKER_PREFIX}{ctx.W}")
    except Exception:
        pass
    return orig(*args, **kwargs)


def _excwrap_init(self, exc_info=None, where="in background"):
    # In workers only: torch formats the exception of a failed fetch into text that the training
    # process re-raises; our fetch/collate frames must not be in it.
    if exc_info is None:
        exc_info = sys.exc_info()
    saved = []
    try:
        saved = _tb.strip_chain(exc_info[1])
        exc_info = (exc_info[0], exc_info[1], _tb.strip_tb(exc_info[2]))
    except Exception:
        pass
    try:
        _orig_excwrap_init(self, exc_info, where)
    finally:
        _tb.restore(saved)


# ---------------------------------------------------------------------------------------------
# Pin-memory thread


class _PinState:
    __slots__ = ("raw_in", "L", "B", "open", "named")

    def __init__(self, raw_in):
        self.raw_in = raw_in
        self.L = None
        self.B = -1
        self.open = False
        self.named = False


class _PinInProxy:
    __slots__ = ("_q", "_p")

    def __init__(self, q, p):
        self._q = q
        self._p = p

    def get(self, *args, **kwargs):
        p = self._p
        if p.open:  # the last batch was never put (shutdown): close its span here
            p.open = False
            _span_end()
        r = self._q.get(*args, **kwargs)
        try:
            idx = r[0]
            if type(idx) is int:
                if p.L is None:
                    p.L = getattr(p.raw_in, "_stallscope_L", -1)
                if not p.named:
                    p.named = True
                    N.thread_name(f"{V.THREAD_PIN_PREFIX}{p.L}")
                p.B = idx
                _span_begin(_I_PIN, p.L, idx, 0)
                p.open = True
        except Exception:
            pass
        return r

    def __getattr__(self, name):
        return getattr(self._q, name)


class _PinOutProxy:
    __slots__ = ("_q", "_p")

    def __init__(self, q, p):
        self._q = q
        self._p = p

    def put(self, obj, *args, **kwargs):
        p = self._p
        if p.open:
            p.open = False
            _span_end()
        return self._q.put(obj, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._q, name)


def _pin_memory_loop(in_queue, out_queue, *args, **kwargs):
    p = None
    try:
        p = _PinState(in_queue)
        in_q, out_q = _PinInProxy(in_queue, p), _PinOutProxy(out_queue, p)
    except Exception:
        in_q, out_q = in_queue, out_queue
    try:
        return _orig_pin_loop(in_q, out_q, *args, **kwargs)
    finally:
        if p is not None and p.open:
            p.open = False
            _span_end()


# ---------------------------------------------------------------------------------------------
# Installation


def _params(fn):
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return None


def _warn_problem(torch, missing) -> None:
    global _problem
    if _problem is not None or not missing:
        return
    _problem = (f"stallscope: cannot instrument the DataLoader of torch {_torch_version_xy(torch)} "
                f"(missing {', '.join(missing)}); training continues, DataLoader events not recorded")
    try:
        sys.stderr.write(_problem + "\n")
    except Exception:
        pass
    _instant(_I_HOOKS, N.intern(_problem), 0, 0)


def install() -> None:
    """Step 1, at import of torch.utils.data.dataloader: wrap DataLoader.__init__ and __iter__."""
    global _shallow_done, _orig_dl_init, _orig_dl_iter
    with _lock:
        if _shallow_done:
            return
        if not N.available or not N.is_recording():
            # Nothing would be recorded (_native already said why if the library is missing): keep
            # torch untouched. record() calls install() again once its session runs.
            return
        _shallow_done = True
        refresh_ids()
        _tb.install_excepthooks()
        _name_main_thread()
        import torch
        from torch.utils.data import dataloader as dl

        DL = getattr(dl, "DataLoader", None)
        if DL is None or not callable(DL.__dict__.get("__iter__")) or not callable(DL.__dict__.get("__init__")):
            _warn_problem(torch, ["DataLoader.__iter__"])
            return
        _install_profiler_check()
        _orig_dl_init = DL.__init__
        _orig_dl_iter = DL.__iter__
        # functools.wraps keeps __wrapped__, so inspect.signature(DataLoader) (used by frameworks
        # that re-create loaders) still sees torch's parameters.
        DL.__init__ = functools.wraps(_orig_dl_init)(_dl_init)
        DL.__iter__ = functools.wraps(_orig_dl_iter)(_dl_iter)


_profiler_warned = False


def _warn_profiler_gpu() -> None:
    global _profiler_warned
    if _profiler_warned or not N.gpu_capture_on():
        return
    _profiler_warned = True
    sys.stderr.write(
        "stallscope: torch.profiler asks for CUDA activity, but stallscope's GPU capture holds CUPTI, which one "
        "tool per process may use: the profiler will record no GPU activity (Kineto says "
        "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED). To profile the GPU with torch.profiler, run "
        "`stallscope run --gpu off` (or set STALLSCOPE_GPU=off): stallscope then records everything but the GPU "
        "side\n")


def _install_profiler_check() -> None:
    """One CUPTI client per process: torch.profiler with CUDA activity, started while stallscope's
    GPU capture runs, records no GPU activity, and Kineto's own warning does not say why. Before
    Kineto prepares or starts a trace with CUDA activity, say so once, with what to do."""
    try:
        from torch.autograd import profiler as ap
        from torch.autograd.profiler import ProfilerActivity
    except Exception:  # noqa: BLE001 - an unfamiliar torch: leave its profiler alone
        return
    for name in ("_prepare_profiler", "_enable_profiler"):
        orig = getattr(ap, name, None)
        if orig is None or getattr(orig, "_stallscope_check", False):
            continue

        def check(*args, _orig=orig, **kwargs):
            activities = args[1] if len(args) > 1 else kwargs.get("activities")
            try:
                if activities and ProfilerActivity.CUDA in activities:
                    _warn_profiler_gpu()
            except Exception:  # noqa: BLE001 - never stand between the user and their profiler
                pass
            return _orig(*args, **kwargs)

        check._stallscope_check = True
        check.__wrapped__ = orig
        setattr(ap, name, check)


def _deep_install() -> None:
    """Step 2, at the first DataLoader.__iter__: check each part's internals, patch complete parts."""
    global _deep_done, _orig_next, _orig_create_fetcher, _M, _S
    global _orig_reset, _orig_try_put_index, _orig_get_data, _orig_shutdown
    global _orig_worker_loop, _wl_signature, _orig_pin_loop, _StopMarker, _ResumeMarker
    with _lock:
        if _deep_done:
            return
        _deep_done = True
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
        _S = getattr(dl, "_SingleProcessDataLoaderIter", None)
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

        _orig_next = base.__next__
        base.__next__ = functools.wraps(_orig_next)(_it_next)
        if fetcher_ok:
            _orig_create_fetcher = kind.__dict__["create_fetcher"].__func__
            kind.create_fetcher = staticmethod(functools.wraps(_orig_create_fetcher)(_create_fetcher))
        if mp_ok:
            _M = M
            _StopMarker = worker_mod._IterableDatasetStopIteration
            _ResumeMarker = worker_mod._ResumeIteration
            _orig_reset, _orig_try_put_index = M._reset, M._try_put_index
            _orig_get_data, _orig_shutdown = M._get_data, M._shutdown_workers
            M._reset = functools.wraps(_orig_reset)(_mp_reset)
            M._try_put_index = functools.wraps(_orig_try_put_index)(_mp_try_put_index)
            M._get_data = functools.wraps(_orig_get_data)(_mp_get_data)
            M._shutdown_workers = functools.wraps(_orig_shutdown)(_mp_shutdown_workers)
            if worker_mod._worker_loop is not _worker_loop:
                _orig_worker_loop = worker_mod._worker_loop
                _wl_signature = inspect.signature(_orig_worker_loop)
                worker_mod._worker_loop = _worker_loop  # looked up at Process(...) time by torch
        if pin_ok and pin_mod._pin_memory_loop is not _pin_memory_loop:
            _orig_pin_loop = pin_mod._pin_memory_loop
            pin_mod._pin_memory_loop = _pin_memory_loop  # looked up at Thread(...) time by torch
        _warn_problem(torch, missing)


def problem() -> str | None:
    """The warning printed when some part of the DataLoader could not be instrumented, or None."""
    return _problem


def _loader_of(it, loaders):
    """The DataLoader an iterator came from: the one holding it (persistent workers), else the one
    with the same dataset and index sampler (torch's iterator keeps both, not the loader)."""
    for l in loaders:
        if l.__dict__.get("_iterator") is it:
            return l
    for l in loaders:
        try:
            if l.dataset is it._dataset and l._index_sampler is it._index_sampler:
                return l
        except Exception:
            continue
    return None


def adopt_running() -> tuple[int, int]:
    """For `stallscope attach`: follow the DataLoader iterators that were already running when the
    hooks were installed, from their next batch on. Their loader's settings (dl.config) and a
    dl.epoch_begin are emitted now; the epoch is numbered from the attach, not from the start of
    training. Worker processes that exist already are announced (dl.worker_start); the attach
    command joins them too, where adopt_worker() instruments their loop, and the workers started
    after the attach are instrumented as usual. Returns (iterators followed, workers announced)."""
    if not _shallow_done or not N.is_recording():
        return 0, 0
    _deep_install()
    import gc
    import itertools

    from torch.utils.data import dataloader as dl

    base = getattr(dl, "_BaseDataLoaderIter", None)
    DL = getattr(dl, "DataLoader", None)
    if base is None or DL is None:
        return 0, 0

    def family(cls):
        out, todo = {cls}, [cls]
        while todo:
            for sub in todo.pop().__subclasses__():
                if sub not in out:
                    out.add(sub)
                    todo.append(sub)
        return out

    # One pass over every object, at C speed (~25 ms for the ~165k objects of a process that
    # imported torch): type(), not isinstance(), which reads o.__class__ (some proxies compute it).
    loader_types, iter_types = family(DL), family(base)
    objs = gc.get_objects()
    found = list(itertools.compress(objs, map((loader_types | iter_types).__contains__, map(type, objs))))
    del objs
    loaders = [o for o in found if type(o) in loader_types]
    its = [o for o in found if type(o) in iter_types]
    followed = workers = 0
    for it in its:
        try:
            d = it.__dict__
            mp = _M is not None and isinstance(it, _M)
            if mp and getattr(it, "_shutdown", False):
                continue
            loader = _loader_of(it, loaders)
            if loader is None:
                continue
            info, E = _begin_epoch(loader)
            s = _ItState(info.L, E, mp=mp and _orig_reset is not None)
            if mp:
                status = getattr(it, "_workers_status", None) or []
                for wid, w in enumerate(getattr(it, "_workers", [])):
                    if wid < len(status) and not status[wid]:
                        continue
                    _instant(_I_WSTART, info.L, wid, w.pid or -1)
                    workers += 1
                try:
                    it._worker_result_queue._stallscope_L = info.L
                    _adopt_pin_thread(it, info.L)
                except Exception:
                    pass
            else:
                fetcher = d.get("_dataset_fetcher")
                if fetcher is not None:
                    if getattr(fetcher, "_stallscope_ctx", None) is None:
                        _instrument_fetcher(fetcher)
                    ctx = getattr(fetcher, "_stallscope_ctx", None)
                    if ctx is not None:
                        ctx.L = info.L
                        s.ctx = ctx
            d["_stallscope_it"] = s
            followed += 1
        except Exception:
            continue
    return followed, workers


class _Bound:
    """The queue methods a proxy forwards to, taken before the queue's own attribute is replaced
    by the proxy's (adopt_worker, _adopt_pin_thread): the proxy must not call itself."""

    __slots__ = ("get", "put")

    def __init__(self, get=None, put=None):
        self.get = get
        self.put = put


def _adopt_pin_thread(it, L) -> None:
    """A pin-memory thread already running torch's loop: dl.pin through its queues' methods."""
    t = getattr(it, "_pin_memory_thread", None)
    raw_in = getattr(it, "_worker_result_queue", None)
    out = getattr(it, "_data_queue", None)
    if t is None or not t.is_alive() or raw_in is None or out is None or out is raw_in:
        return
    if "get" in raw_in.__dict__ or "put" in out.__dict__:
        return  # adopted by an earlier attach
    p = _PinState(raw_in)
    p.L = L
    raw_in.get = _PinInProxy(_Bound(get=raw_in.get), p).get
    out.put = _PinOutProxy(_Bound(put=out.put), p).put


adopt_worker_why = ""  # why adopt_worker() returned None


def adopt_worker() -> str | None:
    """For `stallscope attach`, in a DataLoader worker process that was running before the attach:
    finds torch's worker loop on the main thread's stack and instruments what it holds (its index
    and result queues, through their methods; its fetcher), as _worker_loop does for a new worker.
    The batch being fetched now is not labelled; the next ones are. None if this process is not
    running torch's worker loop."""
    global _wctx, adopt_worker_why
    import threading

    _install_worker_side()
    loop = _orig_worker_loop
    if loop is None:
        adopt_worker_why = "torch's worker loop not found"
        return None
    top = frame = sys._current_frames().get(threading.main_thread().ident)
    while frame is not None and frame.f_code is not loop.__code__:
        frame = frame.f_back
    if frame is None:
        names = []
        while top is not None and len(names) < 8:
            names.append(top.f_code.co_name)
            top = top.f_back
        adopt_worker_why = "the main thread is in " + " <- ".join(names)
        return None
    loc = frame.f_locals
    iq, dq, wid = loc.get("index_queue"), loc.get("data_queue"), loc.get("worker_id")
    if iq is None or dq is None or wid is None:
        adopt_worker_why = "the worker loop's queues are not where torch 2.x keeps them"
        return None
    if _wctx is not None:
        return f"worker {_wctx.W} (already instrumented)"
    ctx = _FetchCtx(L=-1, B=-1, W=int(wid), G=0)
    _wctx = ctx
    iq.get = _IndexQueueProxy(_Bound(get=iq.get), ctx).get
    dq.put = _ResultQueueProxy(_Bound(put=dq.put), ctx).put
    fetcher = loc.get("fetcher")
    if fetcher is not None and getattr(fetcher, "_stallscope_ctx", None) is None:
        _instrument_fetcher(fetcher)
    return f"worker {ctx.W}"


def _install_worker_side() -> None:
    """In a worker process: the fetcher patch and the ExceptionWrapper patch (worker-only, so that
    the training process's own ExceptionWrapper is never touched). Idempotent; after fork most of it
    is inherited from the parent.

    No lock: a worker runs this single-threaded at its start, and after fork _lock may be held
    forever by a thread of the parent that does not exist in the child."""
    global _orig_worker_loop, _wl_signature, _StopMarker, _ResumeMarker, _orig_create_fetcher
    global _orig_excwrap_init, _excwrap_ok
    import torch
    from torch.utils.data import _utils
    from torch.utils.data import dataloader as dl

    worker_mod = _utils.worker
    if _orig_worker_loop is None and worker_mod._worker_loop is not _worker_loop:
        _orig_worker_loop = worker_mod._worker_loop
        _wl_signature = inspect.signature(_orig_worker_loop)
    if _ResumeMarker is None:
        _StopMarker = worker_mod._IterableDatasetStopIteration
        _ResumeMarker = worker_mod._ResumeIteration
    if _orig_excwrap_init is None:
        ew = torch._utils.ExceptionWrapper
        if _params(ew.__init__) == ["self", "exc_info", "where"]:
            _orig_excwrap_init = ew.__init__
            ew.__init__ = functools.wraps(_orig_excwrap_init)(_excwrap_init)
            _excwrap_ok = True
    kind = dl._DatasetKind
    if _orig_create_fetcher is None and isinstance(kind.__dict__.get("create_fetcher"), staticmethod):
        _orig_create_fetcher = kind.__dict__["create_fetcher"].__func__
        kind.create_fetcher = staticmethod(functools.wraps(_orig_create_fetcher)(_create_fetcher))
    refresh_ids()
