"""torch.distributed: which rank this process is, and the collectives it calls (docs/events.md,
"torch.distributed"). Installed at the first DataLoader.__iter__ (_install._deep_install), when
torch.distributed is available:

  dist.rank        once per session, from RANK / WORLD_SIZE (torchrun sets them), or when
                   init_process_group returns
  dist.collective  a span around each collective called synchronously through torch.distributed
  dist.issue/done  an asynchronous one (async_op=True): at the call, and when its future completes
                   (on whichever thread completes it)
  DDP buckets      DistributedDataParallel reduces gradients in C++; at a DDP module's first forward
                   a communication hook is registered that is PyTorch's allreduce_hook (documented
                   to give DDP's results unchanged) timed with dist.issue/dist.done, op
                   "ddp.all_reduce". A hook the user registers (before or after) is timed instead.

seq, the collective's number in this process (0, 1, ...), matches ranks: the k-th collective of
every rank is the same one. A failure of our own code drops the event, never the call.

Exit. A callback on a collective's future runs on the backend's thread (gloo's), and that thread
takes the GIL again to free it, after the future is complete and the training may have moved on.
A thread that asks for the GIL once the interpreter is finalizing is ended by it, and ending a
thread inside a C++ destructor aborts the process ("terminate called without an active
exception", SIGABRT). PyTorch's own works free Python state on that thread too, so a plain job
can abort the same way when it exits the instant its last collective completes; callbacks of
ours would make that more likely. So an exit handler (run before finalization) waits, the GIL
released, until every callback of ours has been freed, then a little longer for the works
(_quiesce; docs/decisions.md, "DDP jobs that exit at once").
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import socket
import time
import weakref

from .. import _native as N
from .. import _vocab as V
from . import _state as S

_OPS = ("all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter",
        "reduce_scatter_tensor", "reduce", "gather", "scatter", "all_to_all", "all_to_all_single", "barrier",
        "all_reduce_coalesced", "all_gather_coalesced")
DDP_OP = "ddp.all_reduce"


def _int_env(name):
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def say_rank(rank=None, world_size=None, backend=None) -> None:
    """dist.rank, once per session: from the arguments (init_process_group), else the environment."""
    if S._dist_rank_gen == S._session_gen or not N.is_recording():
        return
    rank = _int_env("RANK") if rank is None else rank
    world_size = _int_env("WORLD_SIZE") if world_size is None else world_size
    if rank is None or world_size is None:
        return
    S._dist_rank_gen = S._session_gen
    doc = {"rank": rank, "local_rank": _int_env("LOCAL_RANK"), "world_size": world_size,
           "node": socket.gethostname(), "group_rank": _int_env("GROUP_RANK"),
           "job": os.environ.get("STALLSCOPE_JOB") or os.environ.get("TORCHELASTIC_RUN_ID") or None,
           "backend": backend}
    N.instant(N.intern(V.DIST_RANK), rank, N.intern_once(json.dumps(doc)), world_size)


def _nbytes(x) -> int:
    try:
        if isinstance(x, (list, tuple)):
            return sum(_nbytes(t) for t in x)
        return int(x.numel() * x.element_size())
    except Exception:
        return 0


def _done(seq):
    try:
        N.instant(N.intern(V.DIST_DONE), 0, seq, 0)
    except Exception:
        pass


QUIESCE_WAIT_S = 2.0  # at most, for callbacks still to run or to be freed at exit
QUIESCE_GRACE_S = 0.02  # then, for the backend's thread to free its works


def _tracked(cb):
    """cb, tracked until it is freed (in _state._dist_callbacks)."""
    if S._dist_callbacks_pid != os.getpid():
        S._dist_callbacks, S._dist_callbacks_pid = [], os.getpid()
    if len(S._dist_callbacks) >= S._dist_prune_at:
        S._dist_callbacks = [r for r in S._dist_callbacks if r() is not None]
        S._dist_prune_at = max(256, 2 * len(S._dist_callbacks))
    S._dist_callbacks.append(weakref.ref(cb))
    return cb


def _quiesce(wait_s=None, grace_s=None) -> float:
    """At exit, before finalization: wait, the GIL released, until every callback of ours has been
    freed, so has run (at most wait_s), then grace_s more. Returns the seconds waited (0 when no
    callback was ever made)."""
    callbacks = S._dist_callbacks
    if not callbacks or S._dist_callbacks_pid != os.getpid():
        return 0.0
    wait_s = QUIESCE_WAIT_S if wait_s is None else wait_s
    grace_s = QUIESCE_GRACE_S if grace_s is None else grace_s
    t0 = time.monotonic()
    deadline = t0 + wait_s
    try:
        while any(r() is not None for r in callbacks) and time.monotonic() < deadline:
            time.sleep(0.001)
        time.sleep(grace_s)
    except BaseException:  # a Ctrl-C while exiting: the exit goes on as it would have, without a word of ours
        pass
    return time.monotonic() - t0


def _wrap_op(name, orig):
    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        if getattr(S._dist_tls, "inside", False) or not N.is_recording():
            return orig(*args, **kwargs)  # inside our DDP hook, or not recording: as it is
        try:
            seq = next(S._dist_seq)
            size = _nbytes(args[0]) if args else 0
            op = N.intern(name)
            asynchronous = bool(kwargs.get("async_op", False))
        except Exception:
            return orig(*args, **kwargs)
        if asynchronous:
            N.instant(N.intern(V.DIST_ISSUE), size, seq, op)
            work = orig(*args, **kwargs)
            try:
                if work is not None:
                    # add_done_callback, not then: no child future whose Python value the backend's
                    # thread would free later.
                    work.get_future().add_done_callback(_tracked(lambda _fut: _done(seq)))
            except Exception:
                pass
            return work
        N.span_begin_args(N.intern(V.DIST_COLLECTIVE), size, seq, op)
        try:
            return orig(*args, **kwargs)
        finally:
            N.span_end()
    return wrapper


def _timed_hook(hook):
    """`hook` (a DDP communication hook) with dist.issue at its call and dist.done when its future
    completes; the future's value is the hook's."""
    def timed(state, bucket):
        seq = None
        try:
            if N.is_recording():
                seq = next(S._dist_seq)
                N.instant(N.intern(V.DIST_ISSUE), _nbytes(bucket.buffer()), seq, N.intern(DDP_OP))
        except Exception:
            seq = None
        S._dist_tls.inside = True
        try:
            fut = hook(state, bucket)
        finally:
            S._dist_tls.inside = False
        if seq is None:
            return fut

        def finished(f):
            _done(seq)
            return f.value()  # raises as the hook's own future would
        return fut.then(_tracked(finished))
    timed.__qualname__ = getattr(hook, "__qualname__", "hook")
    return timed


def _install_ddp(torch) -> None:
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    orig_forward, orig_register = DDP.forward, DDP.register_comm_hook
    orig_builtin = DDP._register_builtin_comm_hook

    @functools.wraps(orig_register)
    def register_comm_hook(self, state, hook):
        if getattr(self, "_stallscope_hook", None) == "ours":
            # Ours holds DDP's one hook: the user's takes its place, timed, as if it were the first.
            self._check_comm_hook(hook)
            self._stallscope_hook = "user"
            self._stallscope_user = (state, _timed_hook(hook))
            return None
        self._stallscope_hook = "user"
        return orig_register(self, state, _timed_hook(hook))

    python_twin = {"ALLREDUCE": default_hooks.allreduce_hook, "FP16_COMPRESS": default_hooks.fp16_compress_hook}

    @functools.wraps(orig_builtin)
    def register_builtin_comm_hook(self, comm_hook_type):
        twin = python_twin.get(getattr(comm_hook_type, "name", ""))
        if getattr(self, "_stallscope_hook", None) == "ours" and twin is not None:
            # Ours holds DDP's one hook: the built-in's Python twin takes its place, timed.
            self._stallscope_hook = "user"
            self._stallscope_user = (self.process_group, _timed_hook(twin))
            return None
        self._stallscope_hook = "builtin"  # C++ hooks stay untimed
        return orig_builtin(self, comm_hook_type)

    @functools.wraps(orig_forward)
    def forward(self, *args, **kwargs):
        if getattr(self, "_stallscope_hook", None) is None and N.is_recording():
            try:
                self._stallscope_hook = "ours"
                group = self.process_group
                timed_default = _timed_hook(default_hooks.allreduce_hook)
                # The module through a weak reference: the reducer holds this hook, and the
                # module the reducer, so a strong one would keep the module alive for good.
                module = weakref.ref(self)

                def dispatch(state, bucket):
                    user = getattr(module(), "_stallscope_user", None)
                    return user[1](user[0], bucket) if user is not None else timed_default(group, bucket)
                dispatch.__qualname__ = "allreduce_hook"
                orig_register(self, None, dispatch)
            except Exception:
                self._stallscope_hook = "failed"
        return orig_forward(self, *args, **kwargs)

    DDP.forward = forward
    DDP.register_comm_hook = register_comm_hook
    DDP._register_builtin_comm_hook = register_builtin_comm_hook


def install(torch) -> None:
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available() or S._dist_installed:
        return
    S._dist_installed = True
    atexit.register(_quiesce)
    say_rank()
    for name in _OPS:
        orig = getattr(dist, name, None)
        if callable(orig):
            setattr(dist, name, _wrap_op(name, orig))
    orig_init = dist.init_process_group

    @functools.wraps(orig_init)
    def init_process_group(*args, **kwargs):
        out = orig_init(*args, **kwargs)
        try:
            say_rank(dist.get_rank(), dist.get_world_size(), str(dist.get_backend()))
        except Exception:
            pass
        return out
    dist.init_process_group = init_process_group
    if dist.is_initialized():
        try:
            say_rank(dist.get_rank(), dist.get_world_size(), str(dist.get_backend()))
        except Exception:
            pass
    try:
        _install_ddp(torch)
    except Exception:
        pass  # DDP's buckets then go unrecorded; explicit collectives are
