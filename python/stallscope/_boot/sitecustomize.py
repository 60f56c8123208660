"""stallscope start-up hook for Python programs run under `stallscope run`.

The launcher puts this directory first on PYTHONPATH, so the interpreter's `site` module imports
this file as `sitecustomize`. It does two things:
  1. when a recording session is active ($STALLSCOPE_SHM), arms a cheap import watcher that
     installs the DataLoader hooks right after `torch.utils.data.dataloader` is imported (no torch,
     ctypes or hooks import here: a program that never uses torch pays ~nothing);
  2. runs the `sitecustomize` that the program would have run without stallscope (the next one on
     sys.path: a venv's, a distribution's, the user's), as the `sitecustomize` module.
Our own failures print one `stallscope:` line and never stop the program. An error raised by the
chained sitecustomize propagates unchanged, so `site` reports it exactly as it would without us.
"""


def _stallscope_arm():
    import os
    import sys

    try:
        if not os.environ.get("STALLSCOPE_SHM"):
            return  # not recording (PYTHONPATH inherited outside a session): stay out of the way
        from stallscope import _lazy

        _lazy.arm()
    except Exception as e:
        try:
            sys.stderr.write(f"stallscope: cannot set up the Python hooks ({type(e).__name__}: {e}); "
                             "training goes on unrecorded\n")
        except Exception:
            pass


def _stallscope_next_sitecustomize():
    """The spec of the sitecustomize that follows this one on sys.path, or None."""
    import importlib.machinery
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    after = None
    entries = []
    for i, p in enumerate(sys.path):
        try:
            same = os.path.abspath(p or os.getcwd()) == here
        except Exception:
            same = False
        if same:
            after = i
        entries.append((same, p))
    # Search only behind our directory, as the import system would have; if our directory is not
    # on sys.path (unusual), search everything but it.
    rest = [p for i, (same, p) in enumerate(entries) if not same and (after is None or i > after)]
    return importlib.machinery.PathFinder.find_spec("sitecustomize", rest)


def _stallscope_chain():
    import sys

    try:
        spec = _stallscope_next_sitecustomize()
    except Exception as e:
        sys.stderr.write(f"stallscope: cannot look for another sitecustomize ({type(e).__name__}: {e})\n")
        return
    if spec is None or spec.loader is None:
        return
    import importlib.util

    module = importlib.util.module_from_spec(spec)
    ours = sys.modules.get("sitecustomize")
    sys.modules["sitecustomize"] = module  # code that imports sitecustomize sees the program's own
    try:
        spec.loader.exec_module(module)
    except BaseException:
        # As a failed import would: the module is not left in sys.modules. `site` prints the error.
        if sys.modules.get("sitecustomize") is module:
            if ours is not None:
                sys.modules["sitecustomize"] = ours
            else:
                del sys.modules["sitecustomize"]
        raise


_stallscope_arm()
_stallscope_chain()
