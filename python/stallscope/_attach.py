"""The Python half of `stallscope attach`, run inside the training process.

`stallscope attach PID` loads libstallscope.so into the running process (ptrace + dlopen), and the
library, once it has joined the session, runs begin() on a thread of its own that holds the GIL.
begin() does what `stallscope run` does at interpreter start-up, late:
  - the environment: processes the program starts from now on (spawned DataLoader workers, any
    exec'd child) load the library and the Python hooks, and join the session;
  - the DataLoader hooks, at once if torch's DataLoader is imported, else when it is;
  - the iterators that already run: followed from their next batch on (hooks.adopt_running()).
end() undoes the environment changes when the command detaches; the hooks stay in place and cost
one check per call while nothing records.

Each reports one line into the status file the command reads: "ok <what was done>" or
"error <why>". Nothing here prints into the program's own output.
"""

from __future__ import annotations

import os
import sys
import time

_saved: dict[str, str | None] = {}


def _set_env(key: str, value: str) -> None:
    _saved.setdefault(key, os.environ.get(key))
    os.environ[key] = value


def _prepend(key: str, value: str, sep: str = ":") -> None:
    old = os.environ.get(key, "")
    parts = [p for p in old.split(sep) if p]
    if value in parts:
        return
    _set_env(key, value + (sep + old if old else ""))


def _report(status_path: str, line: str) -> None:
    try:
        with open(status_path, "w") as f:
            f.write(line)
    except OSError:
        pass


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _outcome(fn, *args) -> str:
    """The status line for fn(*args): "ok <what it returned>" or "error <why it failed>"."""
    try:
        return "ok " + fn(*args)
    except Exception as e:
        return f"error {type(e).__name__}: {e}"


def begin(shm: str, lib: str, python_dir: str, status_path: str) -> None:
    t0 = time.perf_counter()
    line = _outcome(_begin, shm, lib, python_dir)
    if line.startswith("ok "):
        line += f" ({(time.perf_counter() - t0) * 1e3:.0f} ms holding the GIL)"
    _report(status_path, line)


def _begin(shm: str, lib: str, python_dir: str) -> str:
    _set_env("STALLSCOPE_SHM", shm)
    _set_env("STALLSCOPE_LIBRARY", lib)
    _prepend("LD_PRELOAD", lib)
    _prepend("PYTHONPATH", python_dir)
    _prepend("PYTHONPATH", os.path.join(python_dir, "stallscope", "_boot"))

    from . import _native as N

    if not N.available:
        raise RuntimeError(f"the library does not load from Python: {N.load_error}")
    if not N.is_recording():
        raise RuntimeError("the library loaded but is not recording")
    from . import _lazy, hooks

    hooks.on_session_change()
    if "torch.utils.data.dataloader" not in sys.modules:
        _lazy.arm()
        return "torch's DataLoader is not imported yet: the hooks install when it is"
    hooks.install()
    if hooks.problem() is not None:
        return hooks.problem().removeprefix("stallscope: ")
    iterators, workers = hooks.adopt_running()
    if iterators == 0:
        return "DataLoader hooks installed; no DataLoader iterator runs now: recording starts with the next epoch"
    return (f"DataLoader hooks installed; following {_plural(iterators, 'running iterator', 'running iterators')} "
            f"from the next batch, with {_plural(workers, 'worker process', 'worker processes')}")


def begin_worker(shm: str, lib: str, python_dir: str, status_path: str) -> None:
    """In a process the training process started before the attach (a DataLoader worker, most
    likely): instruments torch's worker loop if it runs here, else leaves the session again."""
    _report(status_path, _outcome(_begin_worker, shm, lib, python_dir))


def _begin_worker(shm: str, lib: str, python_dir: str) -> str:
    _set_env("STALLSCOPE_SHM", shm)
    _set_env("STALLSCOPE_LIBRARY", lib)
    from . import _native as N

    if not N.available:
        raise RuntimeError(f"the library does not load from Python: {N.load_error}")
    what = None
    # A spawned worker may still be starting (importing torch, unpickling its Process): wait for it
    # to reach torch's worker loop, as long as it is still in multiprocessing's start-up.
    deadline = time.monotonic() + 30
    while True:
        if "torch.utils.data._utils.worker" in sys.modules:
            from . import hooks

            hooks.on_session_change()
            what = hooks.adopt_worker()
        if what is not None or time.monotonic() > deadline or not _starting_up():
            break
        time.sleep(0.01)
    if what is None:
        _restore_env()
        N.leave_attached()
        from . import hooks

        why = hooks.adopt_worker_why if "stallscope.hooks" in sys.modules else "torch's DataLoader is not loaded"
        return f"not a DataLoader worker ({why})"
    return what


def _starting_up() -> bool:
    """The main thread is in multiprocessing's start-up of a child, not yet in its target."""
    import threading

    f = sys._current_frames().get(threading.main_thread().ident)
    names = set()
    while f is not None:
        names.add(f.f_code.co_name)
        f = f.f_back
    return ("spawn_main" in names or "_bootstrap" in names) and "_worker_loop" not in names and "run" not in names


def _restore_env() -> None:
    from . import _restore_env as restore

    restore(_saved)


def end(status_path: str) -> None:
    _report(status_path, _outcome(_end))


def _end() -> str:
    _restore_env()
    from . import hooks

    hooks.on_session_change()
    return "detached"
