// AnalysisView: the analysis library's Report for a recording plus what the dashboard derives from
// it to draw quickly: stall intervals and empty-queue periods as timeline rows, queue depth as
// step series with a min/max pyramid (one pixel column is O(log n) whatever the zoom), batch
// look-ups for hovering, and where each recommendation's evidence is on the timeline. Built by the
// analysis thread (snapshot_source.h), immutable once published.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/dataloader.h"
#include "analysis/report.h"
#include "analysis/session.h"
#include "common/status.h"
#include "ui/snapshot.h"

namespace stallscope::ui {

// A step function (value holds from ts[i] until ts[i+1]) prepared for drawing.
class StepSeries {
 public:
  StepSeries() = default;
  explicit StepSeries(const analysis::StepFunction& f);
  size_t size() const { return ts_.size(); }
  bool empty() const { return ts_.empty(); }
  int64_t ts(size_t i) const { return ts_[i]; }
  int32_t value(size_t i) const { return v_[i]; }
  // First point at or after t, from `lo` (a hint: galloping search over a block index, then within
  // one block; cheap when near, and a few cache lines when far, as SortedLog).
  size_t lower_bound(int64_t t, size_t lo = 0) const;
  // The value holding at t (0 before the first point).
  int32_t at(int64_t t) const;
  // Min and max of the values of points [i0, i1) (i0 < i1).
  std::pair<int32_t, int32_t> minmax(size_t i0, size_t i1) const;
  // Time-weighted mean over [t0, t1].
  double mean(int64_t t0, int64_t t1) const;
  int32_t max_value() const { return max_; }

 private:
  double integral_to(int64_t t) const;
  std::vector<int64_t> ts_;
  static constexpr size_t kBlock = 64;
  std::vector<int64_t> blocks_;  // the time of the last point of every kBlock
  std::vector<int32_t> v_;
  std::vector<double> integral_;  // integral_[i]: from ts_[0] to ts_[i]
  static constexpr size_t kFan = 16;
  std::vector<std::vector<std::pair<int32_t, int32_t>>> levels_;  // level k: blocks of kFan^(k+1) points
  int32_t max_ = 0;
};

// Where a recommendation's evidence is: the range to zoom to, and what to point at.
struct EvidenceTarget {
  int64_t t0 = 0, t1 = 0;
  int64_t pid = 0;       // highlight the lane of this process (0: none)
  int heat_metric = -1;  // switch the worker heat strip to this metric (-1: keep)
  std::string what;      // "longest stall: 412 ms at 12.345 s"
};

struct AnalysisView {
  analysis::Report report;
  analysis::DataLoaderModel model;
  Row stalls;       // stall intervals, styled by cause
  Row queue_empty;  // ready == 0 while the main loader iterates
  StepSeries ready, in_flight;
  std::vector<EvidenceTarget> targets;  // one per report.recommendations
  std::optional<EvidenceTarget> longest_stall;
  // Batch of each worker fetch: pid -> (fetch start, index into model.batches), by start.
  std::map<int64_t, std::vector<std::pair<int64_t, size_t>>> fetch_by_pid;
  // The same for the reference loader's threads, by thread (threads.id): they share a pid.
  std::map<int64_t, std::vector<std::pair<int64_t, size_t>>> fetch_by_thread;
  int64_t batch_size = 0;  // of the main loader (0: unknown)
  int64_t data_end_ns = 0;

  // The batch an item or marker of `lane` belongs to, if any (hover and click).
  const analysis::BatchInfo* batch_of(const Lane& lane, const Track& track, const Item& it) const;
  const analysis::BatchInfo* batch_of(const Lane& lane, const Track& track, const Marker& m) const;
};

// Loads `path` (its own read-only connection), analyses it and derives the above: a long
// recording from its latest part, as `stallscope report` (analysis::choose_detail_from), with
// report.over_time read from the summaries for the whole run.
Result<std::shared_ptr<const AnalysisView>> run_analysis(const std::string& path,
                                                         const analysis::DetailBudget& budget = {});
// The same from a loaded Session (tests, and the path above).
std::shared_ptr<AnalysisView> build_analysis_view(const analysis::Session& s);

}  // namespace stallscope::ui
