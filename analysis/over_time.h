// The run over time: the training loader's figures per period of the whole run (docs/report.md,
// "Over time"), read from the summary tables the writer keeps (storage/summaries.h) rather than
// from every row, so what it reads stays a few thousand rows however long the run. It answers
// what whole-run means hide on a long job: when the loop started waiting, and whether the dataset
// got slower.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "storage/reader.h"

namespace stallscope::analysis {

struct Report;

// A loader's queue over the time it was active (from an epoch's first next() call to its end) in a
// period, from queue_summaries: the batches ready (put by a worker, not yet handed to the loop) and
// in flight (sent to a worker, not yet put), as the report's Queue section counts them.
// The training loader's queue over a period (storage/rows.h; its covered_ns: the time it was active).
using QueuePeriod = QueueFigures;

struct OverTimePeriod {
  // [t0, t1) of session time, clipped to the training window (recorded with --keep-detail: from the
  // training loader's first next() call the summaries hold, before the window's start)
  int64_t t0_ns = 0, t1_ns = 0;
  int64_t next_calls = 0;  // the training loader's next() calls that started in it
  double wait_s = 0;       // their summed time (a call counts in the period it started in)
  int64_t steps = 0;       // optimizer steps (dl.step) that trained on its batches
  // Its worker processes' fetches that started in the period, and their time's quantiles from the
  // merged sketches (within DurationSketch::kRelativeError of the exact ones); none when its
  // batches are not fetched in worker processes (num_workers=0, the reference loader's threads).
  int64_t fetches = 0;
  std::optional<double> fetch_p50_ms, fetch_p99_ms;
  // Its batches handed in the period (next() calls that ended in it with a batch), their samples
  // (each batch's collated size, else the loader's batch_size, else 1, counted in
  // samples_unknown), and the step times that ended in it (the gap since the previous hand-off,
  // as the report's step time; quantiles from the merged sketches, within 1 %). All from
  // handoff_summaries: unset (batches nullopt) for a recording made before that table was kept.
  std::optional<int64_t> batches;
  int64_t samples = 0, samples_unknown = 0;
  // Its starts (DataLoader.__iter__: dl.epoch_begin to the epoch's first next() call) that began in
  // the period, and their time. With wait_s, the report's data stall: the report's "starting the
  // loader" also takes the workers' start-up inside that first call from "waiting in next()".
  int64_t starts = 0;
  double start_s = 0;
  std::optional<double> step_p50_ms, step_p90_ms, step_p99_ms;
  // Its queue in the training process; unset where it was never active with batches sent to
  // workers in the period (num_workers=0), or the recording has no queue_summaries.
  std::optional<QueuePeriod> queue;

  double length_s() const { return static_cast<double>(t1_ns - t0_ns) / 1e9; }
  // Share of the period spent waiting in next(); may pass 1 where a call that started in the
  // period went on past its end.
  double wait_fraction() const { return t1_ns > t0_ns ? wait_s / length_s() : 0.0; }
  // Waiting in next() and starting the loader, as a share of the period: the report's data stall.
  double stall_fraction() const { return t1_ns > t0_ns ? (wait_s + start_s) / length_s() : 0.0; }
  std::optional<double> samples_per_s() const {
    if (!batches || t1_ns <= t0_ns) return std::nullopt;
    return static_cast<double>(samples) / length_s();
  }
};

struct OverTime {
  bool available = false;
  std::string note;       // why not, when not available
  int64_t loader = 0;     // the training loader
  int64_t period_ns = 0;  // the periods' length (the first and last are clipped to the window)
  int64_t level_ns = 0;   // the summary level they were read from
  std::vector<OverTimePeriod> periods;
  // All the periods as one: the whole run's counts and sums (exact) and fetch quantiles (from the
  // sketches merged over the run), where the report's figures cover only the latest part.
  OverTimePeriod total;
};

// The period length for a window of `window_ns` cut into at most `max_periods` periods: the
// shortest of 1, 2, 5, 10, 20, 30 s, 1, 2, 5, 10, 15, 30 min, 1, 2, 3, 6, 12, 24 h (then whole
// days) that does, with the longest summary level that divides it.
struct PeriodChoice {
  int64_t period_ns = 0, level_ns = 0;
};
PeriodChoice choose_period(int64_t window_ns, int max_periods);

// Reads the summaries of `reader`'s recording for the training loader of `r` (analyze()'s report
// of the same recording) over its training window. Not available (with a note) for a recording
// without a training loader or without summaries.
Result<OverTime> over_time(Reader& reader, const Report& r, int max_periods = 12);

}  // namespace stallscope::analysis
