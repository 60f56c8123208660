"""DataLoader worker processes: torch's worker loop (the thread's name; its index queue proxied to
learn the current batch B and generation G, its result queue to emit dl.put), the worker's fetcher
(dl.worker_ready, dl.fetch, dl.collate, dl.batch), and ExceptionWrapper, so that the traceback text a failed
fetch sends to the training process has none of our frames.
"""

from __future__ import annotations

import sys
import time

from .. import _native as N
from .. import _tb
from .. import _vocab as V
from . import _state as S
from ._state import _FetchCtx

# Hot-path C functions bound once (module globals are cheaper to reach than attributes). Never
# rebound: _native binds them at its import.
_span_begin = N.span_begin_args
_span_end = N.span_end
_instant = N.instant
_cpu_ns = time.process_time_ns


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
            elif isinstance(r, S._ResumeMarker):
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
            if type(idx) is int and not isinstance(obj[1], S._StopMarker):
                c = self._c
                _instant(S._I_PUT, idx, c.W, c.G)
        except Exception:
            pass
        return self._q.put(obj, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._q, name)


def _worker_loop(*args, **kwargs):
    # Replaces torch.utils.data._utils.worker._worker_loop. Deliberately a plain top-level function
    # without functools.wraps: spawn/forkserver pickle the Process target by reference, i.e. as
    # "stallscope.hooks._worker._worker_loop", so the child imports this module (whose package joins
    # the session through _native) before running it. With wraps it would pickle as torch's name
    # and run torch's loop, unrecorded.
    orig = S._orig_worker_loop
    if orig is None or S._ResumeMarker is None:  # spawned child: this module was just imported
        try:
            S._install_worker_side()
        except Exception:
            pass
        orig = S._orig_worker_loop
        if orig is None:  # cannot happen with the torch the parent used; run torch's loop as is
            from torch.utils.data._utils import worker

            orig = worker._worker_loop
            if orig is _worker_loop:
                raise RuntimeError("stallscope: torch's DataLoader worker loop is not available")
    else:
        try:
            S._install_worker_side()  # forked child: add what only workers need
        except Exception:
            pass
    try:
        ba = S._wl_signature.bind(*args, **kwargs)
        a = ba.arguments
        ctx = _FetchCtx(L=-1, B=-1, W=int(a["worker_id"]), G=0)
        a["index_queue"] = _IndexQueueProxy(a["index_queue"], ctx)
        a["data_queue"] = _ResultQueueProxy(a["data_queue"], ctx)
        S._wctx = ctx
        args, kwargs = ba.args, ba.kwargs
        N.thread_name(f"{V.THREAD_WORKER_PREFIX}{ctx.W}")
    except Exception:
        pass
    return orig(*args, **kwargs)


def _instrument_fetcher(fetcher, w):
    """Wraps the fetch and collate of a fetcher in worker w (the worker's _FetchCtx, whose B and G
    the index queue proxy keeps current), after dl.worker_ready. Without the ExceptionWrapper patch
    our frames would appear in the traceback text of a dataset error: then no fetch spans rather
    than a change in what the user sees."""
    orig_fetch = fetcher.fetch
    orig_collate = fetcher.collate_fn
    auto = bool(getattr(fetcher, "auto_collation", True))
    _instant(S._I_WREADY, w.W, w.G, 0)
    if not S._excwrap_ok:
        return
    ctx = w

    # Each wrapper begins its span in a try (a failure there must neither stop the user's call nor
    # close someone else's span), runs torch's function untouched, and ends the span it began.
    # dl.cpu after each fetch: the worker's CPU time in it and since the previous fetch ended (the
    # put: pickling the batch into shared memory), in microseconds.
    last = [-1]

    def fetch(possibly_batched_index):
        begun = False
        try:
            c0 = _cpu_ns()
            _span_begin(S._I_FETCH, ctx.B, ctx.W, ctx.G)
            begun = True
        except Exception:
            pass
        try:
            return orig_fetch(possibly_batched_index)
        finally:
            if begun:
                _span_end()
                try:
                    c1 = _cpu_ns()
                    _instant(S._I_CPU, ctx.B, (c1 - c0) // 1000, (c0 - last[0]) // 1000 if last[0] >= 0 else -1)
                    last[0] = c1
                except Exception:
                    pass

    # dl.batch after this worker's first collate: the batch's layout, from which the what-if model
    # prices the collate into shared memory that the training process would not pay.
    layout = [True]

    def collate_fn(data):
        begun = False
        try:
            _span_begin(S._I_COLLATE, ctx.B, len(data) if auto else 1, ctx.G)
            begun = True
        except Exception:
            pass
        try:
            out = orig_collate(data)
        finally:
            if begun:
                _span_end()
        if layout[0]:
            layout[0] = False
            try:
                from ._main import _batch_layout

                _instant(S._I_BATCH, *_batch_layout(out), 0)
            except Exception:
                pass
        return out

    fetcher.collate_fn = collate_fn  # instance attributes: torch's fetch() reads self.collate_fn
    fetcher.fetch = fetch
    fetcher._stallscope_ctx = ctx


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
        S._orig_excwrap_init(self, exc_info, where)
    finally:
        _tb.restore(saved)
