"""Keeps stallscope's own frames out of the user's tracebacks.

The hooks wrap torch functions, so an exception that passes through them (a dataset raising inside
`next()`, a worker error re-raised by the DataLoader) carries our wrapper frames in its traceback.
The user must see the same traceback as without stallscope, so the places where Python prints an
uncaught exception (sys.excepthook, threading.excepthook) and where torch formats a worker's
exception into text (ExceptionWrapper, see hooks/_worker.py) drop every frame whose code lies in
this package's folder (sub-packages such as hooks/ included), for the exception and for its whole
__cause__/__context__ chain.

The exception objects are changed only while the previous hook runs and are restored after, so a
hook that keeps the exception sees it as it was.
"""

from __future__ import annotations

import builtins
import os
import sys
import threading
import types

_PKG_PREFIXES = tuple(
    {os.path.dirname(os.path.abspath(__file__)) + os.sep, os.path.dirname(os.path.realpath(__file__)) + os.sep}
)

# Exception groups are Python 3.11's; on 3.10 there are none to walk (isinstance(e, ()) is False).
_ExceptionGroup = getattr(builtins, "BaseExceptionGroup", ())


def is_ours(filename: str) -> bool:
    return filename.startswith(_PKG_PREFIXES)


def strip_tb(tb):
    """The traceback chain without stallscope frames (tb itself when it has none, or only ours)."""
    kept = []
    dropped = False
    t = tb
    while t is not None:
        if is_ours(t.tb_frame.f_code.co_filename):
            dropped = True
        else:
            kept.append(t)
        t = t.tb_next
    if not dropped or not kept:
        return tb
    new = None
    for t in reversed(kept):
        new = types.TracebackType(new, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return new


def _chain(exc):
    """The exception and every exception reachable through __cause__, __context__ and groups."""
    seen = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen or not isinstance(e, BaseException):
            continue
        seen.add(id(e))
        yield e
        todo.append(e.__cause__)
        todo.append(e.__context__)
        todo.extend(getattr(e, "exceptions", ()) if isinstance(e, _ExceptionGroup) else ())


def strip_chain(exc) -> list:
    """Replaces the traceback of exc and of its chain by the stripped one; returns what to restore."""
    saved = []
    for e in _chain(exc):
        tb = e.__traceback__
        new = strip_tb(tb)
        if new is not tb:
            saved.append((e, tb))
            e.__traceback__ = new
    return saved


def restore(saved) -> None:
    for e, tb in saved:
        try:
            e.__traceback__ = tb
        except Exception:
            pass


_prev_excepthook = None
_prev_thread_excepthook = None


def _excepthook(etype, value, tb):
    saved = []
    try:
        saved = strip_chain(value)
        tb = strip_tb(tb)
    except Exception:
        pass
    prev = _prev_excepthook or sys.__excepthook__
    try:
        prev(etype, value, tb)
    finally:
        restore(saved)


def _thread_excepthook(args):
    saved = []
    try:
        saved = strip_chain(args.exc_value)
        tb = strip_tb(args.exc_traceback)
        if tb is not args.exc_traceback:
            try:  # threading.ExceptHookArgs is a structseq (C) or a namedtuple (pure-Python threading)
                args = type(args)((args.exc_type, args.exc_value, tb, args.thread))
            except TypeError:
                args = type(args)(args.exc_type, args.exc_value, tb, args.thread)
    except Exception:
        pass
    prev = _prev_thread_excepthook or threading.__excepthook__
    try:
        prev(args)
    finally:
        restore(saved)


def install_excepthooks() -> None:
    """Chains our hooks in front of the current ones (idempotent)."""
    global _prev_excepthook, _prev_thread_excepthook
    if sys.excepthook is not _excepthook:
        _prev_excepthook = sys.excepthook
        sys.excepthook = _excepthook
    if threading.excepthook is not _thread_excepthook:
        _prev_thread_excepthook = threading.excepthook
        threading.excepthook = _thread_excepthook
