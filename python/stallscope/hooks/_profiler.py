"""torch.profiler beside stallscope's GPU capture: CUPTI serves one tool per process, so a profiler
trace with CUDA activity records no GPU activity while stallscope's capture runs. Says so once on
stderr, with what to do, before Kineto prepares or starts such a trace.
"""

from __future__ import annotations

import sys

from .. import _native as N
from . import _state as S


def _warn_profiler_gpu() -> None:
    if S._profiler_warned or not N.gpu_capture_on():
        return
    S._profiler_warned = True
    sys.stderr.write(
        "stallscope: torch.profiler asks for CUDA activity, but stallscope's GPU capture holds CUPTI, which one "
        "tool per process may use: the profiler will record no GPU activity (Kineto says "
        "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED). To profile the GPU with torch.profiler, run "
        "`stallscope run --gpu off` (or set STALLSCOPE_GPU=off): stallscope then records everything but the GPU "
        "side\n")


def _install_profiler_check() -> None:
    """One CUPTI client per process: torch.profiler with CUDA activity, started while stallscope's
    GPU capture runs, records no GPU activity, and Kineto's own warning does not say why. Before
    Kineto prepares or starts a trace with CUDA activity, say so once, with what to do."""
    try:
        from torch.autograd import profiler as ap
        from torch.autograd.profiler import ProfilerActivity
    except Exception:  # an unfamiliar torch: leave its profiler alone
        return
    for name in ("_prepare_profiler", "_enable_profiler"):
        orig = getattr(ap, name, None)
        if orig is None or getattr(orig, "_stallscope_check", False):
            continue

        def check(*args, _orig=orig, **kwargs):
            activities = args[1] if len(args) > 1 else kwargs.get("activities")
            try:
                if activities and ProfilerActivity.CUDA in activities:
                    _warn_profiler_gpu()
            except Exception:  # never stand between the user and their profiler
                pass
            return _orig(*args, **kwargs)

        check._stallscope_check = True
        check.__wrapped__ = orig
        setattr(ap, name, check)
