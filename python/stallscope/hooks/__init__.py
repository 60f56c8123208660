"""DataLoader hooks: record what torch.utils.data.DataLoader does, in an unmodified training script.

Emits exactly the events of docs/events.md (their names: stallscope/_vocab.py). Which torch
function carries which event, by where the code runs (one module each):

  main process                                                                   _main.py
    DataLoader.__init__                      remember where the loader was created (created_at)
    DataLoader.__iter__                      dl.config (first time), dl.epoch_begin
    _BaseDataLoaderIter.__next__             dl.next span; dl.epoch_end on StopIteration
    _DatasetKind.create_fetcher (no workers) fetcher.fetch -> dl.fetch, fetcher.collate_fn -> dl.collate
    _MultiProcessingDataLoaderIter._reset    per-iterator state; dl.worker_start after the workers start
    ..._try_put_index                        dl.sent (B = _send_idx before, W = _task_info[B][0])
    ..._get_data                             dl.recv (not for the stale results drained by _reset)
    ..._shutdown_workers                     dl.worker_stop
  pin-memory thread (main process)                                               _pin.py
    _utils.pin_memory._pin_memory_loop       dl.pin (queues proxied: get -> begin, put -> end)
  worker processes                                                               _worker.py
    _utils.worker._worker_loop               thread name; queues proxied: index get -> current B, G;
                                             result put -> dl.put
    _DatasetKind.create_fetcher              dl.worker_ready (after worker_init_fn, and on resume);
                                             fetch -> dl.fetch, collate_fn -> dl.collate
    torch._utils.ExceptionWrapper.__init__   drops our frames from the worker traceback text
  torch.profiler (main process)                                                  _profiler.py
    autograd.profiler._prepare_profiler,     one stderr warning when a trace asks for CUDA activity
    _enable_profiler                         while stallscope's GPU capture holds CUPTI

Under `stallscope run --loader tuned|reference` the same DataLoader.__init__ and __iter__ (and
__len__ for reference) hand over to _swap.py: tuned rebinds the call's arguments (_tuned.py) and
prefetches to the GPU when CUDA is used (_prefetch.py); reference serves the loader with a
ReferenceLoader (_replace.py). Under `--loader torch` (the default) nothing of it runs.

The create_fetcher wrapper itself is in _install.py: it runs in both kinds of process and hands
the fetcher to _main or _worker. `stallscope attach` adopts what already runs when the hooks
arrive (adopt_running() in the training process, adopt_worker() in a worker): _adopt.py. What the
modules share, and every name rebound at run time, is in _state.py (read as `S.<name>`).

Installation (_install.py) is in two steps so that the script can still change torch between
import and first use: install() (at import of torch.utils.data.dataloader) wraps only
DataLoader.__init__ and __iter__; the first __iter__ checks the internals each part needs and
patches the parts whose internals are all there. A part whose internals are missing is left
untouched (one warning, one `stallscope.hooks` instant): torch behaves exactly as without
stallscope there.

Rules every wrapper follows: the user's code and torch's code run exactly as before (same
arguments, same results, same exceptions, same order); our bookkeeping runs in try/except and its
failures are swallowed; the training loop's per-batch path does a handful of ctypes calls with
precomputed ids and no allocation beyond what Python needs for the call.
"""

from __future__ import annotations

from . import _state
from ._adopt import adopt_running, adopt_worker
from ._install import install, on_session_change, problem

__all__ = ["install", "on_session_change", "problem", "adopt_running", "adopt_worker", "adopt_worker_why"]


def __getattr__(name: str):
    # adopt_worker_why is rebound by adopt_worker(): read where it lives, never a copy taken here.
    if name == "adopt_worker_why":
        return _state.adopt_worker_why
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
