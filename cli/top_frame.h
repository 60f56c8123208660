// What one screen of `stallscope top` shows (TopFrame, filled by cli/top_source.h) and how it is
// laid out in a terminal of a given size: pure functions, so that the layout is tested without a
// terminal (tests/unit/top_frame_test.cc). Every line fits the width (cut, never wrapped); the
// frame fits the height, the process table giving up rows first ("+N more").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "export/metrics.h"

namespace stallscope::cli {

// The seconds of queue history the sparkline covers, one column a second.
inline constexpr int kTopHistoryS = 60;

struct TopFrame {
  std::string source;          // the recording
  std::string command;         // the recorded program ("" when the recording does not say)
  std::optional<int64_t> pid;  // the process named on the command line
  enum class State { kOpening, kLive, kQuiet, kFinished } state = State::kOpening;
  double quiet_s = 0;        // kQuiet: seconds without new rows (the recorder stopped, unclosed)
  std::string error;         // the latest read error ("" none)
  double recorded_s = 0;     // session time of the training loader's latest event
  metrics::Figures figures;  // the live figures (export/metrics.h)
  // Batches ready per second (mean over the second; nullopt: the loader was not active), oldest
  // first, the last kTopHistoryS seconds up to recorded_s.
  std::vector<std::optional<double>> ready_history;

  // The analysis of the latest part of the recording (analysis/report.h), redone every few seconds.
  struct Analysis {
    std::string mode;                                    // vocab::kModeCpu, ...
    double window_s = 0;                                 // what it covered
    double stall_fraction = 0;                           // stalled / window (GPU modes: the GPU idle)
    std::vector<std::pair<std::string, double>> causes;  // cause -> share of the stall, largest first
    std::string advice;                                  // the top recommendation, one line ("" none)
    std::string severity;                                // its severity
    double age_s = 0;                                    // seconds since it was made
    // The training process and the workers, means over the window (shown when the live figures
    // have none: a finished recording's processes have ended).
    std::vector<metrics::Figures::Process> processes;
  };
  std::optional<Analysis> analysis;
  double interval_s = 1;  // the refresh period
};

// The frame as lines of at most `cols` columns and at most `rows` lines (rows <= 0: no limit, for
// `top --once`). `utf8`: block characters for the sparkline and a middle dot between fields; else
// ASCII only.
std::vector<std::string> render_top(const TopFrame& f, int cols, int rows, bool utf8);

// One character a value, scaled to `max` (at least 1): eight levels, a blank where there is no
// value. The newest `width` values when there are more.
std::string sparkline(const std::vector<std::optional<double>>& values, double max, size_t width, bool utf8);

// `line` cut to `cols` columns (a UTF-8 sequence counts one column; no tabs or escapes expected).
std::string fit(const std::string& line, size_t cols);
// The columns `line` takes, as fit() counts them.
size_t columns(const std::string& line);

}  // namespace stallscope::cli
