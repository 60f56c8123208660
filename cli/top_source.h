// Where `stallscope top`'s figures come from: a recording, opened read-only through storage's
// Reader (Reader::open, as every other command opens one), followed as it grows.
//
// Each refresh brings export/metrics.h's MetricsState up to date with the rows committed since the
// previous one (the same figures as the Prometheus endpoint: samples/s, stall, queue, each
// process's CPU and run-queue delay, GPU busy) and reads the queue's last minute from the summary
// tables. Every few seconds it analyses the latest minute of detail as `stallscope report` does
// (analysis/report.h) for the stall's cause and the top recommendation; how often is set by what
// the analysis costs, so that `top` stays a small load on a machine the training shares.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "cli/top_frame.h"
#include "export/metrics.h"
#include "storage/reader.h"

namespace stallscope::cli {

class TopSource {
 public:
  using Clock = std::chrono::steady_clock;
  // The detail the analysis reads: the latest minute of the recording.
  static constexpr int64_t kAnalysisWindowNs = 60'000'000'000;
  // The analysis runs at most every this often, and takes at most 1 % of the time between two.
  static constexpr double kAnalysisMinIntervalS = 5;
  static constexpr double kAnalysisCostShare = 0.01;

  // `reader` open on the recording; `live` when the session registry lists it as running.
  TopSource(std::unique_ptr<Reader> reader, bool live, std::optional<int64_t> pid, double interval_s);

  // Reads what is new and returns the frame to show. Read errors go into the frame's error line
  // (a recording being written can be read again next time).
  const TopFrame& refresh(Clock::time_point now);
  // Runs the analysis when it is due (or `force`); true when it ran.
  bool analyse_if_due(Clock::time_point now, bool force = false);
  const TopFrame& frame() const { return frame_; }

 private:
  void read_queue_history();
  std::unique_ptr<Reader> reader_;
  bool registered_live_;
  metrics::MetricsState state_;
  TopFrame frame_;
  TableHeads last_heads_;
  std::optional<Clock::time_point> last_growth_, analysed_at_, next_analysis_;
  bool complete_ = false, analysed_complete_ = false;
};

}  // namespace stallscope::cli
