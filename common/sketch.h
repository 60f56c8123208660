// A quantile sketch with a relative-error guarantee (the DDSketch construction: Masson, Rim and
// Lee, VLDB 2019), for durations in nanoseconds. A value v >= 1 goes to bin ceil(log_g(v)) with
// g = (1 + a) / (1 - a); every value of bin i lies in (g^(i-1), g^i], and the bin's estimate
// 2 g^i / (g + 1) is within a relative error a of each of them. Values <= 0 share one bin whose
// estimate is 0. Sketches merge exactly (bin counts add), so per-second sketches make per-hour
// ones. Encoded, a sketch is a few bytes per occupied bin (storage/summaries.h keeps them).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace stallscope {

class DurationSketch {
 public:
  static constexpr double kRelativeError = 0.01;

  // The bin of a value (values <= 0: kZeroBin).
  static int32_t bin_of(int64_t value);
  static constexpr int32_t kZeroBin = INT32_MIN;
  // Bins of positive values run from 0 (1 ns) to kMaxBin (INT64_MAX ns).
  static const int32_t kMaxBin;

  void add(int64_t value, uint64_t n = 1) { add_bin(bin_of(value), n); }
  void add_bin(int32_t bin, uint64_t n);
  void merge(const DurationSketch& other);
  uint64_t count() const { return count_; }
  bool empty() const { return count_ == 0; }
  // The value of rank floor(q * (count - 1)) among the values added in ascending order, within
  // kRelativeError of it. q is clamped to [0, 1]; 0 for an empty sketch.
  int64_t quantile(double q) const;

  // Bytes: per occupied bin, ascending, the zigzag varint of its index's difference from the
  // previous one (the first from 0; the zero bin is written first as index INT32_MIN) and the
  // varint of its count.
  std::string encode() const;
  // Fails on bytes encode() cannot have written (a damaged file), with what was wrong.
  static Result<DurationSketch> decode(std::string_view bytes);

  bool operator==(const DurationSketch& o) const { return zeros_ == o.zeros_ && lo_ == o.lo_ && bins_ == o.bins_; }

 private:
  // Dense from the lowest occupied bin to the highest: adding is an index, not a search (the
  // drainer adds every span to three sketches). At most kMaxBin + 1 counts.
  std::vector<uint64_t> bins_;  // bins_[k] counts bin lo_ + k
  int32_t lo_ = 0;
  uint64_t zeros_ = 0;
  uint64_t count_ = 0;
};

}  // namespace stallscope
