// Clock selection and anchors; see clock.h.
#include "collector/clock.h"

#include <cstdio>
#include <cstring>

namespace stallscope {

bool g_clock_uses_tsc = false;

bool tsc_is_reliable() {
#if defined(__x86_64__)
  FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (!f) return false;
  char line[4096];
  bool constant = false, nonstop = false;
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "flags", 5) != 0) continue;
    constant = std::strstr(line, " constant_tsc") != nullptr;
    nonstop = std::strstr(line, " nonstop_tsc") != nullptr;
    break;
  }
  std::fclose(f);
  return constant && nonstop;
#else
  return false;
#endif
}

ClockAnchor take_anchor() {
  ClockAnchor best{now_ticks(), monotonic_ns()};
  if (!g_clock_uses_tsc) {
    best.ticks = best.ns;
    return best;
  }
  uint64_t best_width = ~0ull;
  for (int i = 0; i < 5; ++i) {
    const uint64_t t0 = now_ticks();
    const uint64_t ns = monotonic_ns();
    const uint64_t t1 = now_ticks();
    if (t1 - t0 < best_width) {
      best_width = t1 - t0;
      best = {t0 + (t1 - t0) / 2, ns};
    }
  }
  return best;
}

}  // namespace stallscope
