"""The training process's main thread: DataLoader.__init__ and __iter__ (dl.config,
dl.epoch_begin; under `stallscope run --loader tuned|reference` they hand over to _swap.py), the
iterator's next() (dl.next, dl.epoch_end), the multi-process iterator's reset, send, receive and
shutdown (dl.worker_start, dl.sent, dl.recv, dl.worker_stop), and the fetcher of a loader without
workers (dl.fetch, dl.collate).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping

from .. import _native as N
from .. import _tb
from .. import _vocab as V
from . import _state as S
from . import _swap
from ._state import _FetchCtx, _ItState, _LoaderInfo

# Hot-path C functions bound once (module globals are cheaper to reach than attributes). Never
# rebound: _native binds them at its import.
_span_begin = N.span_begin_args
_span_end = N.span_end
_span_end_args = N.span_end_args
_instant = N.instant
_gpu_mark = N.gpu_mark  # light GPU mode only, else None (collector/gpu_light.h)
_cpu_ns = time.process_time_ns
_thread_ns = time.thread_time_ns
_mono_ns = time.monotonic_ns
# dl.cpu sampling (the C hooks' twin, pyhooks/fast_hooks.cc): a next() call is marked when the
# process's CPU time was read at the end of the call before it (armed): dl.cpu's arg2 is the CPU
# the process used between the two calls, i.e. while the loop computed. The hooks arm at the end of
# a call when S.MARK_GAP_NS have passed since they last armed: every call on loops slower than the
# gap, about one per gap on faster ones (the clock reads cost about 1 us each in a busy loop).
# _cpu_last: that CPU time (-1: none yet); _marks: [armed, armed at (monotonic ns)].
_cpu_last = [-1]
_marks = [True, 0]
# dl.parallel: the OpenMP parallel-region totals (N.parallel_totals) read where the hooks last
# armed, beside _cpu_last (None: none yet, or no library to read them from).
_par = N.parallel_totals
_par_last = [None]


# ---------------------------------------------------------------------------------------------
# Small helpers


def _torch_dirs():
    import torch  # imported already: the hooks install when torch's DataLoader module loads

    f = getattr(torch, "__file__", None)
    if not f:
        return ()
    d = os.path.dirname(f)
    return tuple({os.path.abspath(d) + os.sep, os.path.realpath(d) + os.sep})


# The functions of the frameworks that make a loader for one role: Lightning's hooks (written in
# the user's LightningModule or DataModule) and HF Trainer's getters. The nearest one on the stack
# of a DataLoader(...) call names the loader's role.
_ROLE_OF_FUNCTION = {
    "train_dataloader": "train", "get_train_dataloader": "train",
    "val_dataloader": "eval", "test_dataloader": "eval", "predict_dataloader": "eval",
    "get_eval_dataloader": "eval", "get_test_dataloader": "eval",
}
_LIBRARY_DIRS = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)


def _site_path(fn: str) -> str:
    """A source file as the report names it: relative to the working directory when inside it."""
    try:
        cwd = os.getcwd()
        full = os.path.abspath(fn)
        if full.startswith(cwd + os.sep):
            return os.path.relpath(full, cwd)
        return full
    except Exception:
        return fn


def _caller_site(loader):
    """Where the user's code made the loader: ("path:line", role hint, framework function).
    The site is the first frame that is not torch's, not ours, not an installed package's
    (site-packages/dist-packages: Lightning, accelerate, transformers and the like), not the
    interpreter's own (<frozen ...>), and not the __init__ of a DataLoader subclass running for this
    very loader; path relative to the working directory. The role hint comes from the nearest
    framework function on the whole stack that makes loaders for one role (_ROLE_OF_FUNCTION)."""
    torch_dirs = _torch_dirs()
    f = sys._getframe(2)
    site = role = made_by = fallback = None
    while f is not None and (site is None or role is None):
        code = f.f_code
        fn = code.co_filename
        if fallback is None and not (_tb.is_ours(fn) or (torch_dirs and fn.startswith(torch_dirs))):
            fallback = f"{_site_path(fn)}:{f.f_lineno}"  # no user frame at all: the library's call
        if role is None:
            role = _ROLE_OF_FUNCTION.get(code.co_name)
            if role is not None:
                made_by = code.co_name
        if site is None and not (
                _tb.is_ours(fn) or (torch_dirs and fn.startswith(torch_dirs)) or fn.startswith("<")
                or any(d in fn for d in _LIBRARY_DIRS)
                or (code.co_name == "__init__" and f.f_locals.get("self") is loader)):
            site = f"{_site_path(fn)}:{f.f_lineno}"
        f = f.f_back
    return site or fallback, role, made_by


def _loader_info(loader):
    info = loader.__dict__.get("_stallscope_loader")
    if info is None or info.owner != id(loader):  # never seen, or a copy of another loader
        info = _LoaderInfo(loader, None)
        object.__setattr__(loader, "_stallscope_loader", info)
    return info


def _pin_effective(loader) -> bool:
    """What torch will do with pin_memory (mirrors _BaseDataLoaderIter.__init__ of torch 2.x)."""
    if not loader.pin_memory:
        return False
    import torch

    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "is_available"):
        if not acc.is_available():
            return False
        cur = acc.current_accelerator() if hasattr(acc, "current_accelerator") else None
        return not (cur is not None and getattr(cur, "type", None) == "mps")
    return bool(torch.cuda.is_available())


def _batch_size(loader):
    """The loader's batch_size, else its batch sampler's (accelerate and samplers of that kind pass
    a batch_sampler, which leaves DataLoader.batch_size None): (size, where it was read)."""
    if loader.batch_size is not None:
        return loader.batch_size, "loader"
    bs = getattr(loader.batch_sampler, "batch_size", None) if loader.batch_sampler is not None else None
    if isinstance(bs, int) and not isinstance(bs, bool) and bs > 0:
        return bs, "batch_sampler"
    return None, None


def _config(loader, L, info, swap=None) -> str:
    import torch
    import torch.multiprocessing as tmp
    from torch.utils.data.dataloader import _DatasetKind

    nw = loader.num_workers
    # How workers start (or would, for a loader without them: the what-if model prices starting
    # them by it).
    try:
        ctx = loader.multiprocessing_context
        if ctx is not None:
            worker_start_method = ctx.get_start_method()
        else:
            # allow_none: asking without it would fix the default context as a side effect.
            worker_start_method = tmp.get_start_method(allow_none=True) or tmp.get_all_start_methods()[0]
    except Exception:  # a loader subclass's own multiprocessing_context: not worth failing the document
        worker_start_method = None
    start_method = worker_start_method if nw > 0 else None
    iterable = loader._dataset_kind == _DatasetKind.Iterable
    ds = loader.dataset
    dataset_len = None
    if not iterable or hasattr(type(ds), "__len__"):
        try:
            dataset_len = len(ds)
        except Exception:
            dataset_len = None
    batches = None
    if not iterable:  # len(loader) of an IterableDataset loader has side effects: not asked
        try:
            batches = len(loader._index_sampler)
        except Exception:
            batches = None
    batch_size, batch_size_from = _batch_size(loader)
    doc = {
        "loader": L,
        "batch_size": batch_size,
        "batch_size_from": batch_size_from,
        "num_workers": nw,
        "pin_memory": bool(loader.pin_memory),
        "pin_memory_effective": _pin_effective(loader),
        "persistent_workers": bool(loader.persistent_workers),
        "prefetch_factor": loader.prefetch_factor if nw > 0 else None,
        "start_method": start_method,
        "worker_start_method": worker_start_method,
        "dataset_type": "iterable" if iterable else "map",
        "dataset_class": type(ds).__qualname__,
        "dataset_len": dataset_len,
        "batches_per_epoch": batches,
        "in_order": bool(getattr(loader, "in_order", True)),
        "drop_last": bool(loader.drop_last),
        "created_at": info.created_at,
        "made_by": info.made_by,
        "role_hint": info.role,
        "torch_version": str(torch.__version__),
        "torch_threads": _torch_threads(torch),
        "kind": swap.kind if swap is not None else V.LOADER_TORCH,
        "replaced": swap.replaced_doc() if swap is not None else None,
    }
    return json.dumps(doc, separators=(",", ":"))


def _torch_threads(torch):
    try:
        return int(torch.get_num_threads())
    except Exception:
        return None


def _begin_epoch(loader):
    """Loader id on first use (+ dl.config), next epoch number, dl.epoch_begin. Returns (info, E)."""
    info = _loader_info(loader)
    with S._lock:
        if info.L is None:
            info.L = S.take_loader_id()
        first = info.gen != S._session_gen
        info.gen = S._session_gen
        E = info.epochs
        info.epochs += 1
    if first:
        try:
            _instant(S._I_CONFIG, info.L, N.intern_once(_config(loader, info.L, info, info.swap)), 0)
        except Exception:
            pass
    _instant(S._I_EPOCH_BEGIN, info.L, E, loader.num_workers)
    return info, E


# ---------------------------------------------------------------------------------------------
# DataLoader entry points (installed at import of torch.utils.data.dataloader)


def _dl_init(self, *args, **kwargs):
    try:
        # Also here, not only at the first __iter__: a DataLoader subclass may override __iter__
        # without calling DataLoader.__iter__, and its iterators still go through next().
        if not S._deep_done:
            S._deep_install()
        where, role, made_by = _caller_site(self)
    except Exception:
        where = role = made_by = None
    if S._swap_mode is None:
        S._orig_dl_init(self, *args, **kwargs)
        swap = None
    else:  # `stallscope run --loader tuned|reference`: _swap runs torch's __init__
        swap = _swap.init(self, where, args, kwargs)
    try:
        info = _LoaderInfo(self, where, swap)
        info.role, info.made_by = role, made_by
        object.__setattr__(self, "_stallscope_loader", info)
    except Exception:
        pass


def _dl_iter(self):
    swap = None
    if S._swap_mode is not None:  # `stallscope run --loader tuned|reference`
        swap = _swap.of(self)
        if swap is not None:
            if swap.kind == V.LOADER_REFERENCE:
                it = _swap.reference_iter(self, swap)  # records its own events
                if it is not None:
                    return it
            elif swap.kind == V.LOADER_TUNED:
                _swap.before_iter(self, swap)
    pending = None
    prev = None
    try:
        if not S._deep_done:
            S._deep_install()
        pending = _begin_epoch(self)
        prev = getattr(S._tls, "pending", None)
        S._tls.pending = pending
    except Exception:
        pending = None
    if pending is None:
        it = S._orig_dl_iter(self)
        return it if swap is None or swap.kind != V.LOADER_TUNED else _swap.after_iter(self, swap, it)
    try:
        it = S._orig_dl_iter(self)
    finally:
        S._tls.pending = prev
    try:
        _attach_iterator(it, pending[0], pending[1])
    except Exception:
        pass
    return it if swap is None or swap.kind != V.LOADER_TUNED else _swap.after_iter(self, swap, it)


def _attach_iterator(it, info, E):
    s = S.it_state(it)
    if s is not None and s.L == info.L and s.E == E:
        return  # the multi-process _reset wrapper already set it up for this epoch
    mp = S._M is not None and isinstance(it, S._M)
    if s is None or s.L != info.L:
        s = _ItState(info.L, E, mp=mp and S._orig_reset is not None)
        _bind_fetcher_ctx(it, s, info.L)
        S.set_it_state(it, s)
    else:  # persistent iterator whose _reset we do not see (mp part not installed)
        s.E = E
        s.ended = False
        s.recv.clear()


def _bind_fetcher_ctx(it, s, L):
    """Points a single-process iterator's instrumented fetcher at loader L for this epoch: the
    loader's id and the epoch's batch count (_sized_epoch) on its context, and the context on the
    iterator's state `s`. Nothing where the fetcher is not instrumented."""
    fetcher = S.it_attr(it, "_dataset_fetcher")
    ctx = getattr(fetcher, "_stallscope_ctx", None) if fetcher is not None else None
    if ctx is not None:
        ctx.L = L
        ctx.N = _sized_epoch(it)
        s.ctx = ctx


def _sized_epoch(it):
    """The batches of this epoch of a single-process iterator when all but the last hold
    batch_size samples: a map-style dataset batched by torch's own BatchSampler, whose length is
    known. Else -1 (an iterable dataset, a batch sampler of the user's, no automatic batching):
    the size of every batch is then only known from its collate."""
    try:
        from torch.utils.data import BatchSampler
        from torch.utils.data.dataloader import _DatasetKind

        if not S.it_attr(it, "_auto_collation") or S.it_attr(it, "_dataset_kind") != _DatasetKind.Map:
            return -1
        bs = S.it_attr(it, "_index_sampler")
        if type(bs) is not BatchSampler or type(bs.batch_size) is not int or bs.batch_size <= 0:
            return -1
        n = len(bs)
        return n if type(n) is int and n > 0 else -1
    except Exception:
        return -1


def _spans_wanted(marked, B, N):
    """Whether the fetch and collate of batch B are recorded (docs/decisions.md, "Fetch and
    collate spans of fast in-process loops are sampled"): on the calls dl.cpu marks (every call of
    a loop slower than the mark gap), on the first and last batch of an epoch (a short last batch
    gets its size), and on every call where the batches' sizes are not all known (N < 0)."""
    return marked or N < 0 or B == 0 or B >= N - 1


# ---------------------------------------------------------------------------------------------
# Iterator: next()


def _it_next(self):
    s = S.it_state(self)
    if s is None:  # an iterator we do not follow
        return S._orig_next(self)
    try:  # our bookkeeping only: on failure, run next() unrecorded (never twice)
        L = s.L
        E = s.E
        B = self._num_yielded
        ctx = s.ctx
        if ctx is not None:
            ctx.B = B
            want = _spans_wanted(_marks[0], B, ctx.N)
            if want != ctx.spans and ctx.toggle is not None:
                try:
                    ctx.toggle(want)
                except Exception:
                    pass
        _span_begin(S._I_NEXT, L, B, E)
        if _gpu_mark is not None:
            _gpu_mark(1)
        if _marks[0]:  # the clocks are read inside the span (_cpu_end)
            c0 = _cpu_ns()
            t0 = _thread_ns()
            p0 = _par() if _par is not None else None
        else:
            c0 = t0 = -1
            p0 = None
    except Exception:
        return S._orig_next(self)
    try:
        data = S._orig_next(self)
    except StopIteration:
        try:
            if _gpu_mark is not None:
                _gpu_mark(2)
            end = _cpu_end(c0)
            _span_end_args(L, -1, E)
            _cpu_mark(c0, t0, p0, end)
            if not s.ended:
                s.ended = True
                _instant(S._I_EPOCH_END, L, E, self._num_yielded)
        except Exception:
            pass
        raise
    except BaseException:
        _marks[0] = False  # no mark, and the next call's arg2 would span this one
        try:
            if _gpu_mark is not None:
                _gpu_mark(2)
            if s.mp:
                _handed(self, s, -1)  # forget the batch that raised (the loop may go on)
            _span_end_args(L, -1, E)
        except Exception:
            pass
        raise
    try:
        if _gpu_mark is not None:
            _gpu_mark(2)
        end = _cpu_end(c0)
        if s.mp:
            _span_end_args(L, _handed(self, s, B), E)
        else:
            _span_end()  # the batch handed is the one begun with: keep the begin's arguments
        S._last_it = s
        _cpu_mark(c0, t0, p0, end)
    except Exception:
        _marks[0] = False
    return data


def _cpu_end(c0):
    """The clocks a dl.next span's end needs, read before the span ends: (this thread's CPU time,
    the process's, now, whether to arm the next call). A CPU-clock read is a system call, and at
    its return the scheduler may hand the core to another thread whose turn has come (more
    runnable threads than cores); inside the span that wait counts where the script's own clock
    around next() puts it, not in the step after it (docs/decisions.md)."""
    now = _mono_ns()
    gap = S.MARK_GAP_NS
    due = gap <= 0 or now - _marks[1] >= gap
    t1 = _thread_ns() if c0 >= 0 else -1
    if c0 >= 0 or due:
        return t1, _cpu_ns(), now, due, _par() if _par is not None else None
    return t1, -1, now, due, None


def _cpu_mark(c0, t0, p0, end):
    """dl.cpu right after a dl.next span, in microseconds: the CPU time of the process's other
    threads inside that next() call (torch's intra-op threads spinning after the step, a
    pin-memory thread: CPU taken from the workers), this thread's CPU time inside it (the fetch
    without workers, receiving the batch with them), and the process's CPU time (all its threads:
    the step) since the previous next() ended; what the what-if model splits into CPU and waiting
    (docs/events.md). Written only for a marked call (c0 >= 0), from the clocks _cpu_end read, and
    after it dl.parallel when OpenMP regions ran over the same span (p0: their totals at the call's
    start) and dl.parallel_next when they ran inside the call (the fetch without workers); then
    arms for the next call when due."""
    t1, c1, now, due, par = end
    if c0 >= 0:
        last = _cpu_last[0]
        mine = (t1 - t0) // 1000
        _instant(S._I_CPU, max(0, (c1 - c0) // 1000 - mine), mine, (c0 - last) // 1000 if last >= 0 else -1)
        pl = _par_last[0]
        if last >= 0 and p0 is not None and pl is not None and p0[0] > pl[0]:
            _instant(S._I_PARALLEL, max(0, p0[2] - pl[2]) // 1000, max(0, p0[1] - pl[1]) // 1000, p0[0] - pl[0])
        if p0 is not None and par is not None and par[0] > p0[0]:
            _instant(S._I_PARALLEL_NEXT, max(0, par[2] - p0[2]) // 1000, max(0, par[1] - p0[1]) // 1000, par[0] - p0[0])
    _marks[0] = due
    if due:
        _cpu_last[0] = c1
        _par_last[0] = par
        _marks[1] = now


def _on_optimizer_step(optimizer, args, kwargs):
    """torch's global optimizer step post-hook: dl.step names the loader whose batch was handed
    last, the batch this step trained on (docs/events.md)."""
    try:
        s = S._last_it
        if s is not None:
            _instant(S._I_STEP, s.L, s.E, 0)
        else:
            _instant(S._I_STEP, -1, -1, 0)
    except Exception:
        pass


def install_step_hook(torch) -> None:
    """Registers _on_optimizer_step with torch.optim (once per process; training process only)."""
    if S._step_hook is not None or S._wctx is not None:
        return
    import importlib

    # The submodule by name: torch.optim deletes its `optimizer` attribute.
    reg = getattr(importlib.import_module("torch.optim.optimizer"), "register_optimizer_step_post_hook", None)
    if reg is not None:
        S._step_hook = reg(_on_optimizer_step)


def _handed(it, s, default):
    """The batch just handed by a multi-process iterator: the one received but no longer in
    _task_info (torch pops it right before _process_data). Works for in_order=False too."""
    recv = s.recv
    if recv:
        ti = it._task_info
        for i in recv:
            if i not in ti:
                recv.discard(i)
                return i
    return default


# ---------------------------------------------------------------------------------------------
# Fetcher without workers: dl.fetch / dl.collate


def _instrument_fetcher(fetcher):
    """Wraps the fetch and collate of a fetcher in the training process (num_workers=0). next()
    sets the batch index, and takes the wrappers out for the batches whose spans are not recorded
    (ctx.toggle, _spans_wanted); an iterator that no DataLoader.__iter__ of ours attached keeps
    ctx.L = -1: no spans then."""
    orig_fetch = fetcher.fetch
    orig_collate = fetcher.collate_fn
    auto = bool(getattr(fetcher, "auto_collation", True))
    ctx = _FetchCtx()
    ctx.toggle = _span_toggle(fetcher, ctx, orig_fetch, orig_collate)
    fast = S._fast_module
    if fast is not None:  # the same spans from C (_fast.py)
        fetcher.collate_fn = _layout_once(fetcher, ctx, fast.span_call(orig_collate, ctx, 1 if auto else 2))
        fetcher.fetch = fast.span_call(orig_fetch, ctx, 0)
        fetcher._stallscope_ctx = ctx
        return

    # Each wrapper begins its span in a try (a failure there must neither stop the user's call nor
    # close someone else's span), runs torch's function untouched, and ends the span it began.
    def fetch(possibly_batched_index):
        begun = False
        try:
            if ctx.L >= 0:
                _span_begin(S._I_FETCH, ctx.L, ctx.B, -1)
                begun = True
        except Exception:
            pass
        try:
            return orig_fetch(possibly_batched_index)
        finally:
            if begun:
                _span_end()

    def collate_fn(data):
        begun = False
        try:
            if ctx.L >= 0:
                _span_begin(S._I_COLLATE, ctx.L, ctx.B, len(data) if auto else 1)
                begun = True
        except Exception:
            pass
        try:
            return orig_collate(data)
        finally:
            if begun:
                _span_end()

    fetcher.collate_fn = _layout_once(fetcher, ctx, collate_fn)  # instance attributes: torch's fetch()
    fetcher.fetch = fetch  # reads self.collate_fn
    fetcher._stallscope_ctx = ctx


def _span_toggle(fetcher, ctx, orig_fetch, orig_collate):
    """ctx.toggle(on), which next() calls where this batch's choice (_spans_wanted) differs from
    the last one's, about twice a millisecond on a fast loop: off puts torch's fetch and collate
    back in the fetcher, so that a batch whose spans are not recorded calls them as torch does,
    with no wrapper in between (a C callable between two Python functions costs the interpreter a
    re-entry each); on puts back the wrappers that were there (held while off: ctx.spans is
    False exactly when `held` holds them, kept apart for the C hooks to read as a slot)."""
    held = []

    def toggle(on):
        if on == ctx.spans:
            return
        if on:
            fetcher.fetch, fetcher.collate_fn = held.pop()
        else:
            held.append((fetcher.fetch, fetcher.collate_fn))
            fetcher.fetch, fetcher.collate_fn = orig_fetch, orig_collate
        ctx.spans = on

    return toggle


# Loaders whose dl.batch was written (once per loader), and the most objects of a batch walked to
# count its tensors.
_layout_written = set()
_LAYOUT_MAX_ITEMS = 10_000


def _layout_once(fetcher, ctx, collate):
    """`collate` with dl.batch after its first batch of a loader not yet described: the wrapper
    puts `collate` back in its place at its first return, so later batches pay nothing."""

    def collate_first(data):
        out = collate(data)
        try:
            fetcher.collate_fn = collate
            L = ctx.L
            if L >= 0 and L not in _layout_written:
                _layout_written.add(L)
                tensors, nbytes = _batch_layout(out)
                _instant(S._I_BATCH, L, tensors, nbytes)
        except Exception:
            pass
        return out

    return collate_first


def _batch_layout(batch):
    """(tensors, bytes) of a collated batch: its torch tensors nested in tuples, lists and dicts
    (their subclasses too: namedtuples, OrderedDict, BatchEncoding), and their bytes plus those of
    numpy arrays (which a worker pickles whole into its result pipe). What a worker would pay to
    hand the batch over, and the training thread to receive it, follows these (docs/decisions.md,
    "Handing a batch over, priced by its layout")."""
    import torch  # imported already: a DataLoader made this batch

    tensor_t = torch.Tensor
    np = sys.modules.get("numpy")
    array_t = np.ndarray if np is not None else ()
    tensors = nbytes = 0
    stack = [batch]
    walked = 0
    while stack and walked < _LAYOUT_MAX_ITEMS:
        x = stack.pop()
        walked += 1
        if isinstance(x, tensor_t):
            tensors += 1
            nbytes += x.numel() * x.element_size()
        elif isinstance(x, array_t):
            nbytes += int(x.nbytes)
        elif isinstance(x, (tuple, list)):
            stack.extend(x)
        elif isinstance(x, Mapping):  # dicts, and UserDict (BatchEncoding), MappingProxy
            stack.extend(x.values())
    return tensors, nbytes


# ---------------------------------------------------------------------------------------------
# Multi-process iterator


def _mp_reset(self, *args, **kwargs):
    # *args: torch's own _reset raises its own TypeError for a bad call, not ours.
    s = None
    try:
        loader = args[0] if args else kwargs["loader"]
        first_iter = kwargs.get("first_iter", args[1] if len(args) > 1 else False)
        pending = getattr(S._tls, "pending", None)
        info = _loader_info(loader)
        if pending is not None and pending[0] is info:
            E = pending[1]
        else:  # iterator made or reset without DataLoader.__iter__ (e.g. loader._get_iterator())
            info, E = _begin_epoch(loader)
        s = S.it_state(self)
        if first_iter or s is None:
            s = _ItState(info.L, E, mp=True)
            S.set_it_state(self, s)
            # Workers are started (pids known) and no index is sent yet: announce them now so that
            # worker_start precedes every event of the workers' batches.
            for wid, w in enumerate(self._workers):
                _instant(S._I_WSTART, info.L, wid, w.pid or -1)
            try:  # lets the pin-memory thread, which reads this queue, label its spans
                self._worker_result_queue._stallscope_L = info.L
            except Exception:
                pass
        else:
            s.L = info.L
            s.E = E
            s.ended = False
            s.recv.clear()
        s.in_reset = True
    except Exception:
        s = None
    try:
        return S._orig_reset(self, *args, **kwargs)
    finally:
        if s is not None:
            s.in_reset = False


def _mp_try_put_index(self, *args, **kwargs):
    try:
        before = self._send_idx
    except Exception:
        return S._orig_try_put_index(self, *args, **kwargs)
    r = S._orig_try_put_index(self, *args, **kwargs)
    try:
        if self._send_idx != before:
            s = S.it_state(self)
            if s is not None:
                _instant(S._I_SENT, s.L, before, self._task_info[before][0])
    except Exception:
        pass
    return r


def _mp_get_data(self, *args, **kwargs):
    r = S._orig_get_data(self, *args, **kwargs)
    try:
        s = S.it_state(self)
        if s is not None and not s.in_reset:
            idx = r[0]
            if type(idx) is int and not isinstance(r[1], S._StopMarker):
                s.recv.add(idx)
                info = self._task_info.get(idx)
                _instant(S._I_RECV, s.L, idx, info[0] if info else -1)
    except Exception:
        pass
    return r


def _mp_shutdown_workers(self, *args, **kwargs):
    try:
        was = self._shutdown
    except Exception:
        was = True
    try:
        return S._orig_shutdown(self, *args, **kwargs)
    finally:
        try:
            if not was and self._shutdown:
                s = S.it_state(self)
                if s is not None:
                    for wid, w in enumerate(self._workers):
                        _instant(S._I_WSTOP, s.L, wid, w.pid or -1)
        except Exception:
            pass
