"""The Python side of the event vocabulary: every name the package records, written once.

The DataLoader hooks intern these names and refer to them only through these constants. The C++
side's vocabulary (common/vocabulary.h) holds the same names with their argument layouts, and
docs/events.md describes each one; tests/unit/vocabulary_test.cc fails when a name here is not in
the C++ vocabulary, or when another module of the package spells a name out. A constant is named
after its text: upper case, dots as underscores.

Imports nothing: the start-up path may read it without loading torch or ctypes.
"""

# Training process, main thread
DL_CONFIG = "dl.config"
DL_EPOCH_BEGIN = "dl.epoch_begin"
DL_EPOCH_END = "dl.epoch_end"
DL_NEXT = "dl.next"
DL_SENT = "dl.sent"
DL_RECV = "dl.recv"
DL_WORKER_START = "dl.worker_start"
DL_WORKER_STOP = "dl.worker_stop"
DL_FETCH = "dl.fetch"  # also in worker processes
DL_COLLATE = "dl.collate"  # also in worker processes
DL_STEP = "dl.step"
DL_BATCH = "dl.batch"

# Pin-memory thread
DL_PIN = "dl.pin"

# Worker processes
DL_WORKER_READY = "dl.worker_ready"
DL_PUT = "dl.put"

# Training process and worker processes
DL_CPU = "dl.cpu"
DL_PARALLEL = "dl.parallel"
DL_PARALLEL_NEXT = "dl.parallel_next"

# Hook health
STALLSCOPE_HOOKS = "stallscope.hooks"

# torch.distributed (training processes)
DIST_RANK = "dist.rank"
DIST_COLLECTIVE = "dist.collective"
DIST_ISSUE = "dist.issue"
DIST_DONE = "dist.done"

# Every event name above, in the order of docs/events.md.
EVENT_NAMES = (
    DL_CONFIG, DL_EPOCH_BEGIN, DL_EPOCH_END, DL_NEXT, DL_SENT, DL_RECV, DL_WORKER_START, DL_WORKER_STOP,
    DL_FETCH, DL_COLLATE, DL_STEP, DL_CPU, DL_BATCH, DL_PARALLEL, DL_PIN, DL_WORKER_READY, DL_PUT, STALLSCOPE_HOOKS,
    DIST_RANK, DIST_COLLECTIVE, DIST_ISSUE, DIST_DONE,
)

# Which loader ran (`kind` in dl.config) and which `stallscope run --loader` asked for: torch's
# DataLoader as the script made it, torch's with the settings stallscope chose, or
# stallscope.ReferenceLoader in its place (common/vocabulary.h, kLoaderKinds).
LOADER_TORCH = "torch"
LOADER_TUNED = "tuned"
LOADER_REFERENCE = "reference"
LOADER_KINDS = (LOADER_TORCH, LOADER_TUNED, LOADER_REFERENCE)

# Thread names the hooks give (not events: the `threads` table of a recording). The prefixes are
# followed by the worker id W (worker processes) or the loader id L (pin-memory thread).
THREAD_MAIN = "MainThread"
THREAD_WORKER_PREFIX = "dl-worker-"
THREAD_PIN_PREFIX = "dl-pin-"
