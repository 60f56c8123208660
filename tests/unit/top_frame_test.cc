// `stallscope top`'s layout (cli/top_frame.h): the sparkline's levels, cutting by columns (UTF-8
// counted as one), and frames that fit a terminal of any size, the process table giving way first.
#include "cli/top_frame.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace stallscope::cli {
namespace {

TopFrame busy_frame(int workers) {
  TopFrame f;
  f.source = "/tmp/some/where/run.db";
  f.command = "python3 train.py --epochs 3";
  f.pid = 4242;
  f.state = TopFrame::State::kLive;
  f.recorded_s = 75;
  metrics::Figures& m = f.figures;
  m.training_seen = true;
  m.training_s = 70;
  m.stall_s = 35;
  m.stall_fraction = 0.5;
  m.stall_by_cause_s = {{"data_wait", 34}, {"loader_start", 1}};
  m.recent_stall_fraction = 0.623;
  m.samples_per_s = 412.5;
  m.recent_step_ms = 38.8;
  m.steps = 1234;
  m.queue_seen = true;
  m.batches_ready = 2;
  m.batches_in_flight = 6;
  m.training_loader = 1;
  m.processes.push_back({100, "train", 0.98, 0.021, {}, {}, {}, {}, {}, 1});
  for (int i = 0; i < workers; ++i) m.processes.push_back({200 + i, "worker", 0.95, 0.12, {}, {}, {}, 0, i, 1});
  for (int i = 0; i < kTopHistoryS; ++i) f.ready_history.push_back(i < 5 ? std::nullopt : std::optional<double>(i % 8));
  TopFrame::Analysis a;
  a.mode = "cpu";
  a.window_s = 60;
  a.causes = {{"data_wait", 0.97}, {"loader_start", 0.03}};
  a.severity = "high";
  a.advice = "set num_workers=6: the loop waits for data 62 % of the time while the 2 workers are busy";
  f.analysis = a;
  return f;
}

bool contains(const std::vector<std::string>& lines, const std::string& what) {
  for (const std::string& l : lines) {
    if (l.find(what) != std::string::npos) return true;
  }
  return false;
}

TEST(TopFrame, SparklineLevelsAndGaps) {
  EXPECT_EQ(sparkline({0.0, 4.0, 8.0, std::nullopt}, 8, 10, false), "_=# ");
  EXPECT_EQ(sparkline({0.0, 8.0}, 8, 10, true), "\u2581\u2588");
  // Values above the scale are drawn at the top; the newest `width` are kept.
  EXPECT_EQ(sparkline({1.0, 2.0, 30.0}, 2, 2, false), "##");
  // A scale under 1 is 1: a queue of zeros and ones is not drawn as full.
  EXPECT_EQ(sparkline({0.0, 0.5}, 0.5, 2, false), "_=");
}

TEST(TopFrame, FitCountsUtf8AsOneColumn) {
  EXPECT_EQ(fit("abcdef", 3), "abc");
  EXPECT_EQ(fit("a\u00b7b\u2588c", 4), "a\u00b7b\u2588");
  EXPECT_EQ(columns("a\u00b7b\u2588c"), 5u);
  EXPECT_EQ(fit("ab", 5), "ab");
}

TEST(TopFrame, FitsEightyByTwentyFour) {
  for (bool utf8 : {true, false}) {
    const std::vector<std::string> lines = render_top(busy_frame(4), 80, 24, utf8);
    EXPECT_LE(lines.size(), 24u);
    for (const std::string& l : lines) EXPECT_LE(columns(l), 80u) << l;
    EXPECT_TRUE(contains(lines, "62.3% of the last 10 s waiting for data"));
    EXPECT_TRUE(contains(lines, "data_wait 97%"));
    EXPECT_TRUE(contains(lines, "412.5 samples/s"));
    EXPECT_TRUE(contains(lines, "step 38.8 ms"));
    EXPECT_TRUE(contains(lines, "2 batches ready"));
    EXPECT_TRUE(contains(lines, "worker 3"));
    EXPECT_TRUE(contains(lines, "[high] set num_workers=6"));
    EXPECT_TRUE(contains(lines, "q quit"));
    EXPECT_EQ(lines.back().find("q quit"), 0u);
  }
}

TEST(TopFrame, ManyWorkersGiveWayToTheFooter) {
  const std::vector<std::string> lines = render_top(busy_frame(32), 80, 24, true);
  ASSERT_EQ(lines.size(), 24u);
  EXPECT_TRUE(contains(lines, "more processes"));
  EXPECT_EQ(lines.back().find("q quit"), 0u);
  // The bottom-right cell is left empty.
  for (const std::string& l : render_top(busy_frame(32), 20, 24, true)) EXPECT_LE(columns(l), 20u);
  EXPECT_LE(columns(render_top(busy_frame(32), 20, 24, true).back()), 19u);
}

TEST(TopFrame, NarrowAndShortTerminalsCutNeverWrap) {
  for (int cols : {1, 10, 40, 79}) {
    for (int rows : {1, 3, 12}) {
      const std::vector<std::string> lines = render_top(busy_frame(8), cols, rows, true);
      EXPECT_LE(lines.size(), static_cast<size_t>(rows));
      for (const std::string& l : lines) {
        EXPECT_LE(columns(l), static_cast<size_t>(cols));
        EXPECT_EQ(l.find('\n'), std::string::npos);
      }
    }
  }
}

TEST(TopFrame, OnceHasEveryProcessAndNoLimit) {
  const std::vector<std::string> lines = render_top(busy_frame(32), 80, 0, false);
  EXPECT_TRUE(contains(lines, "worker 31"));
  EXPECT_FALSE(contains(lines, "more processes"));
}

TEST(TopFrame, ALongPathGivesWayToTheState) {
  TopFrame f = busy_frame(2);
  f.source = "/very/long/path/" + std::string(100, 'x') + "/run.db";
  for (bool utf8 : {true, false}) {
    const std::string head = render_top(f, 80, 24, utf8).front();
    EXPECT_LE(columns(head), 80u);
    EXPECT_NE(head.find("xx/run.db"), std::string::npos) << head;
    EXPECT_NE(head.find("live, 1:15 recorded"), std::string::npos) << head;
    EXPECT_NE(head.find(utf8 ? "\u2026" : "..."), std::string::npos) << head;
  }
}

TEST(TopFrame, FinishedAndEmptyStatesSaySo) {
  TopFrame f = busy_frame(2);
  f.state = TopFrame::State::kFinished;
  EXPECT_TRUE(contains(render_top(f, 120, 24, false), "finished"));
  TopFrame empty;
  empty.source = "x.db";
  empty.state = TopFrame::State::kLive;
  const std::vector<std::string> lines = render_top(empty, 80, 24, false);
  EXPECT_TRUE(contains(lines, "no DataLoader training loop seen yet"));
  EXPECT_TRUE(contains(lines, "analysing"));
}

}  // namespace
}  // namespace stallscope::cli
