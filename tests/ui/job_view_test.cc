// The dashboard's job view (ui/job_screen.h), headless, on a generated job whose slow node is
// known: the rows grouped by node with the slow node first, the other sorts, the heat metric;
// a click on a rank opens its recording's dashboard, a shift-click on another puts the two on
// one axis, and back() returns to the table.
#include <gtest/gtest.h>

#include "tests/ui/headless.h"
#include "tests/ui/sim_recording.h"
#include "tests/unit/test_util.h"
#include "ui/job_screen.h"

namespace stallscope {
namespace {

class JobScreenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::write_sim_job(dir_.path(), testing::small_job(5, 3));
    auto files = analysis::job_folder(dir_.path());
    ASSERT_TRUE(files.ok());
    auto v = analysis::job_view(*files);
    ASSERT_TRUE(v.ok()) << v.status().message();
    view_ = std::move(*v);
  }

  // A frame of the screen with the mouse at `mouse` (pressed with `press`, shift with `shift`).
  ui::LayoutDump frame(ui::JobScreen& s, ImVec2 mouse = ImVec2(-1000, -1000), bool press = false, bool shift = false) {
    ui::LayoutDump dump;
    ImGui::GetIO().KeyShift = shift;  // before the frame: NewFrame takes the modifiers from it
    h_.frame([&] { s.draw(&dump); }, mouse, press);
    return dump;
  }

  // Clicks the table's row `i` (two frames: pressed, then released).
  void click_row(ui::JobScreen& s, size_t i, bool shift = false) {
    frame(s);
    const ImVec2 at(400, s.table().row_y(i) + 5);
    frame(s, at, false, shift);
    frame(s, at, true, shift);
    if (!s.showing_table()) return;
    frame(s, at, false, shift);
  }

  testing::TempDir dir_;
  analysis::JobView view_;
  testing::Headless h_;
};

TEST_F(JobScreenTest, RowsGroupedByNodeTheSlowNodeFirstAndTheOtherSorts) {
  ui::JobScreen s(view_, dir_.path(), {});
  frame(s);
  ui::LayoutDump d = frame(s);
  EXPECT_EQ(d.state, "job");
  ASSERT_NE(d.panel("job"), nullptr);
  EXPECT_EQ(d.job_sort, "node");
  EXPECT_EQ(d.job_heat, "stall");
  ASSERT_EQ(d.job_rows.size(), 20u);  // every row fits: 4 nodes and 16 ranks
  EXPECT_EQ(d.job_rows[0], "node node-02: 4 ranks, 4 slow");
  for (size_t i = 1; i <= 4; ++i) {
    EXPECT_NE(d.job_rows[i].find(" node-02 "), std::string::npos) << d.job_rows[i];
    EXPECT_NE(d.job_rows[i].find(" slow"), std::string::npos) << d.job_rows[i];
  }
  EXPECT_EQ(d.job_rows[5].rfind("node ", 0), 0u) << d.job_rows[5];
  EXPECT_GT(d.job_cells, 20 * 5);
  ASSERT_GE(d.job_lines.size(), 3u);
  EXPECT_NE(d.job_lines[2].find("node-02"), std::string::npos) << d.job_lines[2];

  s.table().set_sort(ui::JobSort::kRank);
  d = frame(s);
  ASSERT_EQ(d.job_rows.size(), 16u);
  EXPECT_EQ(d.job_rows[0].rfind("rank 0 ", 0), 0u) << d.job_rows[0];
  EXPECT_EQ(d.job_rows[15].rfind("rank 15 ", 0), 0u) << d.job_rows[15];
  s.table().set_sort(ui::JobSort::kFetch);
  d = frame(s);
  for (size_t i = 0; i < 4; ++i) EXPECT_NE(d.job_rows[i].find(" node-02 "), std::string::npos) << d.job_rows[i];
  s.table().set_heat(ui::JobHeat::kFetch);
  d = frame(s);
  EXPECT_EQ(d.job_heat, "fetch");
}

TEST_F(JobScreenTest, AClickOpensTheRankAShiftClickPutsAnotherBesideItAndBackReturns) {
  ui::JobScreen s(view_, dir_.path(), {});
  frame(s);
  // Row 1: the slowest rank of the slow node.
  const ui::JobTable::Row row = s.table().rows()[1];
  ASSERT_GE(row.rank, 0);
  const analysis::JobRank& k = s.view().ranks[static_cast<size_t>(row.rank)];
  click_row(s, 1);
  ASSERT_FALSE(s.showing_table());
  ASSERT_NE(s.single(), nullptr);
  EXPECT_EQ(s.source(0)->path(), k.source);
  EXPECT_EQ(s.source(1), nullptr);
  ASSERT_TRUE(s.source(0)->wait_until(ui::SnapshotSource::settled, 60000));
  ui::LayoutDump d = frame(s);
  d = frame(s);
  EXPECT_EQ(d.state, "finished");
  EXPECT_EQ(d.lanes.size(), 5u);  // its main thread and 4 workers
  EXPECT_NE(s.title().find("rank " + std::to_string(k.rank)), std::string::npos) << s.title();

  s.back();
  ASSERT_TRUE(s.showing_table());
  // Shift-click row 6 (a rank of the next node): beside rank k, on one axis.
  const ui::JobTable::Row other = s.table().rows()[6];
  ASSERT_GE(other.rank, 0);
  click_row(s, 6, /*shift=*/true);
  ASSERT_FALSE(s.showing_table());
  ASSERT_NE(s.compare(), nullptr);
  EXPECT_EQ(s.source(0)->path(), k.source);
  EXPECT_EQ(s.source(1)->path(), s.view().ranks[static_cast<size_t>(other.rank)].source);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(s.source(i)->wait_until(ui::SnapshotSource::settled, 60000));
  frame(s);
  d = frame(s);
  EXPECT_EQ(d.state, "compare");
  ASSERT_EQ(d.sides.size(), 2u);
  EXPECT_EQ(d.sides[0].lanes.size(), 5u);
  EXPECT_EQ(d.sides[1].lanes.size(), 5u);
  s.back();
  d = frame(s);
  EXPECT_EQ(d.state, "job");
}

}  // namespace
}  // namespace stallscope
