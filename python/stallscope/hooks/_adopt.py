"""`stallscope attach`: follow what already runs when the hooks arrive late. In the training
process, adopt_running() finds the running DataLoader iterators (and their pin-memory thread) and
follows them from their next batch; in a worker process started before the attach, adopt_worker()
instruments torch's worker loop, found on the main thread's stack, through its queues' methods.
"""

from __future__ import annotations

import sys

from .. import _native as N
from . import _main, _worker
from . import _state as S
from ._install import _deep_install, _install_worker_side
from ._pin import _PinInProxy, _PinOutProxy, _PinState
from ._state import _FetchCtx, _ItState

_instant = N.instant


def _loader_of(it, loaders):
    """The DataLoader an iterator came from: the one holding it (persistent workers), else the one
    with the same dataset and index sampler (torch's iterator keeps both, not the loader)."""
    for loader in loaders:
        if loader.__dict__.get("_iterator") is it:
            return loader
    for loader in loaders:
        try:
            if loader.dataset is it._dataset and loader._index_sampler is it._index_sampler:
                return loader
        except Exception:
            continue
    return None


def _exhausted(it, mp: bool) -> bool:
    """Whether a running iterator will hand no more batches: its epoch ended (StopIteration was
    raised, or the last batch was taken) and the loop still holds it, e.g. a persistent-workers
    iterator between epochs. Following it would count an epoch of no batches; its loader's next
    epoch is followed when it starts (a persistent iterator's through _reset)."""
    if mp and getattr(it, "_shutdown", False):
        return True
    try:  # a map-style dataset: the batch sampler's length is the epoch's
        return it._num_yielded >= len(it)
    except Exception:  # an IterableDataset
        pass
    if mp:
        # Torch keeps indices sent to the workers until they run out; none outstanding and none
        # received but not handed means the epoch is over.
        return getattr(it, "_tasks_outstanding", None) == 0 and not getattr(it, "_task_info", True)
    return bool(getattr(S.it_attr(it, "_dataset_fetcher"), "ended", False))


def adopt_running() -> tuple[int, int]:
    """For `stallscope attach`: follow the DataLoader iterators that were already running when the
    hooks were installed, from their next batch on; not one whose epoch has ended (_exhausted).
    Their loader's settings (dl.config) and a dl.epoch_begin are emitted now; the epoch is numbered
    from the attach, not from the start of training. Worker processes that exist already are
    announced (dl.worker_start); the attach command joins them too, where adopt_worker()
    instruments their loop, and the workers started after the attach are instrumented as usual.
    Returns (iterators followed, workers announced)."""
    if not S._shallow_done or not N.is_recording():
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
            mp = S._M is not None and isinstance(it, S._M)
            if _exhausted(it, mp):
                continue
            loader = _loader_of(it, loaders)
            if loader is None:
                continue
            info, E = _main._begin_epoch(loader)
            s = _ItState(info.L, E, mp=mp and S._orig_reset is not None)
            if mp:
                status = getattr(it, "_workers_status", None) or []
                for wid, w in enumerate(getattr(it, "_workers", [])):
                    if wid < len(status) and not status[wid]:
                        continue
                    _instant(S._I_WSTART, info.L, wid, w.pid or -1)
                    workers += 1
                try:
                    it._worker_result_queue._stallscope_L = info.L
                    _adopt_pin_thread(it, info.L)
                except Exception:
                    pass
            else:
                fetcher = S.it_attr(it, "_dataset_fetcher")
                if fetcher is not None and getattr(fetcher, "_stallscope_ctx", None) is None:
                    _main._instrument_fetcher(fetcher)
                _main._bind_fetcher_ctx(it, s, info.L)
            S.set_it_state(it, s)
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


def adopt_worker() -> str | None:
    """For `stallscope attach`, in a DataLoader worker process that was running before the attach:
    finds torch's worker loop on the main thread's stack and instruments what it holds (its index
    and result queues, through their methods; its fetcher), as _worker_loop does for a new worker.
    The batch being fetched now is not labelled; the next ones are. None if this process is not
    running torch's worker loop; then S.adopt_worker_why (hooks.adopt_worker_why) says why."""
    import threading

    _install_worker_side()
    loop = S._orig_worker_loop
    if loop is None:
        S.adopt_worker_why = "torch's worker loop not found"
        return None
    top = frame = sys._current_frames().get(threading.main_thread().ident)
    while frame is not None and frame.f_code is not loop.__code__:
        frame = frame.f_back
    if frame is None:
        names = []
        while top is not None and len(names) < 8:
            names.append(top.f_code.co_name)
            top = top.f_back
        S.adopt_worker_why = "the main thread is in " + " <- ".join(names)
        return None
    loc = frame.f_locals
    iq, dq, wid = loc.get("index_queue"), loc.get("data_queue"), loc.get("worker_id")
    if iq is None or dq is None or wid is None:
        S.adopt_worker_why = "the worker loop's queues are not where torch 2.x keeps them"
        return None
    if S._wctx is not None:
        return f"worker {S._wctx.W} (already instrumented)"
    ctx = _FetchCtx(L=-1, B=-1, W=int(wid), G=0)
    S._wctx = ctx
    iq.get = _worker._IndexQueueProxy(_Bound(get=iq.get), ctx).get
    dq.put = _worker._ResultQueueProxy(_Bound(put=dq.put), ctx).put
    fetcher = loc.get("fetcher")
    if fetcher is not None and getattr(fetcher, "_stallscope_ctx", None) is None:
        _worker._instrument_fetcher(fetcher, ctx)
    return f"worker {ctx.W}"
