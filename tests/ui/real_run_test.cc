// A real recording: `stallscope run` on one of the examples (a torch DataLoader with two worker
// processes), then the dashboard's model and views on it. Skipped when python3 cannot import torch.
#include <gtest/gtest.h>

#include "tests/ui/headless.h"
#include "tests/unit/test_util.h"
#include "ui/analysis_view.h"
#include "ui/dashboard.h"
#include "ui/time_axis.h"

namespace stallscope {
namespace {

TEST(RealRunTest, ARecordedDataLoaderRunShowsItsWorkersAndBatches) {
  const auto probe = testing::run_process({"python3", "-c", "import torch"}, 60000);
  if (probe.exit_code != 0) GTEST_SKIP() << "python3 cannot import torch: no real DataLoader run to record";
  testing::TempDir dir;
  const std::string db = dir.file("real.db");
  const auto run = testing::run_process({STALLSCOPE_BIN, "run", "-q", "-o", db, "--", "python3",
                                         std::string(STALLSCOPE_SOURCE_DIR) + "/examples/slow_getitem.py", "--workers",
                                         "2", "--epochs", "1", "--batches", "12"},
                                        120000);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto snap = testing::load_snapshot(db);
  ASSERT_EQ(snap->state, ui::SourceState::kFinished) << snap->error;
  std::vector<std::string> names;
  for (const ui::Lane& l : snap->timeline->lanes) names.push_back(l.name);
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(names[0], "main thread");
  EXPECT_EQ(names[1], "worker 0");
  EXPECT_EQ(names[2], "worker 1");
  ASSERT_TRUE(snap->analysis);
  EXPECT_EQ(snap->analysis->report.steps, 12);

  // Hover the middle of worker 1's first fetch: its batch, with the life the analysis rebuilt.
  const ui::Lane& w1 = snap->timeline->lanes[2];
  const ui::Row& fetches = w1.tracks.at(0).rows.at(0);
  ASSERT_GT(fetches.size(), 0u);
  const ui::Item& f = fetches[0];
  testing::Headless h;
  ui::Dashboard dash;
  dash.state().t0 = static_cast<double>(f.start_ns) - 20e6;
  dash.state().t1 = static_cast<double>(f.end_ns) + 20e6;
  dash.state().range_set = true;
  dash.state().follow = false;
  ui::LayoutDump d = h.dashboard(dash, *snap);
  const ui::DumpLane& lane = d.lanes.at(2);
  const float x0 = lane.rect.x0 + ui::kLabelWidth;
  const float x =
      x0 + static_cast<float>((static_cast<double>(f.start_ns + f.end_ns) / 2 - d.view_t0) / (d.view_t1 - d.view_t0)) *
               (lane.rect.x1 - x0);
  d = h.dashboard(dash, *snap, ImVec2(x, lane.rect.y0 + 8), 3);
  ASSERT_TRUE(d.hover && d.hover->batch) << (d.hover ? d.hover->item : "no hover");
  EXPECT_EQ(d.hover->worker, 1);
  EXPECT_EQ(d.hover->index, f.a0);  // a worker's dl.fetch carries the batch index in arg0
  EXPECT_EQ(d.hover->worker_pid, w1.tracks[0].pid);
  EXPECT_GE(d.hover->life.size(), 4u);
}

}  // namespace
}  // namespace stallscope
