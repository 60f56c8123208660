"""stallscope: see why a PyTorch training job waits for its input pipeline.

Two ways to record a script:

    stallscope run -o run.db -- python train.py        # no change to the script

    import stallscope
    with stallscope.record("run.db"):                  # or stallscope.start(path) / stop()
        train()

Either way the DataLoader hooks (stallscope.hooks) record every torch DataLoader the program
iterates, in the training process and in its worker processes (forked or spawned), into one
SQLite database; see docs/events.md for what is recorded.

The package also ships a prefetching loader with native threads, `stallscope.ReferenceLoader`
(reference_loader.py), for A/B comparisons against torch's DataLoader.

Importing this package is cheap: it loads neither torch nor the native library; those load on
first use (ReferenceLoader, LoaderError and ImageTransform are imported when first named).
"""

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


def start(path) -> bool:
    """Starts recording this process (and the DataLoader workers it starts) into `path`.

    Returns True if recording started. On failure (library missing, path not writable, already
    recording) prints one `stallscope:` line and returns False: the program goes on unrecorded.
    """
    global _started
    from . import _native as N

    path = os.fspath(path)
    if not N.available:
        return False  # _native already said why
    ok, why = N.session_start(path)
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

    def __init__(self, path):
        self.path = path
        self.recording = False

    def __enter__(self):
        self.recording = start(self.path)
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
