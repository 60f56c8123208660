"""The pin-memory thread of the training process: dl.pin around each batch, through proxies of the
loop's queues (a batch taken off the in-queue begins the span, its put on the out-queue ends it).
"""

from __future__ import annotations

from .. import _native as N
from .. import _vocab as V
from . import _state as S

# Hot-path C functions bound once (module globals are cheaper to reach than attributes). Never
# rebound: _native binds them at its import.
_span_begin = N.span_begin_args
_span_end = N.span_end


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
                _span_begin(S._I_PIN, p.L, idx, 0)
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
    # Replaces torch.utils.data._utils.pin_memory._pin_memory_loop (looked up at Thread(...) time).
    p = None
    try:
        p = _PinState(in_queue)
        in_q, out_q = _PinInProxy(in_queue, p), _PinOutProxy(out_queue, p)
    except Exception:
        in_q, out_q = in_queue, out_queue
    try:
        return S._orig_pin_loop(in_q, out_q, *args, **kwargs)
    finally:
        if p is not None and p.open:
            p.open = False
            _span_end()
