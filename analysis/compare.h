// Two recordings of the same training script side by side (`stallscope compare A.db B.db`): the
// figures of each run's Report that matter for an A/B (throughput, stall, step time, queue, workers,
// loader settings, recommendations), the B/A throughput ratio with an interval computed from the
// runs' own step-to-step noise, and a verdict that says when the runs cannot be compared or the
// figures are not to be trusted. compare() is a pure function of two Reports; the renderings (text,
// JSON "stallscope.compare/1") are in compare_text.cc and compare_json.cc. Rules and thresholds:
// docs/report.md, "compare".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/report.h"
#include "analysis/stats.h"
#include "common/json.h"

namespace stallscope::analysis {

inline constexpr const char* kCompareSchema = "stallscope.compare/1";

// Thresholds of the verdict (docs/report.md, "compare"); named here, used in compare.cc.
// A run needs this many steps (hand-offs) to be compared: the interval comes from at least
// kCompareMinBlocks blocks of several steps each.
inline constexpr int64_t kCompareMinSteps = 50;
// ... and a training window this long (s): shorter runs are dominated by start-up (worker processes
// starting, the first batches, caches warming) rather than by the steady state an A/B is about.
inline constexpr double kCompareMinWindowS = 2.0;
// Runs whose lengths (samples handed, which is steps when the batch sizes agree) differ by more than
// this factor are not compared: start-up and epoch edges weigh differently in each.
inline constexpr double kCompareMaxLengthRatio = 1.5;
// Samples per step (batch size) further apart than this share are a different batch size.
inline constexpr double kCompareBatchTolerance = 0.01;
// Batch means: the number of blocks is sqrt(step intervals), clamped to [min, max] (10-30 is the
// usual range: fewer blocks leave the error estimate itself noisy, more make blocks too short to
// outlast the correlation between neighbouring steps).
inline constexpr int kCompareMinBlocks = 10;
inline constexpr int kCompareMaxBlocks = 30;
// The interval's confidence (t_quantile_95 serves this level).
inline constexpr double kCompareConfidence = 0.95;
// How much two runs of one setting differ beyond their own step-to-step noise (machine load, page
// cache, frequency): a relative standard deviation of each run's samples/s, added to the ratio's
// variance once per run. Eight runs of one script on the 2-core VM, while other builds ran, differed
// by 0.55% (sd; 1.1% at the 95% upper bound) beyond their within-run error (docs/decisions.md).
inline constexpr double kCompareRunToRunSd = 0.01;

// Verdicts.
inline constexpr const char* kVerdictFaster = "faster";
inline constexpr const char* kVerdictSlower = "slower";
inline constexpr const char* kVerdictNoDifference = "no_difference";
inline constexpr const char* kVerdictNotComparable = "not_comparable";

// Problems: the first four block the verdict (blocking = true), the others qualify it.
inline constexpr const char* kProblemNoDataLoader = "no_dataloader";        // a run has no training loop
inline constexpr const char* kProblemTooFewSteps = "too_few_steps";         // < kCompareMinSteps
inline constexpr const char* kProblemShortWindow = "short_window";          // < kCompareMinWindowS
inline constexpr const char* kProblemDifferentLength = "different_length";  // > kCompareMaxLengthRatio
inline constexpr const char* kProblemBatchSize = "different_batch_size";    // samples per step differ
inline constexpr const char* kProblemCommand = "different_command";         // meta command differs beyond --loader
inline constexpr const char* kProblemDataset = "different_dataset";         // dataset_len of the main loaders differ
inline constexpr const char* kProblemMode = "different_mode";    // one cpu, one gpu: stalls mean other things
inline constexpr const char* kProblemUnfinished = "unfinished";  // a recording not finished

// One run's figures, as compared.
struct CompareSide {
  std::string source;
  std::string command;  // meta command ("" when not recorded)
  std::string mode;
  bool complete = false;
  bool dataloader_seen = false;
  double wall_s = 0;
  int64_t steps = 0;
  int64_t samples = 0;
  std::optional<double> samples_per_step;  // samples / steps
  std::optional<double> samples_per_s;
  StepTimes step_time;                  // percentiles and mean (series_ms left empty)
  std::optional<MeanError> step_noise;  // batch means of the step intervals, in ms
  double stall_fraction = 0;
  std::map<std::string, double> stall_by_cause;  // fractions of the window, by cause
  std::optional<double> compute_per_step_ms;

  struct Queue {
    bool available = false;
    std::optional<double> mean_ready, empty_fraction;
  } queue;

  struct Workers {
    std::optional<int64_t> count;         // the main loader's num_workers (threads: reference loader)
    bool threads = false;                 // a reference loader's threads
    std::optional<double> busy_fraction;  // workers_busy_fraction
    std::optional<double> fetch_p50_ms, fetch_p99_ms;
    std::optional<double> cpu_util;  // mean of the main loader's workers' cpu_util (cores each)
  } workers;

  struct Loader {
    bool present = false;  // a main loader exists
    std::string kind;      // torch, tuned, reference
    std::optional<int64_t> batch_size, num_workers, prefetch_factor, dataset_len;
    std::optional<bool> pin_memory, persistent_workers;
  } loader;

  struct Rec {
    std::string id, severity, action;
  };
  std::vector<Rec> recommendations;
};

struct CompareProblem {
  std::string id;         // one of kProblem*
  bool blocking = false;  // true: the runs cannot be compared
  std::string message;    // one sentence, with the figures
};

// B/A samples/s with its interval: value ± half_width (t quantile x standard error, by the delta
// method from each run's relative standard error of the mean step time, and the run-to-run term).
struct ThroughputRatio {
  double value = 0;
  std::optional<double> half_width, low, high;  // nullopt when a run is too short to estimate noise
  std::optional<double> dof;  // Welch-Satterthwaite over the within-run terms; infinite when they are 0
  double run_to_run_sd = 0;   // the CompareOptions value it used
};

struct CompareOptions {
  double run_to_run_sd = kCompareRunToRunSd;  // 0: the runs' own noise only (tests of that estimate)
};

struct Comparison {
  std::string schema = kCompareSchema;
  CompareSide a, b;
  std::optional<ThroughputRatio> ratio;         // nullopt when a run has no samples/s
  std::string verdict = kVerdictNotComparable;  // one of kVerdict*
  std::string verdict_text;                     // one line: "B is faster by 1.63x (±0.02): ..."
  std::vector<CompareProblem> problems;         // blocking ones first
};

Comparison compare(const Report& a, const Report& b, const CompareOptions& options = {});
// One run's figures as compare() puts them side by side (the dashboard's compare view shows a run's
// before the other's analysis is ready).
CompareSide compare_side(const Report& r);

// The command line of a recording with the loader flag taken out (`--loader X`, `--loader=X`),
// which is what two commands must share to be the same script.
std::string command_without_loader_flag(const std::string& command);

// Renderings.
std::string render_text(const Comparison& c);
Json to_json(const Comparison& c);

}  // namespace stallscope::analysis
