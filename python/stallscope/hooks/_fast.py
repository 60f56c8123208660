"""The per-batch hooks of the training process's main thread in C: the extension module
_stallscope_hooks (pyhooks/fast_hooks.cc) wraps _BaseDataLoaderIter.__next__, a fetcher's fetch
and collate_fn, and the multi-process iterator's _try_put_index and _get_data, with the same
events and arguments as _main's Python wrappers (_it_next, _instrument_fetcher, _mp_try_put_index,
_mp_get_data), calling libstallscope's functions directly instead of through ctypes
(docs/decisions.md, "The per-batch DataLoader hooks in C").

load() runs once, at the first DataLoader use of the training process (_install._deep_install).
Where the module cannot load, or cannot find the collector's functions, _state._fast_module stays
None, _main's Python hooks run, and one `stallscope:` line says why. STALLSCOPE_PY_HOOKS=1 chooses the Python
hooks without a word (tests record the same loop both ways and compare).
"""

from __future__ import annotations

import os
import sys

from .. import _ext
from .. import _native as N
from . import _state as S

NAME = "_stallscope_hooks"
ENV_PY = "STALLSCOPE_PY_HOOKS"

# The module once loaded and bound (None: the Python hooks run), why not, and whether load() ran,
# are kept in _state (S._fast_module, S._fast_why, S._fast_loaded): the hooks rebind state there only.


def load():
    """Loads and binds the module once per process; returns it, or None (and says why once)."""
    if S._fast_loaded:
        return S._fast_module
    S._fast_loaded = True
    if os.environ.get(ENV_PY, "") not in ("", "0"):
        S._fast_why = f"{ENV_PY} is set"
        return None
    try:
        mod = _ext.load(NAME, _ext.module_dirs())
        mod.bind(N.lib_path if N.lib_path and N.lib_path.startswith("/") else None)
        mod.set_mark_gap(S.MARK_GAP_NS)
    except Exception as e:
        S._fast_why = str(e) or type(e).__name__
        try:
            sys.stderr.write(f"stallscope: the DataLoader hooks run in Python, about 10 us more per batch "
                             f"(C module {NAME} not loaded: {S._fast_why})\n")
        except Exception:
            pass
        return None
    S._fast_module = mod
    return mod
