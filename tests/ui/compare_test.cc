// The compare view drawn headlessly (an ImGui context without a window) from two simulated runs
// that start at different times and, in most tests, go at different speeds: both sides' panels and
// lanes are drawn, the time axis is aligned on each run's training start (step N of A above step N
// of B when they go at the same speed, drifting when not), the strip shows compare()'s verdict and
// figures, and a zoom, a pan, a fit and the playhead move both sides.
#include "analysis/compare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/json.h"
#include "tests/ui/headless.h"
#include "tests/ui/sim_recording.h"
#include "tests/unit/test_util.h"
#include "ui/analysis_view.h"
#include "ui/compare_dashboard.h"
#include "ui/format.h"
#include "ui/time_axis.h"
#include "ui/tune_set.h"

namespace stallscope {
namespace {

using namespace ui;
using testing::kMsNs;

// Where side `d`'s timeline draws time t (its axis starts kLabelWidth right of the lanes' left edge).
float x_of(const LayoutDump& d, double t) {
  const DumpRect& r = d.lanes.at(0).rect;
  const float x0 = r.x0 + kLabelWidth;
  return x0 + static_cast<float>((t - d.view_t0) / (d.view_t1 - d.view_t0)) * (r.x1 - x0);
}

bool inside(const DumpRect& in, const DumpRect& out) {
  return in.x0 >= out.x0 && in.y0 >= out.y0 && in.x1 <= out.x1 && in.y1 <= out.y1;
}

// The sides' visible ranges measured from their origins.
double rel_t0(const LayoutDump& d) { return d.view_t0 - d.origin_ns; }
double rel_t1(const LayoutDump& d) { return d.view_t1 - d.origin_ns; }

class CompareViewTest : public ::testing::Test {
 protected:
  // A: 4 workers, quick fetches (the loop's 10 ms steps set the pace); B starts 600 ms later in its
  // session with 2 workers and slower fetches: about half as fast. 2 x 100 steps each, so that
  // compare() has enough to give a verdict.
  void SetUp() override {
    a_opt_.workers = 4;
    a_opt_.batches = 100;
    a_opt_.fetch_ns = [](int, int) { return 30 * kMsNs; };
    b_opt_ = a_opt_;
    b_opt_.main_pid = 5000;
    b_opt_.start_ns = 700 * kMsNs;
    b_opt_.workers = 2;
    b_opt_.fetch_ns = [](int, int) { return 40 * kMsNs; };
    a_truth_ = testing::write_sim_recording(dir_.file("fast.db"), a_opt_);
    b_truth_ = testing::write_sim_recording(dir_.file("slow.db"), b_opt_);
    a_ = testing::load_snapshot(dir_.file("fast.db"));
    b_ = testing::load_snapshot(dir_.file("slow.db"));
    ASSERT_TRUE(a_->analysis && b_->analysis);
  }
  // The origin (the training window's start: the first DataLoader.__iter__) of each run, and where
  // a step (its hand-off) sits from it.
  static double origin(const testing::RecordingTruth& t) { return static_cast<double>(t.first_epoch_begin_ns); }

  testing::TempDir dir_;
  testing::SimOptions a_opt_, b_opt_;
  testing::RecordingTruth a_truth_, b_truth_;
  std::shared_ptr<const Snapshot> a_, b_;
};

TEST_F(CompareViewTest, BothSidesAreDrawnWithTheirPanelsAndLanes) {
  testing::Headless h;
  CompareDashboard cmp;
  const LayoutDump d = h.compare(cmp, *a_, *b_);
  EXPECT_EQ(d.state, "compare");
  const DumpPanel* strip = d.panel("compare");
  const DumpPanel* half_a = d.panel("A");
  const DumpPanel* half_b = d.panel("B");
  ASSERT_TRUE(strip && half_a && half_b);
  // The strip on top, then A above B, each the whole width and about half of the rest.
  EXPECT_EQ(strip->rect.y0, 0);
  EXPECT_LE(strip->rect.y1, half_a->rect.y0);
  EXPECT_LE(half_a->rect.y1, half_b->rect.y0);
  EXPECT_EQ(half_b->rect.y1, 1000);
  EXPECT_EQ(half_a->rect.x1 - half_a->rect.x0, 1600);
  EXPECT_NEAR(half_a->rect.y1 - half_a->rect.y0, half_b->rect.y1 - half_b->rect.y0, 1);

  ASSERT_EQ(d.sides.size(), 2u);
  const std::vector<std::vector<std::string>> lanes = {
      {"main thread", "pin memory", "worker 0", "worker 1", "worker 2", "worker 3"},
      {"main thread", "pin memory", "worker 0", "worker 1"}};
  for (size_t i = 0; i < 2; ++i) {
    const LayoutDump& s = d.sides[i];
    SCOPED_TRACE(s.side);
    EXPECT_EQ(s.side, i == 0 ? "A" : "B");
    EXPECT_EQ(s.state, "finished");
    const DumpRect& half = (i == 0 ? half_a : half_b)->rect;
    // The whole panel table, inside its half.
    for (const char* p : {"header", "headline", "timeline", "queue", "workers", "recommendations", "batch"}) {
      const DumpPanel* panel = s.panel(p);
      ASSERT_NE(panel, nullptr) << p;
      EXPECT_TRUE(inside(panel->rect, half)) << p;
      EXPECT_GT(panel->rect.y1 - panel->rect.y0, 30) << p;
    }
    // The compact places: a lower header, headline and queue, the timeline keeps the rest.
    EXPECT_EQ(s.panel("header")->rect.y1 - s.panel("header")->rect.y0, 32);
    EXPECT_EQ(s.panel("headline")->rect.y1 - s.panel("headline")->rect.y0, 72);
    EXPECT_EQ(s.panel("queue")->rect.y1 - s.panel("queue")->rect.y0, 84);
    EXPECT_GE(s.panel("timeline")->rect.y1 - s.panel("timeline")->rect.y0, 120);
    std::vector<std::string> names;
    for (const DumpLane& l : s.lanes) names.push_back(l.name);
    EXPECT_EQ(names, lanes[i]);
    // Lanes in view were drawn (the main thread's next() calls and steps, a worker's fetches).
    EXPECT_GT(s.lanes[0].drawn, 0);
    EXPECT_GT(s.lanes[2].drawn, 0);
    ASSERT_EQ(s.headline.size(), 4u);
    EXPECT_GT(s.queue_columns, 300);
    EXPECT_GT(s.heat_cells, 0);
    EXPECT_FALSE(s.recommendations.empty());
  }
  // The two timelines' time axes are the same pixels.
  EXPECT_EQ(d.sides[0].lanes[0].rect.x0, d.sides[1].lanes[0].rect.x0);
  EXPECT_EQ(d.sides[0].lanes[0].rect.x1, d.sides[1].lanes[0].rect.x1);
}

TEST_F(CompareViewTest, TheAxisIsAlignedOnEachRunsTrainingStart) {
  testing::Headless h;
  CompareDashboard cmp;
  const LayoutDump d = h.compare(cmp, *a_, *b_);
  ASSERT_EQ(d.sides.size(), 2u);
  const LayoutDump &a = d.sides[0], &b = d.sides[1];
  // Each side counts from its first dl.next, which is the analysis's training-window start.
  EXPECT_DOUBLE_EQ(a.origin_ns, origin(a_truth_));
  EXPECT_DOUBLE_EQ(b.origin_ns, origin(b_truth_));
  EXPECT_EQ(a.origin_ns, static_cast<double>(a_->analysis->report.window_start_ns));
  EXPECT_NE(a.origin_ns, b.origin_ns);  // B started 600 ms later in its session
  // The same span of time from each origin, covering both runs (the slower one is longer).
  EXPECT_NEAR(rel_t0(a), rel_t0(b), 1);
  EXPECT_NEAR(rel_t1(a), rel_t1(b), 1);
  EXPECT_NEAR(d.view_t0, rel_t0(a), 1);
  const double a_len = static_cast<double>(a_truth_.end_ns) - origin(a_truth_);
  const double b_len = static_cast<double>(b_truth_.end_ns) - origin(b_truth_);
  EXPECT_GT(b_len, a_len * 1.5);
  EXPECT_GE(rel_t1(a), std::max(a_len, b_len));
  EXPECT_LE(rel_t0(a), 0);
  // A time from the origins is at the same x in both timelines; B's step 100 is well to the right
  // of A's: the faster run visibly pulls ahead.
  for (double t : {0.0, 1e9, 2.5e9}) EXPECT_NEAR(x_of(a, a.origin_ns + t), x_of(b, b.origin_ns + t), 0.01) << t;
  const double step_a = static_cast<double>(a_truth_.batches[100].handed);
  const double step_b = static_cast<double>(b_truth_.batches[100].handed);
  EXPECT_GT(x_of(b, step_b) - x_of(a, step_a), 100);
}

TEST_F(CompareViewTest, RunsAtTheSameSpeedLineUpStepByStep) {
  // B as A, only later in its session and with other pids: each step above the other.
  testing::SimOptions same = a_opt_;
  same.main_pid = 7000;
  same.start_ns = 900 * kMsNs;
  const auto truth = testing::write_sim_recording(dir_.file("same.db"), same);
  const auto snap = testing::load_snapshot(dir_.file("same.db"));
  testing::Headless h;
  CompareDashboard cmp;
  const LayoutDump d = h.compare(cmp, *a_, *snap);
  for (size_t i : {size_t{1}, size_t{50}, size_t{100}, size_t{199}}) {
    const float xa = x_of(d.sides[0], static_cast<double>(a_truth_.batches[i].handed));
    const float xb = x_of(d.sides[1], static_cast<double>(truth.batches[i].handed));
    EXPECT_NEAR(xa, xb, 0.01) << "step " << i;
  }
  EXPECT_EQ(d.verdict, analysis::kVerdictNoDifference) << d.verdict_text;
}

TEST_F(CompareViewTest, TheStripShowsComparesVerdictAndFigures) {
  testing::Headless h;
  CompareDashboard cmp;
  LayoutDump d = h.compare(cmp, *a_, *b_);
  const analysis::Comparison c = analysis::compare(a_->analysis->report, b_->analysis->report);
  EXPECT_EQ(c.verdict, analysis::kVerdictSlower);  // the fixture: B is the slow one
  EXPECT_EQ(d.verdict, c.verdict);
  EXPECT_EQ(d.verdict_text, c.verdict_text);
  ASSERT_NE(cmp.comparison(), nullptr);
  EXPECT_EQ(cmp.comparison()->verdict_text, c.verdict_text);
  ASSERT_EQ(d.compare_figures.size(), 2u);
  const analysis::CompareSide* sides[2] = {&c.a, &c.b};
  for (size_t i = 0; i < 2; ++i) {
    const std::string& line = d.compare_figures[i];
    const analysis::CompareSide& s = *sides[i];
    EXPECT_EQ(line.rfind(i == 0 ? "A: fast.db" : "B: slow.db", 0), 0u) << line;
    ASSERT_TRUE(s.samples_per_s && s.step_time.p50_ms);
    EXPECT_NE(line.find("samples/s " + fmt_double(*s.samples_per_s, 0)), std::string::npos) << line;
    EXPECT_NE(line.find("stalled " + fmt_double(s.stall_fraction * 100, 1) + "%"), std::string::npos) << line;
    EXPECT_NE(line.find("step p50 " + fmt_duration(*s.step_time.p50_ms * 1e6)), std::string::npos) << line;
    EXPECT_NE(line.find("loader torch, " + std::to_string(i == 0 ? 4 : 2) + " workers"), std::string::npos) << line;
  }
  // Before the analyses: the runs' figures wait, and so does the verdict; it appears once they ran.
  const auto a0 = testing::load_snapshot(dir_.file("fast.db"), false);
  const auto b0 = testing::load_snapshot(dir_.file("slow.db"), false);
  CompareDashboard early;
  d = h.compare(early, *a0, *b0);
  EXPECT_EQ(d.verdict, "");
  EXPECT_NE(d.verdict_text.find("analysing"), std::string::npos) << d.verdict_text;
  EXPECT_NE(d.compare_figures.at(0).find("samples/s -"), std::string::npos) << d.compare_figures[0];
  EXPECT_EQ(d.sides.at(1).lanes.size(), 4u);  // the timelines do not wait
  d = h.compare(early, *a0, *b_);             // B analysed: its figures, still no verdict
  EXPECT_NE(d.compare_figures.at(1).find("samples/s " + fmt_double(*c.b.samples_per_s, 0)), std::string::npos);
  EXPECT_EQ(d.verdict, "");
  d = h.compare(early, *a_, *b_);
  EXPECT_EQ(d.verdict_text, c.verdict_text);
}

TEST_F(CompareViewTest, AZoomPanOrFitOnEitherSideMovesBoth) {
  testing::Headless h;
  CompareDashboard cmp;
  LayoutDump d = h.compare(cmp, *a_, *b_);
  const double w0 = rel_t1(d.sides[0]) - rel_t0(d.sides[0]);
  // The wheel over A's lanes zooms in around the pointer: both sides show the narrower span.
  const DumpLane& la = d.sides[0].lanes.at(2);
  const ImVec2 over_a((la.rect.x0 + kLabelWidth + la.rect.x1) / 2, la.rect.y0 + 8);
  const double t_at = rel_t0(d.sides[0]) + w0 * 0.5;
  d = h.compare(cmp, *a_, *b_, over_a, 1, false, 2.0f);
  d = h.compare(cmp, *a_, *b_, ImVec2(-1000, -1000), 1);
  const double w1 = rel_t1(d.sides[0]) - rel_t0(d.sides[0]);
  EXPECT_NEAR(w1, w0 * 0.64, w0 * 0.01);  // 0.8 per notch
  EXPECT_NEAR(rel_t0(d.sides[0]), rel_t0(d.sides[1]), 1);
  EXPECT_NEAR(rel_t1(d.sides[0]), rel_t1(d.sides[1]), 1);
  EXPECT_LT(rel_t0(d.sides[0]), t_at);
  EXPECT_GT(rel_t1(d.sides[0]), t_at);
  const auto [r0, r1] = cmp.range();
  EXPECT_NEAR(r0, rel_t0(d.sides[1]), 1);
  EXPECT_NEAR(r1, rel_t1(d.sides[1]), 1);
  // The same over B's queue plot, zooming out one notch: both again.
  const DumpPanel* qb = d.sides[1].panel("queue");
  ASSERT_NE(qb, nullptr);
  const ImVec2 over_b((qb->rect.x0 + kLabelWidth + qb->rect.x1) / 2, (qb->rect.y0 + qb->rect.y1) / 2);
  h.compare(cmp, *a_, *b_, over_b, 1, false, -1.0f);
  d = h.compare(cmp, *a_, *b_, ImVec2(-1000, -1000), 1);
  EXPECT_NEAR(rel_t1(d.sides[0]) - rel_t0(d.sides[0]), w1 / 0.8, w0 * 0.01);
  EXPECT_NEAR(rel_t0(d.sides[0]), rel_t0(d.sides[1]), 1);
  EXPECT_NEAR(rel_t1(d.sides[0]), rel_t1(d.sides[1]), 1);
  // Dragging B's lanes 100 px to the left pans both by the same time.
  {
    const DumpLane& lane = d.sides[1].lanes.at(0);
    const double ns_per_px =
        (rel_t1(d.sides[1]) - rel_t0(d.sides[1])) / static_cast<double>(lane.rect.x1 - (lane.rect.x0 + kLabelWidth));
    const double before = rel_t0(d.sides[0]);
    const ImVec2 from(lane.rect.x0 + kLabelWidth + 300, lane.rect.y0 + 8), to(from.x - 100, from.y);
    h.frame([&] { cmp.draw(*a_, *b_); }, from, true);
    h.frame([&] { cmp.draw(*a_, *b_); }, to, true);
    h.frame([&] { cmp.draw(*a_, *b_); }, to, false);
    d = h.compare(cmp, *a_, *b_, ImVec2(-1000, -1000), 1);
    EXPECT_NEAR(rel_t0(d.sides[0]) - before, 100 * ns_per_px, ns_per_px);
    EXPECT_NEAR(rel_t0(d.sides[0]), rel_t0(d.sides[1]), 1);
  }
  // The header's range as the app sets it (--range), then a double-click fits both runs again.
  cmp.set_range(0.5e9, 1.0e9);
  d = h.compare(cmp, *a_, *b_);
  EXPECT_NEAR(rel_t0(d.sides[0]), 0.5e9, 1);
  EXPECT_NEAR(rel_t1(d.sides[1]), 1.0e9, 1);
  EXPECT_NEAR(d.sides[0].view_t0, d.sides[0].origin_ns + 0.5e9, 1);
  const DumpLane& lb = d.sides[1].lanes.at(1);
  const ImVec2 on_b(lb.rect.x1 - 40, lb.rect.y0 + 8);
  h.frame([&] { cmp.draw(*a_, *b_); }, on_b, true);
  h.frame([&] { cmp.draw(*a_, *b_); }, on_b, false);
  h.frame([&] { cmp.draw(*a_, *b_); }, on_b, true);  // the second click of a double-click
  d = h.compare(cmp, *a_, *b_, ImVec2(-1000, -1000), 2);
  const double b_len = static_cast<double>(b_truth_.end_ns) - origin(b_truth_);
  EXPECT_GE(rel_t1(d.sides[0]), b_len);  // the longer run, whole, on both
  EXPECT_NEAR(rel_t0(d.sides[0]), rel_t0(d.sides[1]), 1);
  EXPECT_NEAR(rel_t1(d.sides[0]), rel_t1(d.sides[1]), 1);
}

TEST_F(CompareViewTest, ThePlayheadPlaysBothRunsFromTheirStarts) {
  testing::Headless h;
  CompareDashboard cmp;
  h.compare(cmp, *a_, *b_);
  cmp.set_playhead(0);  // both runs' training start
  cmp.set_range(-0.1e9, 0.4e9);
  cmp.axis().follow = true;
  cmp.axis().playing = true;
  cmp.axis().speed = 0.5f;
  LayoutDump d = h.compare(cmp, *a_, *b_, ImVec2(-1000, -1000), 60);  // one second at 60 Hz
  for (size_t i = 0; i < 2; ++i) {
    const ViewState& st = cmp.side(static_cast<int>(i)).state();
    EXPECT_NEAR(st.playhead - cmp.origin(static_cast<int>(i)), 0.5e9, 0.02e9) << i;
    EXPECT_TRUE(st.playing);
    EXPECT_LE(st.t0, st.playhead);  // followed
    EXPECT_GE(st.t1, st.playhead);
  }
  EXPECT_NEAR(cmp.side(0).state().playhead - cmp.origin(0), cmp.side(1).state().playhead - cmp.origin(1), 1);
  // Pausing from B's header pauses both.
  const DumpPanel* hb = d.sides[1].panel("header");
  ASSERT_NE(hb, nullptr);
  for (float x = hb->rect.x0 + 40; x < hb->rect.x0 + 400 && cmp.axis().playing; x += 6) {
    const ImVec2 at(x, (hb->rect.y0 + hb->rect.y1) / 2);
    h.frame([&] { cmp.draw(*a_, *b_); }, at, true);
    h.frame([&] { cmp.draw(*a_, *b_); }, at, false);
  }
  EXPECT_FALSE(cmp.axis().playing);
  h.compare(cmp, *a_, *b_);
  EXPECT_FALSE(cmp.side(0).state().playing);
  EXPECT_FALSE(cmp.side(1).state().playing);
}

TEST_F(CompareViewTest, ARunStillRecordingIsFollowedOnTheSharedAxis) {
  // B as a live recording (its source still polls it): the axis follows the newest data of either
  // run, measured from its origin, with the live window's width; A is drawn over the same span.
  Snapshot live = *b_;
  live.state = SourceState::kLive;
  testing::Headless h;
  CompareDashboard cmp;
  const LayoutDump d = h.compare(cmp, *a_, live);
  ASSERT_EQ(d.sides.size(), 2u);
  EXPECT_EQ(d.sides[0].state, "finished");
  EXPECT_EQ(d.sides[1].state, "live");
  const double newest = std::max(static_cast<double>(a_->timeline->end_ns) - origin(a_truth_),
                                 static_cast<double>(b_->timeline->end_ns) - origin(b_truth_));
  const double span = cmp.axis().live_span_ns;
  EXPECT_NEAR(rel_t1(d.sides[1]), newest + span * 0.02, 1e3);
  EXPECT_NEAR(rel_t1(d.sides[0]), rel_t1(d.sides[1]), 1);
  EXPECT_NEAR(rel_t0(d.sides[0]), rel_t0(d.sides[1]), 1);
  EXPECT_TRUE(cmp.axis().follow);
}

TEST_F(CompareViewTest, ARecordingThatCannotBeReadShowsWhyInItsHalf) {
  testing::write_file(dir_.file("junk.db"), std::string(4096, 'x'));
  const auto junk = testing::load_snapshot(dir_.file("junk.db"));
  ASSERT_EQ(junk->state, SourceState::kError);
  testing::Headless h;
  CompareDashboard cmp;
  const LayoutDump d = h.compare(cmp, *a_, *junk);
  ASSERT_EQ(d.sides.size(), 2u);
  EXPECT_EQ(d.sides[0].lanes.size(), 6u);  // A as usual, on its own
  EXPECT_NEAR(rel_t1(d.sides[0]), static_cast<double>(a_truth_.end_ns) - origin(a_truth_), 1e7);
  EXPECT_EQ(d.sides[1].state, "error");
  ASSERT_NE(d.sides[1].panel("message"), nullptr);
  EXPECT_TRUE(inside(d.sides[1].panel("message")->rect, d.panel("B")->rect));
  EXPECT_NE(d.sides[1].message.find("junk.db"), std::string::npos);
  EXPECT_NE(d.verdict_text.find("junk.db"), std::string::npos) << d.verdict_text;
}

// A `stallscope tune` folder (`stallscope ui DIR`): its tune.json as tune writes it, naming
// recordings by paths from elsewhere (the folder was moved), read as a set and drawn as the table
// over the compare view; a click on a row asks for that run as B, a click on A or B does not.
class TuneSetViewTest : public CompareViewTest {
 protected:
  void SetUp() override {
    CompareViewTest::SetUp();
    // The sim recordings as the folder's runs: 00 the baseline (slow), 01 and 02 (fast; 02 won).
    ASSERT_EQ(std::rename(dir_.file("slow.db").c_str(), dir_.file("00-baseline.db").c_str()), 0);
    ASSERT_EQ(std::rename(dir_.file("fast.db").c_str(), dir_.file("01-num_workers-4.db").c_str()), 0);
    testing::write_sim_recording(dir_.file("02-num_workers-4_prefetch_factor-4.db"), a_opt_);
    auto run = [](const char* file, const char* args, const char* status, double sps, double pred) {
      Json t = Json::object();
      t["name"] = args;
      t["loader"] = "tuned";
      t["arguments"] = args;
      t["status"] = status;
      t["steps"] = 60;
      t["measured"] = {{"samples_per_s", sps}, {"stall", 0.25}, {"window_s", 1.0}};
      t["predicted"] = {{"samples_per_s", pred}, {"stall", 0.2}};
      t["recording"] = std::string("/somewhere/else/") + file;
      return t;
    };
    Json doc = Json::object();
    doc["schema"] = "stallscope.tune/1";
    doc["baseline"] = run("00-baseline.db", "num_workers=2", "measured", 300, 310);
    doc["baseline"]["loader"] = "torch";
    doc["candidates"] = Json::array(
        {run("01-num_workers-4.db", "num_workers=4", "stopped early", 500, 650),
         run("02-num_workers-4_prefetch_factor-4.db", "num_workers=4, prefetch_factor=4", "measured", 610, 640)});
    doc["winner"] = {{"name", "x"}, {"recording", "/somewhere/else/02-num_workers-4_prefetch_factor-4.db"}};
    std::ofstream(dir_.file("tune.json")) << json::write(doc);
  }
};

TEST_F(TuneSetViewTest, TheFolderReadsAsASetFoundWhereItIsNow) {
  auto set = load_tune_set(dir_.path() + "/");
  ASSERT_TRUE(set.ok()) << set.status().message();
  ASSERT_EQ(set->runs.size(), 3u);
  EXPECT_EQ(set->runs[0].recording, dir_.file("00-baseline.db"));
  EXPECT_EQ(set->runs[2].recording, dir_.file("02-num_workers-4_prefetch_factor-4.db"));
  EXPECT_EQ(set->runs[1].name, "01");
  EXPECT_EQ(set->runs[1].file, "01-num_workers-4");
  EXPECT_TRUE(set->runs[0].baseline);
  EXPECT_EQ(set->winner, 2);
  EXPECT_TRUE(set->runs[2].winner && !set->runs[1].winner);
  EXPECT_EQ(set->first_b(), 2);
  EXPECT_EQ(set->find("1"), 1);
  EXPECT_EQ(set->find("01"), 1);
  EXPECT_EQ(set->find("01-num_workers-4"), 1);
  EXPECT_EQ(set->find("some/dir/01-num_workers-4.db"), 1);
  EXPECT_EQ(set->find("3"), std::nullopt);
  EXPECT_EQ(set->find("num_workers"), std::nullopt);
  ASSERT_TRUE(set->runs[1].samples_per_s && set->runs[1].predicted_samples_per_s);
  EXPECT_EQ(*set->runs[1].samples_per_s, 500);
  EXPECT_EQ(set->runs[1].status, "stopped early");
  // The baseline won: B is the first other measured run.
  TuneSet won = *set;
  won.winner = 0;
  EXPECT_EQ(won.first_b(), 1);
  // Not a tune folder, or not a tune document: one line that says what to pass.
  testing::TempDir empty;
  auto none = load_tune_set(empty.path());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("without tune.json"), std::string::npos);
  std::ofstream(empty.file("tune.json")) << R"({"schema": "something/1"})";
  auto other = load_tune_set(empty.path());
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("not a tune document"), std::string::npos);
}

TEST_F(TuneSetViewTest, TheTableListsEveryRunAndAClickShowsOneAsB) {
  auto set = load_tune_set(dir_.path());
  ASSERT_TRUE(set.ok()) << set.status().message();
  auto base = testing::load_snapshot(set->runs[0].recording);
  auto won = testing::load_snapshot(set->runs[2].recording);
  testing::Headless h;
  CompareDashboard cmp;
  cmp.set_tune(*set, set->first_b());
  LayoutDump d = h.compare(cmp, *base, *won);
  // The table on top, then the strip and the halves below it.
  const DumpPanel* table = d.panel("tune");
  ASSERT_TRUE(table && d.panel("compare") && d.panel("A") && d.panel("B"));
  EXPECT_EQ(table->rect.y0, 0);
  EXPECT_LE(table->rect.y1, d.panel("compare")->rect.y0);
  EXPECT_LE(d.panel("compare")->rect.y1, d.panel("A")->rect.y0);
  EXPECT_EQ(d.panel("B")->rect.y1, 1000);
  ASSERT_EQ(d.tune_rows.size(), 3u);
  EXPECT_EQ(d.tune_rows[0],
            "A: 00 | num_workers=2 (the script's) | samples/s 300 | predicted 310 | stall 25% | measured");
  EXPECT_EQ(d.tune_rows[1],
            " : 01 | num_workers=4 | samples/s 500 | predicted 650 | stall 25% | stopped early (60 steps)");
  EXPECT_EQ(d.tune_rows[2],
            "B: 02 | num_workers=4, prefetch_factor=4 | samples/s 610 | predicted 640 | stall 25% | measured  winner");
  EXPECT_EQ(d.tune_b, 2);
  EXPECT_EQ(d.sides.size(), 2u);
  ASSERT_NE(cmp.comparison(), nullptr);

  // Where row i of the table is drawn (a heading, then a row a line high each).
  const float line = (table->rect.y1 - table->rect.y0 - 10) / 4;
  auto row_at = [&](int i) { return ImVec2(400, table->rect.y0 + 5 + line * (static_cast<float>(i) + 1.5f)); };
  // A click on A's row or on B's changes nothing.
  for (int i : {0, 2}) {
    h.frame([&] { cmp.draw(*base, *won); }, row_at(i), true);
    h.frame([&] { cmp.draw(*base, *won); }, row_at(i), false);
    EXPECT_EQ(cmp.take_pick(), std::nullopt) << i;
  }
  // A click on run 01 asks for it as B, once.
  h.frame([&] { cmp.draw(*base, *won); }, row_at(1), true);
  h.frame([&] { cmp.draw(*base, *won); }, row_at(1), false);
  EXPECT_EQ(cmp.take_pick(), 1);
  EXPECT_EQ(cmp.take_pick(), std::nullopt);
  // The app opens it and says so: B is run 01, drawn from its own recording, the axis kept.
  const auto range = cmp.range();
  cmp.set_tune_b(1);
  EXPECT_EQ(cmp.comparison(), nullptr);  // until B's analysis is in
  auto other = testing::load_snapshot(set->runs[1].recording);
  d = h.compare(cmp, *base, *other);
  EXPECT_EQ(d.tune_b, 1);
  EXPECT_EQ(d.tune_rows[1].substr(0, 3), "B: ");
  EXPECT_EQ(d.tune_rows[2].substr(0, 3), " : ");
  EXPECT_NE(d.compare_figures.at(1).find("01-num_workers-4.db"), std::string::npos);
  EXPECT_NE(cmp.comparison(), nullptr);
  EXPECT_NEAR(cmp.range().first, range.first, 1);
  EXPECT_NEAR(cmp.range().second, range.second, 1);
}

}  // namespace
}  // namespace stallscope
