// Integer sums and products that stop at the int64 limits instead of overflowing: the summaries'
// totals over a damaged file's times (any value) stay defined.
#pragma once

#include <cstdint>
#include <limits>

namespace stallscope {

inline int64_t saturating_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r))
    return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  return r;
}

inline int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    return (a < 0) != (b < 0) ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
  return r;
}

}  // namespace stallscope
