// Database rows as plain structs: what the writer takes and the reader returns. Times are
// nanoseconds since the session start; optional columns are std::optional.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "common/saturating.h"

namespace stallscope {

struct ProcessRow {
  int64_t id = 0;
  int64_t pid = 0;
  std::optional<int64_t> ppid;
  std::string cmdline;  // argv joined with spaces
  std::optional<int64_t> start_ns, end_ns, exit_code, exit_signal;
};

struct ThreadRow {
  int64_t id = 0;
  int64_t process_id = 0;
  int64_t tid = 0;
  std::string name;
};

struct SpanRow {
  int64_t id = 0;
  int64_t thread_id = 0;
  int64_t start_ns = 0;
  std::optional<int64_t> dur_ns;  // nullopt: never ended
  uint32_t name_id = 0;
  int32_t depth = 0;
  std::optional<int64_t> arg0, arg1, arg2;
};

struct InstantRow {
  int64_t id = 0;
  int64_t thread_id = 0;
  int64_t ts_ns = 0;
  uint32_t name_id = 0;
  std::optional<int64_t> arg0, arg1, arg2;
};

struct CounterTrackRow {
  int64_t id = 0;
  std::string name;
  std::string unit;
  int64_t pid = 0;
};

struct CounterRow {
  int64_t track_id = 0;
  int64_t ts_ns = 0;
  double value = 0;
};

struct GpuActivityRow {
  int64_t id = 0;
  int64_t process_id = 0;  // the process whose CUDA work this was
  int64_t device = 0, stream = 0, context = 0;
  std::string kind;  // kernel, memcpy, memset, sync
  int64_t start_ns = 0, dur_ns = 0;
  uint32_t name_id = 0;  // kernel name, "memcpy HtoD", sync type
  int64_t bytes = 0;
  std::string copy_kind, src_kind, dst_kind;  // memcpy only: HtoD..., pageable/pinned/device
  int64_t correlation_id = 0;
};

struct FlushRow {
  int64_t ts_ns = 0;
  int64_t events = 0;
  int64_t dropped_total = 0;
  std::optional<int64_t> first_span_id, last_span_id, min_start_ns, max_end_ns;
};

// Rows of the summary tables (docs/schema.md, "Summaries"): one interval of `level_ns` starting at
// bucket * level_ns, per thread, name and loader (grp = arg0 for the names summarised per loader,
// else -1).
struct SpanSummaryRow {
  int64_t level_ns = 0, bucket = 0, thread_id = 0;
  uint32_t name_id = 0;
  int64_t grp = -1;
  int64_t count = 0, total_ns = 0, min_ns = 0, max_ns = 0;
  std::string sketch;  // DurationSketch::encode() of the durations (common/sketch.h)
};

struct InstantSummaryRow {
  int64_t level_ns = 0, bucket = 0, thread_id = 0;
  uint32_t name_id = 0;
  int64_t grp = -1;
  int64_t count = 0;
};

// One interval of one loader's hand-offs on one thread (handoff_summaries): the next() calls that
// handed a batch, counted in the interval where they ended; their samples (the batches' collated
// sizes, where the recording has them); the step times ending there (each the gap since the
// previous hand-off of the same loader on that thread); and the loader's starts (its
// DataLoader.__iter__: dl.epoch_begin to the epoch's first next() call), counted where they began.
struct HandoffSummaryRow {
  int64_t level_ns = 0, bucket = 0, thread_id = 0, loader = 0;
  int64_t batches = 0, samples = 0, unsized = 0;  // unsized: batches whose collated size is not known
  int64_t steps = 0, step_total_ns = 0, step_min_ns = 0, step_max_ns = 0;
  std::string step_sketch;  // DurationSketch::encode() of the step times
  int64_t starts = 0, start_total_ns = 0;
};

// A loader's queue over some time (queue_summaries; docs/schema.md): the time the loader was active
// (covered_ns, from an epoch's first next() call to its StopIteration or dl.epoch_end), and over it
// the batches ready (put by a worker, not yet handed to the loop) and in flight (sent to a worker,
// not yet put) as step functions: their time integrals (batch-ns; divided by covered_ns, the
// means), lowest and highest values held for a positive time, and the time with none ready.
// merge() is the one rule every layer combines them by (the writer's intervals, the report's
// periods, the dashboard's columns): sums added (saturating), lowest and highest over the parts that
// covered time; a part with no covered time changes nothing.
struct QueueFigures {
  int64_t covered_ns = 0;
  int64_t ready_ns = 0, ready_min = 0, ready_max = 0, empty_ns = 0;
  int64_t flight_ns = 0, flight_min = 0, flight_max = 0;

  void merge(const QueueFigures& o) {
    if (o.covered_ns <= 0) return;
    const bool first = covered_ns <= 0;
    covered_ns = saturating_add(covered_ns, o.covered_ns);
    ready_ns = saturating_add(ready_ns, o.ready_ns);
    empty_ns = saturating_add(empty_ns, o.empty_ns);
    flight_ns = saturating_add(flight_ns, o.flight_ns);
    ready_min = first ? o.ready_min : std::min(ready_min, o.ready_min);
    ready_max = first ? o.ready_max : std::max(ready_max, o.ready_max);
    flight_min = first ? o.flight_min : std::min(flight_min, o.flight_min);
    flight_max = first ? o.flight_max : std::max(flight_max, o.flight_max);
  }
  double covered_s() const { return static_cast<double>(covered_ns) / 1e9; }
  double ready_mean() const { return per_covered(ready_ns); }
  double in_flight_mean() const { return per_covered(flight_ns); }
  double empty_fraction() const { return per_covered(empty_ns); }

 private:
  double per_covered(int64_t v) const {
    return covered_ns > 0 ? static_cast<double>(v) / static_cast<double>(covered_ns) : 0;
  }
};

// One interval of one loader's queue in one process.
struct QueueSummaryRow : QueueFigures {
  int64_t level_ns = 0, bucket = 0, process_id = 0, loader = 0;
};

struct CounterSummaryRow {
  int64_t level_ns = 0, bucket = 0, track_id = 0;
  int64_t count = 0;
  double sum = 0, min = 0, max = 0;
  int64_t last_ts_ns = 0;
  double last = 0;
};

struct GpuSummaryRow {
  int64_t level_ns = 0, bucket = 0, process_id = 0, device = 0;
  std::string kind;
  int64_t count = 0, total_ns = 0, bytes = 0;
};

}  // namespace stallscope
