// Text for times, durations, sizes and rates as the dashboard shows them.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "analysis/format.h"
#include "common/units.h"

namespace stallscope::ui {

// "412 ms", "3.25 s", "18.0 us", "950 ns": three significant digits.
inline std::string fmt_duration(double ns) {
  char b[32];
  const double a = std::fabs(ns);
  auto three = [&](double v, const char* unit) {
    if (std::fabs(v) >= 100) {
      std::snprintf(b, sizeof b, "%.0f %s", v, unit);
    } else if (std::fabs(v) >= 10) {
      std::snprintf(b, sizeof b, "%.1f %s", v, unit);
    } else {
      std::snprintf(b, sizeof b, "%.2f %s", v, unit);
    }
  };
  if (a >= 60e9) {
    const double m = std::floor(ns / 60e9);
    std::snprintf(b, sizeof b, "%.0f min %.0f s", m, (ns - m * 60e9) / 1e9);
  } else if (a >= 1e9) {
    three(ns / 1e9, "s");
  } else if (a >= 1e6) {
    three(ns / 1e6, "ms");
  } else if (a >= 1e3) {
    three(ns / 1e3, "us");
  } else {
    std::snprintf(b, sizeof b, "%.0f ns", ns);
  }
  return b;
}

// A time since the session start: "12.345 s", "1:02.345" past a minute, "1:02:03.4" past an hour.
// A time since the session start (analysis/format.h's clock_time: one implementation).
inline std::string fmt_time(double ns, int decimals = 3) {
  return analysis::clock_time(static_cast<int64_t>(ns), decimals);
}
// The same for a time from an origin, which may be before it: "-0.100 s", "-1:02.345".
inline std::string fmt_offset(double ns, int decimals = 3) {
  return ns < 0 ? "-" + fmt_time(-ns, decimals) : fmt_time(ns, decimals);
}

inline std::string fmt_double(double v, int decimals) {
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

}  // namespace stallscope::ui
