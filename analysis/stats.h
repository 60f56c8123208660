// Small numeric helpers the analysis shares: percentiles, interval sets and time-weighted means
// of step functions.
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

}  // namespace stallscope::analysis
