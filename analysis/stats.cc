// Numeric helpers; see stats.h.
#include "analysis/stats.h"

#include <algorithm>
#include <cmath>

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

}  // namespace stallscope::analysis
