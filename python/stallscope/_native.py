"""ctypes binding of libstallscope.so (include/stallscope/stallscope.h).

Which library: $STALLSCOPE_LIBRARY if set (the launcher and `stallscope.record()` set it), else the
copy already in the process (LD_PRELOAD), else the build trees next to this package. If none loads,
every function here is a no-op and one `stallscope:` line says why; the program runs unrecorded.

Cost: the event functions are bound through `ctypes.PyDLL`, which keeps the GIL across the call.
The C functions never block (header contract), so releasing and re-taking the GIL as `CDLL` does
would only add cost: ~0.46 us per call instead of ~0.70 us (measured, Python 3.11). Functions that
take a lock or do I/O (intern, session start/stop) go through `CDLL` so other threads keep running.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = [
    "available", "lib_path", "load_error",
    "intern", "intern_once", "counter_track", "span_begin", "span_begin_args", "span_end", "span_end_args",
    "instant", "counter", "counter_for", "thread_name", "is_recording", "dropped_events",
    "version", "session_start", "session_stop", "session_shm", "forget_ids", "leave_attached", "gpu_mark",
    "parallel_totals",
]

_u32, _i32, _i64, _u64 = ctypes.c_uint32, ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64

# name: (restype, argtypes, gil_held). gil_held=True: hot path, bound through PyDLL.
_SIGNATURES = {
    "ss_intern": (_u32, [ctypes.c_char_p], False),
    "ss_counter_track": (_u32, [ctypes.c_char_p, ctypes.c_char_p], False),
    "ss_span_begin": (None, [_u32], True),
    "ss_span_begin_args": (None, [_u32, _i64, _i32, _i32], True),
    "ss_span_end": (None, [], True),
    "ss_span_end_args": (None, [_i64, _i32, _i32], True),
    "ss_instant": (None, [_u32, _i64, _i32, _i32], True),
    "ss_counter": (None, [_u32, ctypes.c_double], True),
    "ss_counter_for": (None, [_u32, ctypes.c_double, _i32], True),
    "ss_thread_name": (None, [ctypes.c_char_p], False),
    "ss_is_recording": (ctypes.c_int, [], True),
    "ss_dropped_events": (_u64, [], True),
    "ss_version": (ctypes.c_char_p, [], True),
    "ss_session_start": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t], False),
    "ss_session_start_keep": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_int64, ctypes.c_char_p, ctypes.c_size_t], False),
    "ss_session_stop": (ctypes.c_int, [], False),
    "ss_session_shm": (ctypes.c_char_p, [], True),
    "ss_attach_end": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t], False),
    "ss_gpu_capture_on": (ctypes.c_int, [], True),
    "ss_gpu_marks_wanted": (ctypes.c_int, [], True),
    "ss_gpu_mark": (None, [ctypes.c_int], True),
    "ss_parallel_totals": (None, [ctypes.POINTER(_u64)], True),
}

_LIB_NAME = "libstallscope.so"


def _candidates() -> list[str]:
    """Library paths to try after $STALLSCOPE_LIBRARY, most specific first."""
    out = []
    for pkg in (os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.realpath(__file__))):
        # build tree: build/python/stallscope -> build/lib; source tree: python/stallscope -> build/lib;
        # install tree: PREFIX/python/stallscope -> PREFIX/lib.
        for rel in (("..", "..", "lib"), ("..", "..", "build", "lib")):
            p = os.path.normpath(os.path.join(pkg, *rel, _LIB_NAME))
            if p not in out:
                out.append(p)
    return out


def _bind(handle_c, handle_py):
    funcs = {}
    for name, (restype, argtypes, gil_held) in _SIGNATURES.items():
        f = getattr(handle_py if gil_held else handle_c, name)  # AttributeError: not our library
        f.restype = restype
        f.argtypes = argtypes
        funcs[name] = f
    return funcs


def _load():
    """Returns (path, functions) or (None, None) with a reason in load_error."""
    tried = []
    env = os.environ.get("STALLSCOPE_LIBRARY")
    paths = [env] if env else []
    # Already in the process (LD_PRELOAD without STALLSCOPE_LIBRARY): use that copy, not a second one.
    try:
        if hasattr(ctypes.CDLL(None), "ss_intern"):
            paths.append(None)
    except OSError:
        pass
    paths += _candidates()
    for p in paths:
        if p is not None and not os.path.exists(p):
            tried.append(f"{p}: not found")
            continue
        try:
            funcs = _bind(ctypes.CDLL(p), ctypes.PyDLL(p))
            return (p if p is not None else "(preloaded)"), funcs
        except (OSError, AttributeError) as e:
            tried.append(f"{p or '(preloaded)'}: {e}")
    global load_error
    load_error = "; ".join(tried) if tried else "no candidate path"
    if "static TLS" in load_error:
        # glibc cannot dlopen a library with initial-exec TLS once the static TLS reserve is used
        # up (torch's libraries use much of it): load it before torch, or preload it.
        load_error += " -- import stallscope before torch, or run under `stallscope run`"
    return None, None


def _noop(*_args):
    return None


def _zero(*_args):
    return 0


load_error: str | None = None
lib_path, _f = _load()
available = _f is not None

if available:
    _ss_intern = _f["ss_intern"]
    _ss_counter_track = _f["ss_counter_track"]
    _ss_thread_name = _f["ss_thread_name"]
    _ss_version = _f["ss_version"]
    _ss_session_start = _f["ss_session_start_keep"]
    _ss_session_stop = _f["ss_session_stop"]
    _ss_session_shm = _f["ss_session_shm"]
    _ss_is_recording = _f["ss_is_recording"]
    _ss_attach_end = _f["ss_attach_end"]
    _ss_gpu_capture_on = _f["ss_gpu_capture_on"]
    # Hot path: the raw ctypes functions, no Python wrapper in between.
    span_begin = _f["ss_span_begin"]
    span_begin_args = _f["ss_span_begin_args"]
    span_end = _f["ss_span_end"]
    span_end_args = _f["ss_span_end_args"]
    instant = _f["ss_instant"]
    counter = _f["ss_counter"]
    counter_for = _f["ss_counter_for"]
    dropped_events = _f["ss_dropped_events"]
    # Light GPU mode only (STALLSCOPE_GPU=light): ss_gpu_mark at the bounds of next(); else None.
    gpu_mark = _f["ss_gpu_mark"] if _f["ss_gpu_marks_wanted"]() == 1 else None
    _ss_parallel_totals = _f["ss_parallel_totals"]
    _par_buf = (_u64 * 3)()

    def parallel_totals() -> tuple[int, int, int]:
        """OpenMP parallel regions entered so far (ss_parallel_totals): (count, their wall ns,
        their bodies' ns)."""
        _ss_parallel_totals(_par_buf)
        return _par_buf[0], _par_buf[1], _par_buf[2]
else:
    sys.stderr.write(f"stallscope: cannot load {_LIB_NAME} ({load_error}); nothing is recorded\n")
    _ss_intern = _ss_counter_track = _ss_is_recording = _ss_session_stop = _zero
    _ss_thread_name = _ss_version = _ss_session_shm = _noop
    _ss_session_start = None
    _ss_attach_end = lambda *_args: -1  # noqa: E731
    _ss_gpu_capture_on = _zero
    span_begin = span_begin_args = span_end = span_end_args = instant = _noop
    counter = counter_for = _noop
    dropped_events = _zero
    gpu_mark = None
    parallel_totals = None

# Interned ids by text. Ids belong to a session: cleared when one starts or stops in this process
# (forget_ids), kept across fork (a forked child records into the same session). A 0 (not
# recording, or the string table is full) is never cached, so a later session interns again.
_ids: dict[str, int] = {}


def intern(text: str) -> int:
    i = _ids.get(text)
    if i is None:
        i = _ss_intern(text.encode("utf-8", "replace"))
        if i:
            _ids[text] = i
    return i


def intern_once(text: str) -> int:
    """Interns a string that will not be asked for again (a config document): not cached, so a
    program that makes a new DataLoader every epoch does not grow the cache."""
    return _ss_intern(text.encode("utf-8", "replace"))


def counter_track(name: str, unit: str) -> int:
    key = "\x00track\x00" + name + "\x1f" + unit
    i = _ids.get(key)
    if i is None:
        i = _ss_counter_track(name.encode("utf-8", "replace"), unit.encode("utf-8", "replace"))
        if i:
            _ids[key] = i
    return i


def forget_ids() -> None:
    _ids.clear()


def thread_name(name: str) -> None:
    _ss_thread_name(name.encode("utf-8", "replace"))


def is_recording() -> bool:
    return bool(_ss_is_recording())


def version() -> str | None:
    v = _ss_version()
    return v.decode() if v else None


def gpu_capture_on() -> bool:
    """True once stallscope's GPU capture (CUPTI) runs in this process."""
    return bool(_ss_gpu_capture_on())


def session_shm() -> str | None:
    v = _ss_session_shm()
    return v.decode() if v else None


def session_start(db_path: str, keep_detail_ns: int = 0) -> tuple[bool, str]:
    """Starts an in-process session writing db_path, keeping every event of the latest
    keep_detail_ns only (0: all). Returns (ok, reason if not ok)."""
    if _ss_session_start is None:
        return False, f"{_LIB_NAME} not loaded: {load_error}"
    err = ctypes.create_string_buffer(512)
    rc = _ss_session_start(os.fsencode(db_path), keep_detail_ns, err, len(err))
    if rc != 0:
        return False, err.value.decode("utf-8", "replace") or "unknown error"
    return True, ""


def session_stop() -> bool:
    return _ss_session_stop() == 0


def leave_attached() -> bool:
    """Stops recording in a process that `stallscope attach` joined to a session (ss_attach_end)."""
    return _ss_attach_end(None, None, 0) == 0
