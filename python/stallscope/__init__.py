"""stallscope: see why a PyTorch training job waits for its input pipeline.

Two ways to record a script:

    stallscope run -o run.db -- python train.py        # no change to the script

    import stallscope
    with stallscope.record("run.db"):                  # or stallscope.start(path) / stop()
        train()

    with stallscope.record("run.db", keep_detail="6h"):  # a run of days: the latest 6 h in full
        train()

Either way the DataLoader hooks (stallscope.hooks) record every torch DataLoader the program
iterates, in the training process and in its worker processes (forked or spawned), into one
SQLite database; see docs/events.md for what is recorded.

The package also ships a prefetching loader with native threads, `stallscope.ReferenceLoader`
(reference_loader.py), for A/B comparisons against torch's DataLoader.

Importing this package is cheap: it loads neither torch nor the native library; those load on
first use (ReferenceLoader, LoaderError and ImageTransform are imported when first named).
"""

from __future__ import annotations

import os
import sys

__version__ = "0.1.0"
__all__ = ["record", "start", "stop", "is_recording", "ReferenceLoader", "LoaderError", "ImageTransform",
           "__version__"]


def __getattr__(name: str):
    # The loader's module imports nothing heavy at its own import either; torch comes with the
    # first ReferenceLoader made.
    if name in ("ReferenceLoader", "LoaderError", "ImageTransform"):
        from . import reference_loader

        return getattr(reference_loader, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# Environment values that start() set, restored by stop().
_env_saved: dict[str, str | None] = {}
_started = False


def _say(msg: str) -> None:
    try:
        sys.stderr.write(f"stallscope: {msg}\n")
    except Exception:
        pass


_DURATION_UNITS = {"s": 1, "": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def _duration_ns(value) -> int | None:
    """A duration as `stallscope run --keep-detail` takes it ("90s", "30m", "1.5h", "2d", or a
    number of seconds) in ns; None for anything else, zero or less."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        v = value.strip()
        unit = v.lstrip("0123456789.")
        number = v[: len(v) - len(unit)]
        if unit not in _DURATION_UNITS or not number:
            return None
        try:
            seconds = float(number) * _DURATION_UNITS[unit]
        except ValueError:
            return None
    else:
        return None
    if not (0 < seconds < 9e9):  # NaN and ~290 years are not durations either
        return None
    return int(seconds * 1e9)


def start(path, keep_detail=None) -> bool:
    """Starts recording this process (and the DataLoader workers it starts) into `path`.

    keep_detail: keep every event of the latest this much only, and the summaries of the whole
    run (as `stallscope run --keep-detail`): "30m", "6h", "2d" or seconds, at least 10 s; None
    keeps every event.

    Returns True if recording started. On failure (library missing, path not writable, already
    recording, a keep_detail that is not a duration) prints one `stallscope:` line and returns
    False: the program goes on unrecorded.
    """
    global _started
    from . import _native as N

    path = os.fspath(path)
    keep_ns = 0
    if keep_detail is not None:
        keep_ns = _duration_ns(keep_detail)
        if keep_ns is None or keep_ns < 10_000_000_000:
            _say(f"cannot record to {path} (keep_detail={keep_detail!r} is not a duration of at least 10 s, "
                 "such as '30m', '6h' or 600); the program runs unrecorded")
            return False
    if not N.available:
        return False  # _native already said why
    ok, why = N.session_start(path, keep_ns)
    if not ok:
        _say(f"cannot record to {path} ({why}); the program runs unrecorded")
        return False
    _started = True
    # Children join the session through the environment: workers started by fork inherit the
    # joined state anyway; spawned/forkserver workers (and any exec'd child) read STALLSCOPE_SHM
    # when libstallscope.so loads, and STALLSCOPE_LIBRARY tells their _native which file to load.
    # ss_session_start() already set STALLSCOPE_SHM in the C environment; os.environ is a copy
    # taken at start-up, so it is updated too (subprocess with env=None reads os.environ).
    shm = N.session_shm()
    env = {"STALLSCOPE_SHM": shm}
    if N.lib_path and os.path.isabs(N.lib_path):
        env["STALLSCOPE_LIBRARY"] = N.lib_path
    for k, v in env.items():
        if v is None:
            continue
        _env_saved.setdefault(k, os.environ.get(k))
        os.environ[k] = v
    try:
        from . import _lazy, hooks

        hooks.on_session_change()
        _lazy.arm()  # installs now if torch's DataLoader is imported, else when it gets imported
    except Exception as e:
        _say(f"cannot install the DataLoader hooks ({type(e).__name__}: {e}); recording without them")
    return True


def _restore_env(saved: dict) -> None:
    """Puts back the environment variables recorded in `saved` (None: was unset) and empties it."""
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    saved.clear()


def stop() -> bool:
    """Ends the session started by start(): final flush, database closed. Returns True on success."""
    global _started
    if not _started:
        return False
    _started = False
    from . import _native as N

    ok = N.session_stop()
    _restore_env(_env_saved)
    try:
        from . import hooks

        hooks.on_session_change()
    except Exception:
        pass
    if not ok:
        _say("the recording did not close cleanly (see the message above)")
    return ok


class record:
    """Context manager: `with stallscope.record("run.db") as recording:` records the body.

    `recording` is True if the session started. A class rather than a generator-based context
    manager so that no stallscope frame sits between the user's code and an exception it raises.
    """

    def __init__(self, path, keep_detail=None):
        self.path = path
        self.keep_detail = keep_detail
        self.recording = False

    def __enter__(self):
        self.recording = start(self.path, keep_detail=self.keep_detail)
        return self.recording

    def __exit__(self, *exc):
        if self.recording:
            stop()
        return False


def is_recording() -> bool:
    """True while this process records into a session (launcher or record())."""
    if "stallscope._native" not in sys.modules and not os.environ.get("STALLSCOPE_SHM"):
        return False  # nothing could be recording: do not load the library just to ask
    from . import _native as N

    return N.is_recording()
