// Small numeric helpers the analysis shares: percentiles, interval sets, time-weighted means of
// step functions, and the standard error of a mean over a correlated series (batch means).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "analysis/dataloader.h"

namespace stallscope::analysis {

struct Interval {
  int64_t begin = 0, end = 0;  // [begin, end), ns
  int64_t length() const { return end > begin ? end - begin : 0; }
};

// Sorts and merges overlapping or touching intervals; drops empty ones.
std::vector<Interval> merge_intervals(std::vector<Interval> v);
int64_t total_length(const std::vector<Interval>& merged);
// Intersection of two merged interval sets.
std::vector<Interval> intersect(const std::vector<Interval>& a, const std::vector<Interval>& b);

// The arithmetic mean; nullopt when empty.
std::optional<double> mean(const std::vector<double>& v);
// `v` as an int64, saturated at its limits (NaN: 0): for figures read from a recording, which a
// damaged file can make anything.
int64_t saturated_int64(double v);

// The p-th percentile (0..100) of `sorted` by linear interpolation between closest ranks (numpy's
// default); nullopt when empty.
std::optional<double> percentile(const std::vector<double>& sorted, double p);

// A step function weighted by time over a merged interval set: mean value, fraction of the time at
// value 0, the largest value reached.
struct StepSummary {
  double mean = 0;
  double zero_fraction = 0;
  int64_t max = 0;
  int64_t covered_ns = 0;
};
StepSummary summarize(const StepFunction& f, const std::vector<Interval>& over);

// The mean of a series and the standard error of that mean by the method of batch means: the
// series is cut into `blocks` contiguous blocks of equal length (the first n mod blocks values are
// left out, as the start of a run is where it is least steady) and the error is the spread of the
// block means. Neighbouring values of a series such as step times are correlated (a slow fetch
// delays the next steps too); blocks long enough to outlast that correlation have nearly
// independent means, where the plain sd/sqrt(n) would understate the error.
struct MeanError {
  double mean = 0;  // of the whole series
  double se = 0;    // standard error of the mean: sd(block means) / sqrt(blocks)
  int blocks = 0;   // the degrees of freedom of `se` are blocks - 1
  int64_t block_length = 0;
};
// nullopt when `blocks` < 2 or the series has fewer than `blocks` values.
std::optional<MeanError> batch_means(const std::vector<double>& series, int blocks);

// The two-sided 95% quantile of Student's t with `dof` degrees of freedom (t such that
// P(|T| <= t) = 0.95): a table for 1..30, 40, 60, 120 and infinity (1.960), linear in 1/dof
// between its rows, so fractional degrees of freedom (Welch-Satterthwaite) are served too. Within
// 0.1% of the exact value for dof >= 5 (checked against scipy; docs/decisions.md), coarser below.
double t_quantile_95(double dof);

}  // namespace stallscope::analysis
