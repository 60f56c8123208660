// Number formatting; see format.h.
#include "analysis/format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace stallscope::analysis {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string percent(double fraction, int digits) { return fixed(fraction * 100.0, digits) + "%"; }

std::string duration_ms(double ms) {
  const double a = std::fabs(ms);
  if (a < 1.0) return fixed(ms * 1000.0, 0) + " us";
  if (a < 1000.0) return fixed(ms, a < 10 ? 2 : 1) + " ms";
  return fixed(ms / 1000.0, a < 10000 ? 2 : 1) + " s";
}

std::string clock_time(int64_t ns, int decimals) {
  char b[40];
  // Rounded to the digits shown first, so that 3599.7 s with none is 1:00:00, not 59:60.
  const double scale = std::pow(10.0, std::clamp(decimals, 0, 9));
  const double s = std::round(static_cast<double>(ns) / 1e9 * scale) / scale;
  if (std::fabs(s) < 60) {
    std::snprintf(b, sizeof b, "%.*f s", decimals, s);
  } else if (std::fabs(s) < 3600) {
    const int m = static_cast<int>(s / 60);
    std::snprintf(b, sizeof b, "%d:%0*.*f", m, decimals > 0 ? decimals + 3 : 2, decimals, s - m * 60.0);
  } else {
    const int h = static_cast<int>(s / 3600);
    const int m = static_cast<int>((s - h * 3600.0) / 60);
    std::snprintf(b, sizeof b, "%d:%02d:%0*.*f", h, m, decimals > 0 ? decimals + 3 : 2, decimals,
                  s - h * 3600.0 - m * 60.0);
  }
  return b;
}

std::string grouped(int64_t v) {
  // In unsigned: -INT64_MIN does not fit an int64_t.
  const uint64_t magnitude = v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  std::string digits = std::to_string(magnitude);
  std::string out;
  int n = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (n > 0 && n % 3 == 0) out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++n;
  }
  return (v < 0 ? "-" : "") + out;
}

std::string pad(std::string s, size_t w, bool right) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

std::string wrap(const std::string& text, size_t width, const std::string& indent) {
  std::string out, line;
  size_t pos = text.find_first_not_of(' ');
  if (pos == std::string::npos) return text;
  line = text.substr(0, pos);  // the first line keeps its own indent
  while (pos < text.size()) {
    size_t sp = text.find(' ', pos);
    if (sp == std::string::npos) sp = text.size();
    const std::string word = text.substr(pos, sp - pos);
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line = indent;
    }
    if (!word.empty()) {
      if (!line.empty() && line.back() != ' ') line += " ";
      line += word;
    }
    pos = sp + 1;
  }
  out += line;
  return out;
}

}  // namespace stallscope::analysis
