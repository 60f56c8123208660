"""What the hooks share, in one module: every module-level name that is rebound at run time lives
here, and the other modules read and write it as an attribute of this module (`S._I_NEXT`,
`S._wctx = ctx`), never through `from ._state import ...`, which would keep a stale copy.

Here: the event ids of the current session (refresh_ids()), the session generation, loader ids,
the installation flags and the problem message, the `--loader` mode and its settings, torch's
originals of what the hooks replace and the torch classes looked up at installation, a worker
process's context, and the records the wrappers keep on torch's objects (per loader, per
iterator, per fetcher). No other module of the package has a `global` statement.
"""

from __future__ import annotations

import itertools
import os
import threading

from .. import _native as N
from .. import _vocab as V

# The per-batch hooks' C module (_fast.load() sets these once per process): the module, bound, or
# None when the Python hooks run; why it is None; whether load() ran.
_fast_module = None
_fast_why = None
_fast_loaded = False



def _mark_gap_ns() -> int:
    """dl.cpu sampling's gap (hooks/_main.py): STALLSCOPE_CPU_MARK_GAP_US microseconds, 1000 by
    default; 0 marks every next() call."""
    v = os.environ.get("STALLSCOPE_CPU_MARK_GAP_US", "")
    try:
        return max(0, int(v)) * 1000 if v.strip() else 1_000_000
    except ValueError:
        return 1_000_000


MARK_GAP_NS = _mark_gap_ns()

# ---------------------------------------------------------------------------------------------
# Event ids. Interned per session (ids are indices into the session's string table); refreshed by
# refresh_ids() when a session starts or stops in this process. 0 while not recording: the C side
# then drops the events anyway.
_I_CONFIG = _I_EPOCH_BEGIN = _I_EPOCH_END = _I_NEXT = _I_SENT = _I_RECV = 0
_I_WSTART = _I_WSTOP = _I_FETCH = _I_COLLATE = _I_PIN = _I_WREADY = _I_PUT = _I_HOOKS = _I_STEP = _I_CPU = _I_BATCH = 0
_I_PARALLEL = _I_PARALLEL_NEXT = 0


def refresh_ids() -> None:
    global _I_CONFIG, _I_EPOCH_BEGIN, _I_EPOCH_END, _I_NEXT, _I_SENT, _I_RECV
    global _I_WSTART, _I_WSTOP, _I_FETCH, _I_COLLATE, _I_PIN, _I_WREADY, _I_PUT, _I_HOOKS, _I_STEP, _I_CPU, _I_BATCH
    global _I_PARALLEL, _I_PARALLEL_NEXT
    i = N.intern
    _I_CONFIG, _I_EPOCH_BEGIN, _I_EPOCH_END = i(V.DL_CONFIG), i(V.DL_EPOCH_BEGIN), i(V.DL_EPOCH_END)
    _I_NEXT, _I_SENT, _I_RECV = i(V.DL_NEXT), i(V.DL_SENT), i(V.DL_RECV)
    _I_WSTART, _I_WSTOP = i(V.DL_WORKER_START), i(V.DL_WORKER_STOP)
    _I_FETCH, _I_COLLATE, _I_PIN = i(V.DL_FETCH), i(V.DL_COLLATE), i(V.DL_PIN)
    _I_WREADY, _I_PUT, _I_HOOKS = i(V.DL_WORKER_READY), i(V.DL_PUT), i(V.STALLSCOPE_HOOKS)
    _I_STEP, _I_CPU, _I_BATCH, _I_PARALLEL = i(V.DL_STEP), i(V.DL_CPU), i(V.DL_BATCH), i(V.DL_PARALLEL)
    _I_PARALLEL_NEXT = i(V.DL_PARALLEL_NEXT)
    if _fast_module is not None:  # the C hooks read their own copy
        _fast_module.set_ids(_I_NEXT, _I_FETCH, _I_COLLATE, _I_CPU, _I_EPOCH_END, _I_SENT, _I_RECV, _I_PARALLEL,
                              _I_PARALLEL_NEXT)


# ---------------------------------------------------------------------------------------------
# Session and installation

_lock = threading.RLock()
_shallow_done = False
_deep_done = False
# _install's two later steps, set when it is imported (the package imports it first): _main and
# _worker run them from their wrappers without importing _install, which imports them.
_deep_install = None  # at the first DataLoader use of the training process
_install_worker_side = None  # at a worker process's start
_problem: str | None = None  # the warning printed when some part could not be instrumented
_tls = threading.local()  # .pending: (_LoaderInfo, E) while DataLoader.__iter__ runs
# Loader ids go on across exec(): a program that execs itself keeps its pid, and the new image's
# loaders must not take the old image's ids (its dl.next spans would join the old loader's).
# take_loader_id() keeps STALLSCOPE_NEXT_LOADER current as it hands out ids; exec carries it over.
ENV_NEXT_LOADER = "STALLSCOPE_NEXT_LOADER"


def _first_loader_id() -> int:
    try:
        return max(0, int(os.environ.get(ENV_NEXT_LOADER, "0")))
    except ValueError:
        return 0


_next_loader_id = _first_loader_id()


def take_loader_id() -> int:
    """The next loader id (call with _lock held)."""
    global _next_loader_id
    L = _next_loader_id
    _next_loader_id += 1
    try:
        os.environ[ENV_NEXT_LOADER] = str(_next_loader_id)
    except Exception:
        pass
    return L


_session_gen = 0  # bumped by on_session_change()
_profiler_warned = False  # the torch.profiler warning was printed
_last_it = None  # the _ItState of the iterator that handed the latest batch (read by dl.step)
_step_hook = None  # the handle of the optimizer step hook (training process only)
adopt_worker_why = ""  # why adopt_worker() returned None (public: hooks.adopt_worker_why)

# torch.distributed (hooks/_dist.py).
_dist_installed = False
_dist_rank_gen = -1  # the session whose database has this process's dist.rank
_dist_seq = itertools.count()  # the next collective's number in this process
_dist_tls = threading.local()  # .inside: in a DDP hook of ours (its all_reduce is not recorded again)
# Weak references to our callbacks on collectives' futures, read by _dist._quiesce at exit: those of
# the process _dist_callbacks_pid only (a forked child inherits the list, not the threads that would
# free what it names); pruned of the freed ones when it reaches _dist_prune_at.
_dist_callbacks: list = []
_dist_callbacks_pid = 0
_dist_prune_at = 256

# `stallscope run --loader` (hooks/_swap.py), read once by install(): None for torch (the script's
# DataLoader untouched: _main then takes exactly the path it takes without --loader), else "tuned"
# or "reference", with the launcher's tuned settings (STALLSCOPE_LOADER_TUNED, a dict).
_swap_mode = None
_tuned = None
_dl_signature = None  # inspect.Signature of torch's DataLoader.__init__, for rebinding its arguments
_DL = None  # torch's DataLoader class
_swap_said: set = set()  # the one-line notes already printed
_threads_set = False  # `--loader-args torch_threads=N` applied (_swap._set_torch_threads)

# Originals (None until patched).
_orig_dl_init = _orig_dl_iter = _orig_dl_len = _orig_next = _orig_create_fetcher = None
_orig_reset = _orig_try_put_index = _orig_get_data = _orig_shutdown = None
_orig_worker_loop = None
_orig_pin_loop = None
_orig_excwrap_init = None
_wl_signature = None
_excwrap_ok = False  # ExceptionWrapper can be patched in workers (needed before wrapping fetch there)

# torch objects looked up at deep install.
_M = None  # _MultiProcessingDataLoaderIter
_S = None  # _SingleProcessDataLoaderIter
_StopMarker = None  # _utils.worker._IterableDatasetStopIteration
_ResumeMarker = None  # _utils.worker._ResumeIteration

# In a worker process: that worker's context (W, current B, G), a _FetchCtx; None in the training
# process.
_wctx = None


# ---------------------------------------------------------------------------------------------
# Records kept on torch's objects


class _LoaderInfo:
    """Per DataLoader, stored on the loader as `_stallscope_loader` (owner guards against copies)."""

    __slots__ = ("owner", "L", "epochs", "created_at", "gen", "swap", "role", "made_by")

    def __init__(self, owner, created_at, swap=None):
        self.owner = id(owner)
        self.L = None  # assigned at the first __iter__
        self.epochs = 0
        self.created_at = created_at
        self.gen = -1  # the session whose database has this loader's dl.config
        self.swap = swap  # _swap.Swap under --loader tuned/reference; None otherwise
        self.role = None  # "train"/"eval" from the framework function that made it (_main._caller_site)
        self.made_by = None  # that function's name


# An iterator's own attributes, read and written as object.__getattribute__/__setattr__ do: never
# through its __dict__, whose first use makes CPython (3.11+) move the instance's inline attribute
# values into a real dict for good, and torch's own attribute reads on that iterator slower for the
# rest of its life (about 0.27 us per batch of the tiny-batch loop: docs/decisions.md), nor through
# a subclass's __getattr__.
_object_get = object.__getattribute__
_object_set = object.__setattr__


def it_attr(it, name):
    """Attribute `name` of iterator `it`, or None."""
    try:
        return _object_get(it, name)
    except AttributeError:
        return None


def it_state(it):
    """The iterator's _ItState (`_stallscope_it`), or None."""
    try:
        return _object_get(it, "_stallscope_it")
    except AttributeError:
        return None


def set_it_state(it, s) -> None:
    _object_set(it, "_stallscope_it", s)


class _ItState:
    """Per iterator, stored on torch's iterator as `_stallscope_it` (read on every next())."""

    __slots__ = ("L", "E", "mp", "ctx", "recv", "ended", "in_reset")

    def __init__(self, L, E, mp):
        self.L = L
        self.E = E
        self.mp = mp  # multi-process iterator with the mp part installed
        self.ctx = None  # _FetchCtx of the single-process fetcher
        self.recv = set()  # batch indices taken off the result queue, not yet handed
        self.ended = False  # epoch_end emitted
        self.in_reset = False  # _reset is draining stale results of the previous epoch


class _FetchCtx:
    """What the fetch/collate wrappers of one fetcher need to label their spans."""

    __slots__ = ("L", "B", "W", "G", "N", "spans", "toggle")

    def __init__(self, L=-1, B=-1, W=-1, G=0):
        self.L, self.B, self.W, self.G = L, B, W, G
        # In the training process (num_workers=0): the batches of the epoch where every batch but
        # the last holds batch_size samples (_main._sized_epoch), else -1; whether the fetcher's
        # fetch and collate are wrapped (their spans recorded); and the callable that takes the
        # wrappers out or puts them back (_main._span_toggle), which next() calls when the batch's
        # choice (_main._spans_wanted) differs from the wrappers' state.
        self.N = -1
        self.spans = True
        self.toggle = None
