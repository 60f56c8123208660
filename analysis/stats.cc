// Numeric helpers; see stats.h.
#include "analysis/stats.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <utility>

namespace stallscope::analysis {

std::vector<Interval> merge_intervals(std::vector<Interval> v) {
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (i.end <= i.begin) continue;
    if (!out.empty() && i.begin <= out.back().end) {
      out.back().end = std::max(out.back().end, i.end);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

int64_t total_length(const std::vector<Interval>& merged) {
  int64_t t = 0;
  for (const Interval& i : merged) t += i.length();
  return t;
}

std::vector<Interval> intersect(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t lo = std::max(a[i].begin, b[j].begin);
    const int64_t hi = std::min(a[i].end, b[j].end);
    if (lo < hi) out.push_back(Interval{lo, hi});
    if (a[i].end < b[j].end) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

std::optional<double> mean(const std::vector<double>& v) {
  if (v.empty()) return std::nullopt;
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

std::optional<double> percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return std::nullopt;
  if (sorted.size() == 1) return sorted.front();
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

StepSummary summarize(const StepFunction& f, const std::vector<Interval>& over) {
  StepSummary s;
  double weighted = 0;
  int64_t zero = 0;
  size_t k = 0;  // first point after the current position
  for (const Interval& iv : over) {
    // Value at iv.begin: the last point at or before it.
    while (k < f.size() && f[k].ts_ns <= iv.begin) ++k;
    int64_t t = iv.begin;
    int64_t v = k == 0 ? 0 : f[k - 1].value;
    while (t < iv.end) {
      const int64_t next = k < f.size() ? std::min(f[k].ts_ns, iv.end) : iv.end;
      const int64_t d = next - t;
      weighted += static_cast<double>(v) * static_cast<double>(d);
      if (v == 0) zero += d;
      if (d > 0) s.max = std::max(s.max, v);
      t = next;
      if (k < f.size() && f[k].ts_ns <= t) v = f[k++].value;
    }
    s.covered_ns += iv.length();
  }
  if (s.covered_ns > 0) {
    s.mean = weighted / static_cast<double>(s.covered_ns);
    s.zero_fraction = static_cast<double>(zero) / static_cast<double>(s.covered_ns);
  }
  return s;
}

std::optional<MeanError> batch_means(const std::vector<double>& series, int blocks) {
  const int64_t n = static_cast<int64_t>(series.size());
  if (blocks < 2 || n < blocks) return std::nullopt;
  MeanError e;
  e.blocks = blocks;
  e.block_length = n / blocks;
  double total = 0;
  for (double v : series) total += v;
  e.mean = total / static_cast<double>(n);
  std::vector<double> means;
  means.reserve(static_cast<size_t>(blocks));
  for (int64_t start = n - e.block_length * blocks; start < n; start += e.block_length) {
    double sum = 0;
    for (int64_t i = start; i < start + e.block_length; ++i) sum += series[static_cast<size_t>(i)];
    means.push_back(sum / static_cast<double>(e.block_length));
  }
  double grand = 0;
  for (double m : means) grand += m;
  grand /= static_cast<double>(blocks);
  double ss = 0;
  for (double m : means) ss += (m - grand) * (m - grand);
  e.se = std::sqrt(ss / static_cast<double>(blocks - 1) / static_cast<double>(blocks));
  return e;
}

double t_quantile_95(double dof) {
  // (dof, t) from the standard tables; the last row is the normal quantile.
  static constexpr std::pair<double, double> kTable[] = {
      {1, 12.706}, {2, 4.303},  {3, 3.182},  {4, 2.776},  {5, 2.571},  {6, 2.447},  {7, 2.365},
      {8, 2.306},  {9, 2.262},  {10, 2.228}, {11, 2.201}, {12, 2.179}, {13, 2.160}, {14, 2.145},
      {15, 2.131}, {16, 2.120}, {17, 2.110}, {18, 2.101}, {19, 2.093}, {20, 2.086}, {21, 2.080},
      {22, 2.074}, {23, 2.069}, {24, 2.064}, {25, 2.060}, {26, 2.056}, {27, 2.052}, {28, 2.048},
      {29, 2.045}, {30, 2.042}, {40, 2.021}, {60, 2.000}, {120, 1.980}};
  constexpr double kNormal = 1.960;
  if (!(dof > 1)) return kTable[0].second;  // also NaN
  if (std::isinf(dof)) return kNormal;
  for (size_t i = 1; i < std::size(kTable); ++i) {
    const auto [d1, t1] = kTable[i];
    if (dof <= d1) {
      const auto [d0, t0] = kTable[i - 1];
      const double w = (1 / d0 - 1 / dof) / (1 / d0 - 1 / d1);
      return t0 + (t1 - t0) * w;
    }
  }
  const auto [d0, t0] = kTable[std::size(kTable) - 1];
  return t0 + (kNormal - t0) * (1 - d0 / dof);  // 1/dof from 1/120 down to 0
}

int64_t saturated_int64(double v) {
  if (std::isnan(v)) return 0;
  constexpr double kMax = 9.2e18;  // just under 2^63
  if (v >= kMax) return std::numeric_limits<int64_t>::max();
  if (v <= -kMax) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

}  // namespace stallscope::analysis
