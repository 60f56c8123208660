// One row of `bench/run`'s table. A benchmark calls bench_row() for each headline figure; when
// STALLSCOPE_BENCH_ROWS names a file (bench/run sets it), the row is appended to it as one JSON
// line. Without it nothing is written: the benchmark's own tables are its output.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "common/json.h"

namespace stallscope::bench {

// row: the table's row name ("hot path, 1 thread"); value and goal as printed; peer where there is
// one ("torch.profiler +27 %"); met: whether the goal was met (none: no goal or not judged).
inline void bench_row(const std::string& row, const std::string& value, const std::string& goal = "",
                      const std::string& peer = "", std::optional<bool> met = std::nullopt) {
  const char* path = std::getenv("STALLSCOPE_BENCH_ROWS");
  if (path == nullptr || *path == '\0') return;
  Json j = {{"row", row}, {"value", value}, {"goal", goal}, {"peer", peer}};
  j["met"] = met ? Json(*met) : Json(nullptr);
  if (FILE* f = std::fopen(path, "a")) {
    const std::string line = j.dump() + "\n";
    std::fwrite(line.data(), 1, line.size(), f);
    std::fclose(f);
  }
}

inline std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace stallscope::bench
