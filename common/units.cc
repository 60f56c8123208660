// Quantities as text; see units.h.
#include "common/units.h"

#include <cmath>
#include <cstdio>

namespace stallscope {

std::string bytes_text(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  const bool neg = b < 0;
  double v = std::fabs(b);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  const int digits = u == 0 ? 0 : v >= 100 ? 0 : v >= 10 ? 1 : 2;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s%.*f %s", neg ? "-" : "", digits, v, units[u]);
  return buf;
}

}  // namespace stallscope
