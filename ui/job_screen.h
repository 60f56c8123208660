// The dashboard's job view (`stallscope ui JOB/`): a multi-rank job's ranks, one row each, with the
// ranks' data stall (or fetch time) over the job as a heat strip, grouped by node or sorted by
// stall, fetch time or rank (analysis/job.h: read from each rank's summaries, not its events).
// Clicking a rank opens its recording as `stallscope ui RANK.db` would; shift-clicking another puts
// it beside the one opened last, both on one time axis (the compare view); Esc, or the button in the
// corner, comes back to the job.
//
//   +---------------------------------------------------------------------------------------+
//   | job DIR: N ranks on M nodes; when it slowed and where; slow nodes | sort  | heat        |
//   | rank  node     stall  fetch | 0:00        10:00        20:00        30:00   ...         |
//   | node-07 (8 ranks, 8 slow)    | ##########################################              |
//   |   59  node-07  13.2%  3.0x   | ............................######.##.###               |
//   |   ...                                                                                   |
//   +---------------------------------------------------------------------------------------+
#pragma once

#include <imgui.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/job.h"
#include "ui/compare_dashboard.h"
#include "ui/dashboard.h"
#include "ui/snapshot_source.h"

namespace stallscope::ui {

enum class JobSort { kNode, kStall, kFetch, kRank };
enum class JobHeat { kStall, kFetch };

// The table alone, drawn into the current window.
class JobTable {
 public:
  explicit JobTable(const analysis::JobView& v);
  struct Pick {
    size_t rank = 0;      // index into the view's ranks
    bool beside = false;  // shift held: beside the rank opened last
  };
  // One frame of the table at `pos`, `size` large; the rank clicked, if one was.
  std::optional<Pick> draw(LayoutDump* dump, const ImVec2& pos, const ImVec2& size);
  void set_sort(JobSort s);
  JobSort sort() const { return sort_; }
  void set_heat(JobHeat h) { heat_ = h; }
  JobHeat heat() const { return heat_; }
  // The rows in the order drawn: node headers (node >= 0) and ranks (rank >= 0).
  struct Row {
    int node = -1;  // index into the view's nodes
    int rank = -1;  // index into the view's ranks
  };
  const std::vector<Row>& rows() const { return rows_; }
  // Where row `i` would be drawn in the last frame (its top, in screen coordinates, before scrolling
  // clips it), for tests that click it; and scrolling the rows to it.
  float row_y(size_t i) const { return rows_top_ + line_ * static_cast<float>(i) - scroll_; }
  void scroll_to(size_t i) { scroll_request_ = line_ * static_cast<float>(i); }

 private:
  void order();
  double cell(int rank, size_t period) const;  // the heat value of a rank's period, -1: none
  double node_cell(int node, size_t period) const;
  std::string rank_line(const analysis::JobRank& k) const;

  const analysis::JobView& v_;
  JobSort sort_ = JobSort::kNode;
  JobHeat heat_ = JobHeat::kStall;
  std::vector<Row> rows_;
  std::vector<std::vector<int>> node_ranks_;  // per node, its ranks' indexes
  float rows_top_ = 0, line_ = 16, scroll_ = 0;
  std::optional<float> scroll_request_;
};

// The whole window: the table, or the ranks opened from it.
class JobScreen {
 public:
  JobScreen(analysis::JobView view, std::string dir, SourceOptions so, UiFonts fonts = {});
  ~JobScreen();
  JobScreen(const JobScreen&) = delete;
  JobScreen& operator=(const JobScreen&) = delete;

  // One frame, filling the display.
  void draw(LayoutDump* dump);

  // Opens rank `a` (an index into view().ranks) alone, or with `b` beside it; back() shows the table.
  void open(size_t a, std::optional<size_t> b = std::nullopt);
  void back();
  bool showing_table() const { return !src_[0]; }
  const analysis::JobView& view() const { return v_; }
  JobTable& table() { return table_; }
  SnapshotSource* source(int i) { return src_[i].get(); }
  Dashboard* single() { return dash_.get(); }
  CompareDashboard* compare() { return cmp_.get(); }
  std::string title() const;

  // For the frame loop: the open sources' generations (summed), whether one is live or playing, and
  // whether a view asked for detail it did not hold.
  uint64_t generation() const;
  bool live() const;
  bool playing();
  bool wants_detail();
  // Asks the open sources for the detail their views want (after draw()).
  void ask_detail();

 private:
  analysis::JobView v_;
  std::string dir_;
  SourceOptions so_;
  UiFonts fonts_;
  JobTable table_;
  std::unique_ptr<SnapshotSource> src_[2];
  std::unique_ptr<Dashboard> dash_;
  std::unique_ptr<CompareDashboard> cmp_;
  std::optional<size_t> last_;  // the rank opened last: a shift-click puts the next one beside it
  size_t shown_[2] = {0, 0};
};

}  // namespace stallscope::ui
