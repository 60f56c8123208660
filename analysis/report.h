// The report: every figure `stallscope report` and the dashboard show about one recording,
// computed by analyze() as a pure function of a loaded Session. Formulas and thresholds are
// documented in docs/report.md; renderings (text, JSON, short summary) are in report_text.cc and
// report_json.cc.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/action.h"
#include "analysis/dataloader.h"
#include "analysis/gpu.h"
#include "analysis/over_time.h"
#include "analysis/ranks.h"
#include "analysis/session.h"
#include "analysis/whatif.h"
#include "common/json.h"
#include "common/vocabulary.h"

namespace stallscope::analysis {

inline constexpr const char* kReportSchema = "stallscope.report/1";

// Below this share of the window spent waiting for input, a run is not data-bound and gets no
// input-pipeline speed recommendation (docs/report.md).
inline constexpr double kDataBoundFraction = 0.10;
// Nor below this much input wait in the window in all: no change could save more than it (a loop
// of a few milliseconds inside a longer program).
inline constexpr double kMinInputWaitS = 0.1;

// Stall causes (common/vocabulary.h). CPU mode knows data_wait (in next()) and loader_start (in
// the training loader's DataLoader.__iter__); GPU mode attributes the GPU's idle time to all five.
using vocab::kCauseDataWait;
using vocab::kCauseH2d;
using vocab::kCauseHostOther;
using vocab::kCauseLoaderStart;
using vocab::kCauseSync;

struct StallInterval {
  int64_t start_ns = 0, end_ns = 0;           // clipped to the training window
  std::string cause;                          // one of the kCause* names
  int64_t loader = 0, epoch = 0, batch = -1;  // the next() call (batch -1: StopIteration)
};

struct StallStats {
  double fraction = 0;                       // stalled time / window
  double seconds = 0;                        // stalled time
  std::map<std::string, double> by_cause_s;  // seconds by cause
  std::vector<StallInterval> intervals;      // in time order
};

struct StepTimes {
  std::optional<double> p50_ms, p90_ms, p99_ms, mean_ms, max_ms;
  // The same `steps - 1` hand-off intervals in time order, for estimates that need their sequence
  // (the noise of the mean in `stallscope compare`); not in the JSON.
  std::vector<double> series_ms;
};

struct QueueStats {
  bool available = false;                // false: num_workers=0 or no loader
  std::optional<double> mean_ready;      // batches, time-weighted over the loader's active time
  std::optional<double> empty_fraction;  // share of that time with ready == 0
  std::optional<double> mean_in_flight;  // batches
  std::optional<int64_t> max_ready;
  double active_s = 0;            // the time the above are weighted over
  std::string note;               // why unavailable
  StepFunction ready, in_flight;  // for plotting
};

struct WorkerStats {
  int64_t pid = 0;
  bool thread = false;  // a loader thread of the training process (reference loader)
  int64_t loader = 0;
  int32_t worker_id = 0;
  int64_t start_epoch = 0;
  // The worker's working life: from its ready instant (dl.worker_ready: imports, dataset copy and
  // worker_init_fn done) to its end. The /proc figures and busy_fraction cover it; start-up (birth
  // -> ready) is startup_s, apart.
  double life_s = 0;
  double startup_s = 0;                         // process birth -> dl.worker_ready (0 if unknown)
  bool ready_seen = false;                      // a dl.worker_ready was recorded for it
  std::optional<double> cpu_util;               // cores, mean of proc.cpu over the working life
  std::optional<double> runq_delay_fraction;    // mean of proc.runq_wait
  std::optional<int64_t> private_growth_bytes;  // last - first proc.private_dirty of the working life
  std::optional<int64_t> private_first_bytes, private_last_bytes;
  std::optional<double> busy_fraction;  // busy_s / life_s
  std::optional<double> fetch_p50_ms, fetch_p99_ms, fetch_mean_ms;
  int64_t batches = 0;  // dl.fetch spans
  double busy_s = 0;    // sum of fetch durations
};

// Per-loader figures (the training loop's view of each DataLoader).
struct LoaderStats {
  int64_t id = 0;
  std::string role = "unknown";  // "train" (the main loader), "eval" or "unknown" (docs/report.md)
  std::string name;              // loader_name() of its config
  int64_t steps = 0;             // optimizer steps (dl.step) that trained on its batches
  double start_s = 0;            // time in its DataLoader.__iter__ (epoch_begin -> first next()) in the window
  LoaderInfo::Stages stages;     // reference loader: its threads' read/decode/augment time
  bool has_config = false;
  LoaderConfig config;
  std::optional<int64_t> num_workers;
  int64_t epochs = 0;
  int64_t batches_handed = 0;
  int64_t samples = 0;
  int64_t samples_unknown = 0;        // handed batches whose size was known neither way
  double wait_s = 0;                  // time in this loader's next() inside the window
  double edge_wait_s = 0;             // wait in each epoch's first next() and its StopIteration next()
  double shutdown_s = 0;              // StopIteration next() calls that shut the workers down
  std::vector<double> epoch_start_s;  // per epoch: dl.epoch_begin -> first batch handed
  struct EpochStart {
    int64_t epoch = 0, begin_ns = 0, first_batch_ns = 0;
  };
  std::vector<EpochStart> epoch_starts;  // the same epochs, with their times
  int64_t respawned_epochs = 0;          // epochs after the first that started new worker processes
  double respawn_excess_s = 0;           // what persistent workers would save: start excess + shutdowns
  std::optional<double> next_p50_ms;     // handed next() calls that are not an epoch's first
  std::optional<double> fetch_p50_ms, fetch_p90_ms, fetch_p99_ms, fetch_mean_ms;
  int64_t fetches = 0;
  std::optional<double> workers_busy_fraction;  // sum of fetch time / (num_workers x active time)
  double active_s = 0;                          // union over epochs of [first next(), last next() end]
};

// Where on the timeline a recommendation's evidence is: what a view shows when asked.
struct EvidenceAt {
  int64_t t0 = 0, t1 = 0;                          // the range to show (ns since the session start), context included
  int64_t pid = 0;                                 // the process to point at (0: none)
  vocab::Counter counter = vocab::Counter::kNone;  // the counter that shows it (kNone: none)
  std::string what;  // one line: "longest stall: 412 ms at 12.345 s (waiting for batch 7)"
};

struct Recommendation {
  std::string id;        // one of vocab::kRecommendationIds
  std::string severity;  // "high", "medium", "low"
  std::string message;
  std::string action;           // the change in a few words, e.g. "set num_workers=6"
  Json evidence;                // the numbers the rule used
  double expected_speedup = 1;  // for ordering; 1 when not a speed recommendation
  bool speed = true;            // a change that makes the loop faster (false: memory and such)
  EvidenceAt where;             // its evidence on the timeline
};

struct Report {
  std::string schema = kReportSchema;
  std::string mode = vocab::kModeCpu;
  std::string source;            // the recording's path
  bool complete = false;         // the recorder finished (else: live or cut short)
  bool dataloader_seen = false;  // any dl.* event
  int64_t train_pid = 0;
  int64_t window_start_ns = 0, window_end_ns = 0;
  double wall_s = 0;
  int64_t steps = 0;    // batches the training loader handed
  int64_t samples = 0;  // their samples
  std::optional<double> samples_per_s;
  StepTimes step_time;
  StallStats stall;
  bool data_bound = false;             // input_wait_fraction >= kDataBoundFraction
  double input_wait_fraction = 0;      // stall plus time in DataLoader.__iter__ (epoch starts) / window
  double compute_per_step_ms = 0;      // (window - input wait) / steps
  std::optional<int64_t> main_loader;  // id of the training loader
  std::string main_loader_by;          // how it was found: "optimizer_steps", "framework", "most_batches"
  int64_t optimizer_steps = 0;         // dl.step instants of the training process
  double eval_s = 0;                   // the window's time in other loaders' epochs (evaluation)
  std::vector<LoaderStats> loaders;
  QueueStats queue;
  std::vector<WorkerStats> workers;
  std::vector<Recommendation> recommendations;
  // The recommendations as one plan: numbered actions, each a typed line with its predicted
  // speed-up (action.h); what the text report and the dashboard show first.
  std::vector<Action> actions;
  std::vector<std::string> notes;
  std::optional<int64_t> cpu_count;         // meta cpu_count, when the recorder wrote it
  std::optional<int64_t> usable_cores;      // meta usable_cores: affinity and cgroup quota (common/cpus.h)
  std::string recorded_by;                  // meta mode: "launcher", "in-process" or "attach" ("" if absent)
  std::string command;                      // meta command: the program that was recorded ("" if absent)
  GpuStats gpu;                             // mode "gpu": the GPU timeline's figures
  GpuLightStats gpu_light;                  // mode "gpu_light": the marks' figures (gpu.h)
  WhatIf whatif;                            // the what-if model of the training loader (whatif.h)
  std::optional<EvidenceAt> longest_stall;  // the longest stall interval, to show
  RankSummary ranks;                        // a multi-rank job's ranks (ranks.h); empty for one process
  // Recorded with --keep-detail and older detail deleted: the session time from which every event
  // is kept (meta detail_from_ns); the figures cover that part, over_time the whole run.
  std::optional<int64_t> detail_from_ns;
  // A window of the past (LoadOptions::detail_to_ns): the figures stop there.
  std::optional<int64_t> detail_to_ns;
  // The training loader per period of the window, from the recording's summaries (over_time.h):
  // filled by the caller that has the recording open (`stallscope report`), not by analyze().
  OverTime over_time;

  // Share of the window the training loop waited in next() while it mattered: in CPU mode the
  // whole stall; in GPU mode the data_wait part of the GPU's idle time.
  double data_wait_fraction() const {
    auto it = stall.by_cause_s.find(kCauseDataWait);
    return it == stall.by_cause_s.end() || wall_s <= 0 ? 0.0 : it->second / wall_s;
  }
  double cause_fraction(const char* cause) const {
    auto it = stall.by_cause_s.find(cause);
    return it == stall.by_cause_s.end() || wall_s <= 0 ? 0.0 : it->second / wall_s;
  }
  // The training process's own /proc counters, mean of the samples inside the window.
  std::optional<double> train_cpu_util, train_runq_delay_fraction;
  // Its CPU in the kernel (cores, proc.sys_cpu) and its minor page faults per step (proc.minor_faults
  // over the window, per step), each the mean of the samples inside the window.
  std::optional<double> train_sys_cpu, train_faults_per_step;

  const LoaderStats* loader() const;  // the main loader (the training loader), if any
};

Report analyze(const Session& s);
// The same, for a caller that already built the DataLoader model of `s` (the dashboard keeps it
// for batch look-ups): the model is the larger part of the work.
Report analyze(const Session& s, const DataLoaderModel& m);

// Renderings. The text opens with what was lost and what to do (the actions); `explain` adds each
// recommendation's full evidence at the end (`stallscope report --explain`).
struct TextOptions {
  bool explain = false;
};
std::string render_text(const Report& r, const TextOptions& options = {});
Json to_json(const Report& r);
// 3-6 lines for the end of `stallscope run`.
std::string short_summary(const Report& r);

// Pieces analyze() is built from; exposed for tests and the dashboard.
std::vector<WorkerStats> worker_stats(const Session& s, const DataLoaderModel& m);
std::vector<Recommendation> recommend(const Report& r);
// Evidence over [t0, t1], shown with `pad` times its length (at least 1 us) of context each side.
EvidenceAt evidence_around(int64_t t0, int64_t t1, double pad, std::string what);

}  // namespace stallscope::analysis
