// compare(): each run's figures (side()), the B/A throughput ratio with its interval (ratio()), what
// keeps the runs from being compared or qualifies the result (problems()), and the verdict. Rules and
// thresholds: docs/report.md, "compare".
#include "analysis/compare.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "analysis/format.h"

namespace stallscope::analysis {
namespace {

// The figures of one Report that an A/B compares.
CompareSide side(const Report& r) {
  CompareSide s;
  s.source = r.source;
  s.command = r.command;
  s.mode = r.mode;
  s.complete = r.complete;
  s.dataloader_seen = r.dataloader_seen;
  s.wall_s = r.wall_s;
  s.steps = r.steps;
  s.samples = r.samples;
  if (r.steps > 0) s.samples_per_step = static_cast<double>(r.samples) / static_cast<double>(r.steps);
  s.samples_per_s = r.samples_per_s;
  s.step_time = r.step_time;
  s.step_time.series_ms.clear();
  const int64_t n = static_cast<int64_t>(r.step_time.series_ms.size());
  const int blocks = static_cast<int>(std::clamp<int64_t>(static_cast<int64_t>(std::sqrt(static_cast<double>(n))),
                                                          kCompareMinBlocks, kCompareMaxBlocks));
  s.step_noise = batch_means(r.step_time.series_ms, blocks);
  s.stall_fraction = r.stall.fraction;
  for (const auto& [cause, sec] : r.stall.by_cause_s) s.stall_by_cause[cause] = r.wall_s > 0 ? sec / r.wall_s : 0.0;
  if (r.steps > 0) s.compute_per_step_ms = r.compute_per_step_ms;
  s.queue.available = r.queue.available;
  s.queue.mean_ready = r.queue.mean_ready;
  s.queue.empty_fraction = r.queue.empty_fraction;
  if (const LoaderStats* l = r.loader()) {
    s.loader.present = true;
    s.loader.kind = l->config.kind;
    s.loader.batch_size = l->config.batch_size;
    s.loader.num_workers = l->num_workers;
    s.loader.prefetch_factor = l->config.prefetch_factor;
    s.loader.dataset_len = l->config.dataset_len;
    s.loader.pin_memory = l->config.pin_memory;
    s.loader.persistent_workers = l->config.persistent_workers;
    s.workers.count = l->num_workers;
    s.workers.threads = l->config.kind == "reference";
    s.workers.busy_fraction = l->workers_busy_fraction;
    s.workers.fetch_p50_ms = l->fetch_p50_ms;
    s.workers.fetch_p99_ms = l->fetch_p99_ms;
    double cpu = 0;
    int with_cpu = 0;
    for (const WorkerStats& w : r.workers) {
      if (w.loader != l->id || !w.cpu_util) continue;
      cpu += *w.cpu_util;
      ++with_cpu;
    }
    if (with_cpu > 0) s.workers.cpu_util = cpu / with_cpu;
  }
  for (const Recommendation& rec : r.recommendations) s.recommendations.push_back({rec.id, rec.severity, rec.action});
  return s;
}

// B/A samples/s. Its interval: samples/s is proportional to 1 / mean step time, so each run's
// relative standard error of the mean step time is that of its throughput (delta method); the
// ratio's relative variance is the sum of the two, plus the run-to-run variance once per run. The
// t quantile takes the Welch-Satterthwaite degrees of freedom of that sum (each run's blocks - 1;
// the run-to-run term is taken as known, with no degrees of freedom of its own).
std::optional<ThroughputRatio> ratio(const CompareSide& a, const CompareSide& b, const CompareOptions& o) {
  if (!a.samples_per_s || !b.samples_per_s || *a.samples_per_s <= 0 || *b.samples_per_s <= 0) return std::nullopt;
  ThroughputRatio r;
  r.value = *b.samples_per_s / *a.samples_per_s;
  r.run_to_run_sd = o.run_to_run_sd;
  if (!a.step_noise || !b.step_noise || a.step_noise->mean <= 0 || b.step_noise->mean <= 0) return r;
  const double va = std::pow(a.step_noise->se / a.step_noise->mean, 2);
  const double vb = std::pow(b.step_noise->se / b.step_noise->mean, 2);
  const double var = va + vb + 2 * o.run_to_run_sd * o.run_to_run_sd;
  const double denom = va * va / (a.step_noise->blocks - 1) + vb * vb / (b.step_noise->blocks - 1);
  r.dof = denom > 0 ? var * var / denom : std::numeric_limits<double>::infinity();
  r.half_width = t_quantile_95(*r.dof) * r.value * std::sqrt(var);
  r.low = r.value - *r.half_width;
  r.high = r.value + *r.half_width;
  return r;
}

std::string name_of(const CompareSide& s, const char* which) { return std::string(which) + " (" + s.source + ")"; }

// What stops one run from being compared: no training loop, too few steps, too short a window.
void run_problems(const CompareSide& s, const char* which, std::vector<CompareProblem>* out) {
  if (!s.dataloader_seen || s.steps == 0) {
    out->push_back({kProblemNoDataLoader, true, name_of(s, which) + " has no DataLoader training loop"});
    return;
  }
  if (s.steps < kCompareMinSteps) {
    out->push_back({kProblemTooFewSteps, true,
                    name_of(s, which) + " has " + grouped(s.steps) + " steps, fewer than " +
                        std::to_string(kCompareMinSteps) + ": too few to tell a difference from noise"});
  }
  if (s.wall_s < kCompareMinWindowS) {
    out->push_back({kProblemShortWindow, true,
                    name_of(s, which) + " trained for " + fixed(s.wall_s, 2) + " s, under " +
                        fixed(kCompareMinWindowS, 0) + " s: start-up outweighs the steady state"});
  }
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// Blocking problems first, then those that qualify the verdict.
std::vector<CompareProblem> problems(const CompareSide& a, const CompareSide& b) {
  std::vector<CompareProblem> out;
  run_problems(a, "A", &out);
  run_problems(b, "B", &out);
  const bool both_loops = a.steps > 0 && b.steps > 0;
  if (both_loops) {
    const double length = static_cast<double>(std::max(a.samples, b.samples)) /
                          static_cast<double>(std::max<int64_t>(1, std::min(a.samples, b.samples)));
    if (length > kCompareMaxLengthRatio) {
      out.push_back({kProblemDifferentLength, true,
                     "A handed " + grouped(a.samples) + " samples in " + grouped(a.steps) + " steps, B " +
                         grouped(b.samples) + " in " + grouped(b.steps) + ": lengths " + fixed(length, 2) +
                         "x apart (more than " + fixed(kCompareMaxLengthRatio, 1) +
                         "x), so start-up and epoch edges weigh differently; record runs of the same length"});
    }
    const bool sizes_known = a.loader.batch_size && b.loader.batch_size;
    const bool batch_differs = sizes_known
                                   ? *a.loader.batch_size != *b.loader.batch_size
                                   : std::fabs(*a.samples_per_step - *b.samples_per_step) >
                                         kCompareBatchTolerance * std::max(*a.samples_per_step, *b.samples_per_step);
    if (batch_differs) {
      out.push_back({kProblemBatchSize, false,
                     "batch sizes differ (A " +
                         (sizes_known ? std::to_string(*a.loader.batch_size) : fixed(*a.samples_per_step, 1)) + ", B " +
                         (sizes_known ? std::to_string(*b.loader.batch_size) : fixed(*b.samples_per_step, 1)) +
                         " samples per step): the ratio compares samples/s, not steps/s"});
    }
  }
  if (!a.command.empty() && !b.command.empty() &&
      command_without_loader_flag(a.command) != command_without_loader_flag(b.command)) {
    out.push_back({kProblemCommand, false,
                   "the recorded commands differ (A " + quoted(a.command) + ", B " + quoted(b.command) +
                       "): make sure both train the same thing"});
  }
  if (a.loader.dataset_len && b.loader.dataset_len && *a.loader.dataset_len != *b.loader.dataset_len) {
    out.push_back({kProblemDataset, false,
                   "the datasets differ in length (A " + grouped(*a.loader.dataset_len) + ", B " +
                       grouped(*b.loader.dataset_len) + " items)"});
  }
  if (both_loops && a.mode != b.mode) {
    out.push_back({kProblemMode, false,
                   "A was recorded in " + a.mode + " mode, B in " + b.mode +
                       " mode: the stall is the loop's wait in cpu mode, the GPU's idle time in gpu mode, and the "
                       "GPU's idle time while the loop waits for data in gpu_light mode"});
  }
  for (const auto& [s, which] : {std::pair{&a, "A"}, std::pair{&b, "B"}}) {
    if (!s->complete) {
      out.push_back({kProblemUnfinished, false,
                     name_of(*s, which) +
                         " is not finished (still being written, or the recorder was stopped): its figures cover what "
                         "it holds so far"});
    }
  }
  std::stable_partition(out.begin(), out.end(), [](const CompareProblem& p) { return p.blocking; });
  return out;
}

// "1.63x" with the digits the interval warrants: three when it is narrower than ±0.005.
int ratio_digits(const ThroughputRatio& r) { return r.half_width && *r.half_width < 0.005 ? 3 : 2; }

std::string rate(const std::optional<double>& v) {
  return or_dash(v, [](double x) { return fixed(x, 1); });
}

void decide(Comparison* c) {
  std::string blocking;
  for (const CompareProblem& p : c->problems) {
    if (p.blocking) blocking += (blocking.empty() ? "" : "; ") + p.message;
  }
  if (!c->ratio && blocking.empty()) blocking = "a run has no samples/s (no training window)";
  if (!blocking.empty()) {
    c->verdict = kVerdictNotComparable;
    c->verdict_text = "cannot compare: " + blocking;
    return;
  }
  const ThroughputRatio& r = *c->ratio;
  const int d = ratio_digits(r);
  const std::string pm = r.half_width ? " (±" + fixed(*r.half_width, d) + ")" : "";
  const std::string rates = rate(c->b.samples_per_s) + " vs " + rate(c->a.samples_per_s) + " samples/s";
  if (!r.half_width) {  // not with kCompareMinSteps >= kCompareMinBlocks + 1; said rather than assumed
    c->verdict = kVerdictNotComparable;
    c->verdict_text = "cannot compare: the step times give no estimate of the noise (" + rates + ")";
  } else if (*r.low <= 1 && 1 <= *r.high) {
    c->verdict = kVerdictNoDifference;
    c->verdict_text = "no measurable difference: B/A " + fixed(r.value, d) + "x" + pm + " (" + rates + "); the " +
                      percent(kCompareConfidence, 0) + " interval includes 1";
  } else if (r.value > 1) {
    c->verdict = kVerdictFaster;
    c->verdict_text = "B is faster by " + fixed(r.value, d) + "x" + pm + ": " + rates;
  } else {
    c->verdict = kVerdictSlower;
    c->verdict_text = "B is slower: " + fixed(r.value, d) + "x" + pm + " the samples/s of A, " + rates;
  }
}

}  // namespace

std::string command_without_loader_flag(const std::string& command) {
  std::istringstream in(command);
  std::string word, out;
  bool skip_value = false;
  while (in >> word) {
    if (skip_value) {
      skip_value = false;
      continue;
    }
    if (word == "--loader") {
      skip_value = true;
      continue;
    }
    if (word.rfind("--loader=", 0) == 0) continue;
    out += (out.empty() ? "" : " ") + word;
  }
  return out;
}

Comparison compare(const Report& a, const Report& b, const CompareOptions& options) {
  Comparison c;
  c.a = side(a);
  c.b = side(b);
  c.ratio = ratio(c.a, c.b, options);
  c.problems = problems(c.a, c.b);
  decide(&c);
  return c;
}

CompareSide compare_side(const Report& r) { return side(r); }

}  // namespace stallscope::analysis
