// Number formatting and text layout shared by the text renderings (report, compare) and the
// recommendation messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace stallscope::analysis {

// printf-style "%.<digits>f".
std::string fixed(double v, int digits);
// 0.301 -> "30.1%".
std::string percent(double fraction, int digits = 1);
// A duration in ms chosen by size: "850 us", "12.3 ms", "4.56 s".
std::string duration_ms(double ms);
// A time since the session start: "12.345 s", "2:05.250" (m:ss), "1:02:05.250" (h:mm:ss).
std::string clock_time(int64_t ns, int decimals = 3);
// 1234567 -> "1,234,567".
std::string grouped(int64_t v);
// `s` padded with spaces to `w` columns, on the right (left-aligned) or, with `right`, on the left.
std::string pad(std::string s, size_t w, bool right = false);
// Wraps `text` at `width` columns, every line after the first indented by `indent`; the first line
// keeps its own leading spaces.
std::string wrap(const std::string& text, size_t width, const std::string& indent);
// `v` formatted by `f`, or "-" when absent.
template <typename T, typename F>
std::string or_dash(const std::optional<T>& v, F f) {
  return v ? f(*v) : std::string("-");
}

}  // namespace stallscope::analysis
