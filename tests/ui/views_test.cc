// The views drawn headlessly (an ImGui context without a window) from simulated recordings, with
// assertions on the layout dump: panels, lanes, what was drawn at a zoom level, the batch found
// under a simulated mouse, the recommendations listed and what clicking one does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "analysis/format.h"
#include "storage/writer.h"
#include "tests/ui/headless.h"
#include "tests/ui/sim_recording.h"
#include "tests/unit/test_util.h"
#include "ui/analysis_view.h"
#include "ui/dashboard.h"
#include "ui/format.h"
#include "ui/row_draw.h"
#include "ui/time_axis.h"

namespace stallscope {
namespace {

using namespace ui;
using testing::kMsNs;

const DumpLane* lane_named(const LayoutDump& d, const std::string& name) {
  for (const DumpLane& l : d.lanes) {
    if (l.name == name) return &l;
  }
  return nullptr;
}

class ViewsTest : public ::testing::Test {
 protected:
  // 4 workers, pin memory, 2 epochs of 40 batches, workers re-created each epoch; every 7th fetch
  // is slow, so the loop stalls now and then.
  void SetUp() override {
    opt_.workers = 4;
    opt_.epochs = 2;
    opt_.batches = 40;
    opt_.fetch_ns = [](int, int b) { return (b % 7 == 6 ? 90 : 30) * kMsNs; };
    truth_ = testing::write_sim_recording(dir_.file("run.db"), opt_);
    snap_ = testing::load_snapshot(dir_.file("run.db"));
    ASSERT_TRUE(snap_->analysis);
  }
  void zoom(Dashboard& d, int64_t t0, int64_t t1) {
    d.state().t0 = static_cast<double>(t0);
    d.state().t1 = static_cast<double>(t1);
    d.state().range_set = true;
    d.state().follow = false;
  }
  testing::TempDir dir_;
  testing::SimOptions opt_;
  testing::RecordingTruth truth_;
  std::shared_ptr<const Snapshot> snap_;
};

TEST_F(ViewsTest, PanelsAndLanesAreLaidOut) {
  testing::Headless h;
  Dashboard dash;
  const LayoutDump d = h.dashboard(dash, *snap_);
  for (const char* p : {"header", "headline", "timeline", "queue", "workers", "recommendations", "batch"}) {
    const DumpPanel* panel = d.panel(p);
    ASSERT_NE(panel, nullptr) << p;
    EXPECT_GT(panel->rect.x1 - panel->rect.x0, 100) << p;
    EXPECT_GT(panel->rect.y1 - panel->rect.y0, 30) << p;
  }
  std::vector<std::string> names;
  for (const DumpLane& l : d.lanes) names.push_back(l.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"main thread", "pin memory", "worker 0", "worker 1", "worker 2", "worker 3"}));
  EXPECT_EQ(d.lanes[0].role, "main");
  EXPECT_EQ(d.lanes[1].role, "pin");
  EXPECT_EQ(d.lanes[2].role, "worker");
  EXPECT_EQ(d.lanes[2].rows, 2);
  // Lanes stack downwards inside the timeline panel.
  const DumpPanel* tl = d.panel("timeline");
  for (size_t i = 1; i < d.lanes.size(); ++i) EXPECT_GT(d.lanes[i].rect.y0, d.lanes[i - 1].rect.y0);
  EXPECT_GE(d.lanes[0].rect.y0, tl->rect.y0);
  // The whole run is shown at first (a finished recording), with the headline's four cards.
  EXPECT_EQ(d.state, "finished");
  EXPECT_LE(d.view_t0, static_cast<double>(truth_.batches.front().sent));
  EXPECT_GE(d.view_t1, static_cast<double>(truth_.batches.back().handed));
  ASSERT_EQ(d.headline.size(), 4u);
  EXPECT_NE(d.headline[0].find("throughput"), std::string::npos);
  EXPECT_NE(d.headline[1].find("stalled"), std::string::npos);
  EXPECT_NE(d.headline[2].find("loop computing"), std::string::npos);  // CPU mode: no GPU activity
  EXPECT_NE(d.headline[3].find("ready"), std::string::npos);
  // Queue plot, worker heat strip (training process + 4 workers), stall shading.
  EXPECT_GT(d.queue_columns, 500);
  EXPECT_GT(d.queue_empty_drawn, 0);
  EXPECT_EQ(d.heat_rows, 5);
  EXPECT_GE(d.heat_cells, opt_.epochs * opt_.batches);  // fetch time: a cell wherever a fetch starts
  EXPECT_GT(d.stall_rects, 0);
}

// The header says how large the file is and, over 10 s of data, how fast it grows per hour: what a
// long run will need on disk.
TEST_F(ViewsTest, TheHeaderGivesTheFileSizeAndItsGrowthPerHour) {
  testing::Headless h;
  Dashboard dash;
  auto snap = std::make_shared<Snapshot>(*snap_);
  snap->file_bytes = 3 * 1024 * 1024;
  const double covered_s = static_cast<double>(snap->timeline->end_ns - snap->timeline->first_ns) / 1e9;
  ASSERT_LT(covered_s, 10);
  LayoutDump d = h.dashboard(dash, *snap);
  EXPECT_EQ(d.header_stats.rfind("3.00 MiB, ", 0), 0u) << d.header_stats;  // too short for a rate
  EXPECT_EQ(d.header_stats.find("per hour"), std::string::npos) << d.header_stats;
  auto tl = std::make_shared<Timeline>(*snap->timeline);
  tl->end_ns = tl->first_ns + 1800 * 1000 * kMsNs;  // half an hour of data
  snap->timeline = tl;
  d = h.dashboard(dash, *snap);
  EXPECT_EQ(d.header_stats.rfind("3.00 MiB (6.00 MiB per hour), ", 0), 0u) << d.header_stats;
  EXPECT_NE(d.header_stats.find(" rows, read in "), std::string::npos) << d.header_stats;
  snap->state = SourceState::kLoading;  // part of the time read: no rate yet
  d = h.dashboard(dash, *snap);
  EXPECT_EQ(d.header_stats.rfind("3.00 MiB, ", 0), 0u) << d.header_stats;
  snap->state = SourceState::kFinished;
  // A narrow window keeps the size and drops the rest rather than drawing over the controls.
  {
    testing::Headless narrow(1000, 800);
    Dashboard dash2;
    const LayoutDump n = narrow.dashboard(dash2, *snap);
    EXPECT_EQ(n.header_stats.rfind("3.00 MiB", 0), 0u) << n.header_stats;
    EXPECT_EQ(n.header_stats.find("analysed"), std::string::npos) << n.header_stats;
  }
  snap->file_bytes = -1;  // not known: no size
  d = h.dashboard(dash, *snap);
  EXPECT_EQ(d.header_stats.find("MiB"), std::string::npos) << d.header_stats;
  EXPECT_NE(d.header_stats.find(" rows"), std::string::npos) << d.header_stats;
}

// The cards' big figure: the run's in a replay, where a first look reads it as the run's result;
// the last 2 s while following a live run. The other figure is the smaller line, labelled.
TEST_F(ViewsTest, TheHeadlineShowsTheRunInAReplayAndTheLastSecondsLive) {
  testing::Headless h;
  Dashboard replay_dash, live_dash;
  const LayoutDump replay = h.dashboard(replay_dash, *snap_);
  Snapshot following = *snap_;
  following.state = SourceState::kLive;
  const LayoutDump live = h.dashboard(live_dash, following);
  ASSERT_EQ(replay.state, "finished");
  ASSERT_EQ(live.state, "live");
  ASSERT_EQ(replay.cards.size(), 4u);
  ASSERT_EQ(live.cards.size(), 4u);
  const analysis::Report& rep = snap_->analysis->report;
  ASSERT_TRUE(rep.samples_per_s && rep.queue.mean_ready);
  const std::string run[] = {fmt_double(*rep.samples_per_s, 0) + " samples/s",
                             fmt_double(rep.stall.fraction * 100, 1) + "%", "",
                             fmt_double(*rep.queue.mean_ready, 1) + " in queue"};
  for (size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(replay.cards[i].label);
    if (!run[i].empty()) {
      EXPECT_EQ(replay.cards[i].big, run[i]);
    }
    EXPECT_EQ(replay.cards[i].scope, "run");
    EXPECT_NE(replay.cards[i].small.find("last 2 s: "), std::string::npos) << replay.cards[i].small;
    EXPECT_EQ(live.cards[i].scope, "last 2 s");
    EXPECT_EQ(live.cards[i].small.rfind("run: " + replay.cards[i].big, 0), 0u) << live.cards[i].small;
    const std::string& big = replay.cards[i].big;  // the headline lines are the big figures too
    EXPECT_EQ(replay.headline[i].rfind(replay.cards[i].label + ": " + big.substr(0, big.find_first_of(" %")), 0), 0u);
  }
  // Live, the stall card's big figure is the last 2 s (whole percent), not the run's (one decimal).
  EXPECT_EQ(live.cards[1].big.find('.'), std::string::npos) << live.cards[1].big;
  EXPECT_NE(replay.cards[1].big.find('.'), std::string::npos) << replay.cards[1].big;
}

// A long recording's analysis covers its latest part (as `stallscope report`): the headline's
// cards say since when, and the whole run's over-time totals are the same as the full analysis's.
TEST_F(ViewsTest, ALongRecordingsHeadlineSaysSinceWhenItsFiguresCount) {
  const std::string path = dir_.file("long.db");
  testing::SimOptions o = opt_;
  o.epochs = 6;
  o.commit_rows = 400;  // many drains, so that the latest rows can be counted from them
  testing::write_sim_recording(path, o);
  auto whole = run_analysis(path);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  ASSERT_FALSE((*whole)->report.detail_from_ns.has_value());
  analysis::DetailBudget budget;
  budget.max_rows = 2000;
  auto part = run_analysis(path, budget);
  ASSERT_TRUE(part.ok()) << part.status().message();
  const analysis::Report& rep = (*part)->report;
  ASSERT_TRUE(rep.detail_from_ns.has_value());
  EXPECT_GT(*rep.detail_from_ns, (*whole)->report.window_start_ns);
  EXPECT_LT(rep.steps, (*whole)->report.steps);
  ASSERT_TRUE(rep.over_time.available) << rep.over_time.note;
  EXPECT_EQ(rep.over_time.total.next_calls, (*whole)->report.over_time.total.next_calls);
  EXPECT_DOUBLE_EQ(rep.over_time.total.wait_s, (*whole)->report.over_time.total.wait_s);

  auto snap = std::make_shared<Snapshot>(*testing::load_snapshot(path, /*analysis=*/false));
  snap->analysis = *part;
  testing::Headless h;
  Dashboard dash;
  const LayoutDump d = h.dashboard(dash, *snap);
  ASSERT_EQ(d.cards.size(), 4u);
  for (const auto& c : d.cards) EXPECT_EQ(c.scope, "since " + analysis::clock_time(*rep.detail_from_ns, 0)) << c.label;
}

TEST_F(ViewsTest, ThePanelTableLaysOutDrawsAndTimesEveryPanel) {
  // Each panel of the table, in its order, is in the layout dump and the frame times by its name.
  std::vector<std::string> table;
  for (const Panel& p : dashboard_panels()) table.push_back(p.name);
  EXPECT_EQ(table, (std::vector<std::string>{"header", "headline", "timeline", "queue", "workers", "recommendations",
                                             "batch"}));
  struct Box {
    const char* name;
    DumpRect r;
  };
  auto check = [&](float w, float h, const std::vector<Box>& want) {
    testing::Headless hl(w, h);
    Dashboard dash;
    const LayoutDump d = hl.dashboard(dash, *snap_);
    std::vector<std::string> dumped, timed;
    for (const DumpPanel& p : d.panels) {
      if (p.name != "scrub") dumped.push_back(p.name);  // the header's scrub bar
    }
    for (const PanelTime& t : dash.last_times().panels) timed.push_back(t.name);
    EXPECT_EQ(dumped, table);
    EXPECT_EQ(timed, table);
    // Where they sit (the trainer and 4 workers: five worker strips).
    for (const Box& b : want) {
      const DumpPanel* p = d.panel(b.name);
      ASSERT_NE(p, nullptr) << b.name;
      EXPECT_EQ(p->rect.x0, b.r.x0) << b.name << " in " << w << "x" << h;
      EXPECT_EQ(p->rect.y0, b.r.y0) << b.name << " in " << w << "x" << h;
      EXPECT_EQ(p->rect.x1, b.r.x1) << b.name << " in " << w << "x" << h;
      EXPECT_EQ(p->rect.y1, b.r.y1) << b.name << " in " << w << "x" << h;
    }
  };
  check(1600, 1000,
        {{"header", {0, 0, 1600, 40}},
         {"headline", {6, 46, 1594, 142}},
         {"timeline", {6, 148, 1188, 732}},
         {"queue", {6, 738, 1188, 862}},
         {"workers", {6, 868, 1188, 994}},
         {"recommendations", {1194, 148, 1594, 621}},
         {"batch", {1194, 627, 1594, 994}}});
  // A small window: the side column at its narrowest, the timeline gets what is left.
  check(1000, 700,
        {{"header", {0, 0, 1000, 40}},
         {"headline", {6, 46, 994, 142}},
         {"timeline", {6, 148, 688, 432}},
         {"queue", {6, 438, 688, 562}},
         {"workers", {6, 568, 688, 694}},
         {"recommendations", {694, 148, 994, 453}},
         {"batch", {694, 459, 994, 694}}});
}

TEST_F(ViewsTest, ZoomingOutMergesAndZoomingInDrawsEveryItemWithLabels) {
  // A longer run: 2 x 1000 batches over ~25 s in ~1000 px, so that fetches are a pixel or two wide.
  testing::SimOptions o = opt_;
  o.batches = 1000;
  o.counters = false;
  const auto truth = testing::write_sim_recording(dir_.file("long.db"), o);
  auto snap = testing::load_snapshot(dir_.file("long.db"));
  testing::Headless h;
  Dashboard dash;
  LayoutDump whole = h.dashboard(dash, *snap);
  const DumpLane* w0 = lane_named(whole, "worker 0");
  ASSERT_NE(w0, nullptr);
  const int64_t items_w0 = 2 * (o.epochs * o.batches / o.workers);  // fetch + collate
  EXPECT_GT(w0->merged_groups, 0);
  EXPECT_LT(w0->drawn * 4, items_w0);  // far fewer rectangles than items
  EXPECT_LE(w0->drawn, 2 * 1000 / static_cast<int64_t>(kMinPx));
  // One batch: the fetch of batch 10 of epoch 1 (worker 2) and a little around it.
  const testing::SimBatch* b = truth.find(1, 10);
  ASSERT_NE(b, nullptr);
  zoom(dash, b->fetch_start - 5 * kMsNs, b->fetch_end + 5 * kMsNs);
  LayoutDump one = h.dashboard(dash, *snap);
  const DumpLane* w2 = lane_named(one, "worker 2");
  ASSERT_NE(w2, nullptr);
  EXPECT_EQ(w2->merged_groups, 0);
  EXPECT_LE(w2->drawn, 6);  // this fetch, its collate, and the neighbours' edges
  bool labelled = false;
  for (const DumpItem& it : one.items) {
    if (it.lane == 4 && it.label == "fetch B10") {
      labelled = true;
      EXPECT_GT(it.x1 - it.x0, 500);  // 30 ms of a 40 ms window
    }
  }
  EXPECT_TRUE(labelled);
}

// Where the timeline draws time t (its axis starts kLabelWidth right of the lanes' left edge).
float x_of(const LayoutDump& d, double t) {
  const DumpRect& r = d.lanes.at(0).rect;
  const float x0 = r.x0 + kLabelWidth;
  return x0 + static_cast<float>((t - d.view_t0) / (d.view_t1 - d.view_t0)) * (r.x1 - x0);
}

// Vertices of the frame just rendered, every draw list in order.
std::vector<ImDrawVert> frame_vertices() {
  std::vector<ImDrawVert> v;
  const ImDrawData* d = ImGui::GetDrawData();
  for (int i = 0; d && i < d->CmdListsCount; ++i) {
    const ImDrawList* l = d->CmdLists[i];
    v.insert(v.end(), l->VtxBuffer.Data, l->VtxBuffer.Data + l->VtxBuffer.Size);
  }
  return v;
}

bool same(const std::vector<ImDrawVert>& a, const std::vector<ImDrawVert>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(ImDrawVert)) == 0;
}

TEST_F(ViewsTest, KeptGeometryIsWhatDrawingAgainGives) {
  // Frames that keep the range replay the geometry of the previous ones (GeometryCache); what
  // they show must be exactly what drawing everything again shows, also after a zoom.
  testing::Headless h;
  Dashboard kept, plain;
  plain.keep_geometry(false);
  const ImVec2 mouse(700, 330);  // over the timeline
  auto compare = [&](int64_t t0, int64_t t1) {
    zoom(kept, t0, t1);
    zoom(plain, t0, t1);
    h.frame([&] { kept.draw(*snap_); }, mouse);  // computes (the range changed)
    const int64_t hits = kept.geometry().hits();
    h.frame([&] { kept.draw(*snap_); }, mouse);  // replays
    EXPECT_GT(kept.geometry().hits(), hits + 5);
    const std::vector<ImDrawVert> replayed = frame_vertices();
    h.frame([&] { plain.draw(*snap_); }, mouse);
    const std::vector<ImDrawVert> drawn = frame_vertices();
    EXPECT_GT(drawn.size(), 1000u);
    size_t diff = 0;
    while (diff < replayed.size() && diff < drawn.size() &&
           std::memcmp(&replayed[diff], &drawn[diff], sizeof(ImDrawVert)) == 0) {
      ++diff;
    }
    EXPECT_TRUE(same(replayed, drawn)) << replayed.size() << " vertices replayed, " << drawn.size() << " drawn"
                                       << "; first difference at vertex " << diff << " ("
                                       << (diff < drawn.size() ? drawn[diff].pos.x : -1) << ", "
                                       << (diff < drawn.size() ? drawn[diff].pos.y : -1) << ") replayed ("
                                       << (diff < replayed.size() ? replayed[diff].pos.x : -1) << ", "
                                       << (diff < replayed.size() ? replayed[diff].pos.y : -1) << ")";
  };
  compare(0, truth_.end_ns);                      // the whole run: merged items
  compare(truth_.end_ns / 3, truth_.end_ns / 2);  // zoomed in: items with labels
  EXPECT_EQ(plain.geometry().hits(), 0);
}

TEST_F(ViewsTest, WhileLoadingTheViewFitsWhatHasArrivedThenTheWholeRun) {
  // A large recording is read in parts (state "loading"): the view follows the data that has
  // arrived, and once everything is read it shows the whole run, not the first part's range.
  testing::Headless h;
  Dashboard dash;
  Snapshot partial = *snap_;
  partial.state = SourceState::kLoading;
  partial.load_fraction = 0.5;
  auto half = std::make_shared<Timeline>(*snap_->timeline);
  half->end_ns = snap_->timeline->end_ns / 2;
  partial.timeline = half;
  partial.analysis = nullptr;
  LayoutDump d = h.dashboard(dash, partial);
  EXPECT_EQ(d.state, "loading");
  EXPECT_NEAR(d.view_t1, static_cast<double>(half->end_ns), 1e6);
  d = h.dashboard(dash, *snap_);
  EXPECT_EQ(d.state, "finished");
  EXPECT_NEAR(d.view_t1, static_cast<double>(snap_->timeline->end_ns), 1e6);
  // A range the user chose while loading is kept.
  Dashboard chosen;
  h.dashboard(chosen, partial);
  zoom(chosen, half->end_ns / 4, half->end_ns / 2);
  d = h.dashboard(chosen, *snap_);
  EXPECT_NEAR(d.view_t1, static_cast<double>(half->end_ns / 2), 1);
}

TEST_F(ViewsTest, HoveringAFetchShowsItsBatchsLife) {
  testing::Headless h;
  Dashboard dash;
  const testing::SimBatch* b = truth_.find(1, 10);
  ASSERT_NE(b, nullptr);
  zoom(dash, b->sent - 5 * kMsNs, b->handed + 5 * kMsNs);
  LayoutDump d = h.dashboard(dash, *snap_);
  // Find where the fetch was drawn, then put the mouse on it.
  const DumpItem* fetch = nullptr;
  for (const DumpItem& it : d.items) {
    if (it.label == "fetch B10") fetch = &it;
  }
  ASSERT_NE(fetch, nullptr);
  const DumpLane& lane = d.lanes[static_cast<size_t>(fetch->lane)];
  EXPECT_EQ(lane.name, "worker 2");
  const ImVec2 mouse((fetch->x0 + fetch->x1) / 2, lane.rect.y0 + 8);
  d = h.dashboard(dash, *snap_, mouse, 3);
  ASSERT_TRUE(d.hover.has_value());
  EXPECT_EQ(d.hover->lane, "worker 2");
  ASSERT_TRUE(d.hover->batch);
  EXPECT_EQ(d.hover->index, 10);
  EXPECT_EQ(d.hover->epoch, 1);
  EXPECT_EQ(d.hover->worker, 2);
  EXPECT_EQ(d.hover->worker_pid, b->worker_pid);
  std::string life;
  for (const std::string& s : d.hover->life) life += s + "\n";
  for (const char* stage : {"sent", "fetch", "put", "pin", "recv", "handed"}) {
    EXPECT_NE(life.find(stage), std::string::npos) << stage << " missing from\n" << life;
  }
  EXPECT_NE(life.find("pid " + std::to_string(b->worker_pid)), std::string::npos) << life;
  // The same batch from the main thread's next() span (too short for a label: found by time).
  const ImVec2 on_next(x_of(d, static_cast<double>(b->next_start + b->handed) / 2), d.lanes[0].rect.y0 + 8);
  d = h.dashboard(dash, *snap_, on_next, 3);
  ASSERT_TRUE(d.hover && d.hover->batch);
  EXPECT_EQ(d.hover->lane, "main thread");
  EXPECT_EQ(d.hover->index, 10);
  EXPECT_EQ(d.hover->worker, 2);
  // A click pins it: the batch panel keeps showing it after the mouse leaves.
  h.dashboard(dash, *snap_, on_next, 1, true);
  h.dashboard(dash, *snap_, on_next, 1, false);
  ASSERT_TRUE(dash.state().pinned.has_value());
  EXPECT_EQ(dash.state().pinned->batch, 10);
}

TEST_F(ViewsTest, RecommendationsAreListedAndJumpToTheirEvidence) {
  testing::Headless h;
  Dashboard dash;
  LayoutDump d = h.dashboard(dash, *snap_);
  const auto& recs = snap_->analysis->report.recommendations;
  const auto& actions = snap_->analysis->report.actions;
  ASSERT_FALSE(recs.empty()) << "the fixture should get at least one recommendation";
  // The report's "What to do": each action's line and speed-up first, in the report's order.
  ASSERT_FALSE(actions.empty());
  ASSERT_EQ(d.recommendations.size(), actions.size());
  for (size_t i = 0; i < actions.size(); ++i) {
    EXPECT_EQ(d.recommendations[i], std::to_string(i + 1) + ". " + actions[i].line + "  " + actions[i].gain_text);
  }
  // The evidence is folded under each action: nothing of it shows until its fold is opened.
  ASSERT_EQ(d.recommendation_folds.size(), actions.size());
  EXPECT_TRUE(d.recommendation_details.empty());
  const DumpRect fold = d.recommendation_folds[0];
  const ImVec2 on_fold(fold.x0 + 8, (fold.y0 + fold.y1) / 2);
  h.dashboard(dash, *snap_, on_fold, 1, true);
  h.dashboard(dash, *snap_, on_fold, 1, false);
  d = h.dashboard(dash, *snap_, ImVec2(-1000, -1000));
  ASSERT_FALSE(d.recommendation_details.empty());
  EXPECT_EQ(d.recommendation_details.front(), actions[0].why.front());
  const analysis::Recommendation& lead = recs.at(actions[0].recommendations.front());
  EXPECT_NE(std::find(d.recommendation_details.begin(), d.recommendation_details.end(), lead.id + ": " + lead.message),
            d.recommendation_details.end());
  // Opening it moved the next action down.
  if (actions.size() > 1) {
    EXPECT_GT(d.recommendation_folds[1].y0, fold.y1 + 20);
  }
  // Click the first one: the view jumps to its evidence.
  const DumpPanel* p = d.panel("recommendations");
  ASSERT_NE(p, nullptr);
  const ImVec2 at(p->rect.x0 + 60, p->rect.y0 + 40);
  h.dashboard(dash, *snap_, at, 2, true);
  const EvidenceTarget& t = snap_->analysis->targets.at(0);
  EXPECT_EQ(dash.state().selected_recommendation, 0);
  EXPECT_NEAR(dash.state().t0, static_cast<double>(t.t0), 1e6);
  EXPECT_NEAR(dash.state().t1, static_cast<double>(t.t1), 1e6);
  EXPECT_FALSE(dash.state().evidence_note.empty());
}

TEST_F(ViewsTest, ReplayPlaysFromTheStartAtTheChosenSpeedAndFollowsThePlayhead) {
  testing::Headless h;
  Dashboard dash;
  h.dashboard(dash, *snap_);  // opens on the whole run, playhead at the end, paused
  ViewState& st = dash.state();
  EXPECT_FALSE(st.playing);
  const double t0 = static_cast<double>(snap_->timeline->first_ns);
  st.playing = true;
  st.playhead = t0;
  st.speed = 0.5f;
  st.t0 = t0;
  st.t1 = t0 + 200e6;  // a 200 ms window
  st.follow = true;
  h.dashboard(dash, *snap_, ImVec2(-1000, -1000), 60);  // one second of frames at 60 Hz
  EXPECT_NEAR(st.playhead, t0 + 0.5e9, 0.02e9);
  EXPECT_LE(st.t0, st.playhead);
  EXPECT_GE(st.t1, st.playhead);
  EXPECT_NEAR(st.t1 - st.t0, 200e6, 1e3);  // following keeps the zoom
  // Played to the end, it stops there.
  st.speed = 100;
  h.dashboard(dash, *snap_, ImVec2(-1000, -1000), 120);
  EXPECT_FALSE(st.playing);
  EXPECT_DOUBLE_EQ(st.playhead, static_cast<double>(snap_->timeline->end_ns));
}

TEST(SessionListTest, ListsLiveAndRecentSessionsAndOpensTheClickedOne) {
  std::vector<SessionEntry> live(1), recent(2);
  live[0].db_path = "/tmp/live.db";
  live[0].command = "python train.py";
  live[0].launcher_pid = 123;
  recent[0].db_path = "/tmp/a.db";
  recent[1].db_path = "/tmp/b.db";
  testing::Headless h;
  ViewState st;
  LayoutDump d;
  UiFonts fonts;
  auto draw = [&] {
    d.clear();
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(ImVec2(1600, 1000));
    ImGui::Begin("picker", nullptr, ImGuiWindowFlags_NoDecoration);
    draw_session_list(st, live, recent, "", &d, fonts, ImVec2(10, 10), ImVec2(1580, 980));
    ImGui::End();
  };
  h.frame(draw);
  EXPECT_EQ(d.sessions, (std::vector<std::string>{"live: /tmp/live.db", "recent: /tmp/a.db", "recent: /tmp/b.db"}));
  EXPECT_TRUE(st.open_request.empty());
  // Find the live entry's row: the first selectable under the "Live sessions" heading. Click
  // down the left column until something opens.
  for (float y = 20; y < 300 && st.open_request.empty(); y += 4) {
    h.frame(draw, ImVec2(60, y), true);
    h.frame(draw, ImVec2(60, y), false);
  }
  EXPECT_EQ(st.open_request, "/tmp/live.db");
}

TEST_F(ViewsTest, LongestStallEvidenceCoversIt) {
  const auto& an = *snap_->analysis;
  ASSERT_TRUE(an.longest_stall.has_value());
  const analysis::StallInterval* longest = nullptr;
  for (const auto& iv : an.report.stall.intervals) {
    if (!longest || iv.end_ns - iv.start_ns > longest->end_ns - longest->start_ns) longest = &iv;
  }
  EXPECT_LE(an.longest_stall->t0, longest->start_ns);
  EXPECT_GE(an.longest_stall->t1, longest->end_ns);
  EXPECT_NE(an.longest_stall->what.find("longest stall"), std::string::npos);
}

TEST_F(ViewsTest, WithoutTheAnalysisTheTimelineStillDraws) {
  testing::Headless h;
  Dashboard dash;
  auto snap = testing::load_snapshot(dir_.file("run.db"), false);
  LayoutDump d = h.dashboard(dash, *snap);
  EXPECT_EQ(d.lanes.size(), 6u);
  EXPECT_TRUE(d.recommendations.empty());
  EXPECT_EQ(d.queue_columns, 0);
  EXPECT_GT(d.heat_cells, 0);  // fetch time comes from the timeline itself
}

// A multi-rank job in one recording (torchrun under `stallscope run`): each rank's lanes form a
// group, named and ordered by rank, its workers apart from the other rank's worker of the same
// id; clicking a rank's first label collapses the group to that lane, clicking again expands it.
TEST(ViewsRanksTest, EachRankIsALaneGroupThatCollapses) {
  testing::TempDir dir;
  const std::string path = dir.file("job.db");
  {
    auto w = Writer::create(path);
    ASSERT_TRUE(w.ok());
    Writer& wr = **w;
    ASSERT_TRUE(wr.begin().ok());
    ASSERT_TRUE(wr.set_meta("complete", "1").ok());
    const char* names[] = {"",          "dl.next", "dl.fetch",      "dl.put", "dl.sent", "dl.worker_start",
                           "dist.rank", "{}",      "dl.epoch_begin"};
    for (uint32_t i = 1; i < std::size(names); ++i) wr.add_string(i, names[i]);
    auto instant = [&](int64_t th, uint32_t name, int64_t ts, int64_t a0, int64_t a1, int64_t a2) {
      wr.add_instant(InstantRow{0, th, ts, name, a0, a1, a2});
    };
    auto span = [&](int64_t th, uint32_t name, int64_t start, int64_t dur, int64_t a0, int64_t a1, int64_t a2) {
      wr.add_span(SpanRow{0, th, start, dur, name, 0, a0, a1, a2});
    };
    for (int r = 1; r >= 0; --r) {  // rank 1's process first: the order comes from the ranks
      const int64_t pid = 100 * (r + 1), wpid = pid + 1;
      const int64_t proc = wr.add_process(ProcessRow{0, pid, 1, "python train.py", 0, {}, {}, {}});
      const int64_t main = wr.add_thread(ThreadRow{0, proc, pid, "MainThread"});
      const int64_t wproc = wr.add_process(ProcessRow{0, wpid, pid, "python train.py", 0, {}, {}, {}});
      const int64_t worker = wr.add_thread(ThreadRow{0, wproc, wpid, "MainThread"});
      instant(main, 6, kMsNs, r, 7, 2);
      instant(main, 8, kMsNs, 0, 0, 1);
      instant(main, 5, kMsNs, 0, 0, wpid);
      for (int b = 0; b < 5; ++b) {
        const int64_t t = (2 + 10 * b) * kMsNs;
        instant(main, 4, t, 0, b, 0);
        span(worker, 2, t + kMsNs, 5 * kMsNs, b, 0, 0);
        instant(worker, 3, t + 6 * kMsNs, b, 0, 0);
        span(main, 1, t, 7 * kMsNs, 0, b, 0);
      }
    }
    ASSERT_TRUE(wr.commit().ok());
  }
  auto snap = testing::load_snapshot(path);
  ASSERT_TRUE(snap->timeline) << snap->error;
  std::vector<std::string> lanes;
  for (const Lane& l : snap->timeline->lanes) lanes.push_back(l.name);
  EXPECT_EQ(lanes, (std::vector<std::string>{"rank 0 main thread", "rank 0 worker 0", "rank 1 main thread",
                                             "rank 1 worker 0"}));
  EXPECT_TRUE(snap->timeline->lanes[0].rank_lead);
  EXPECT_FALSE(snap->timeline->lanes[1].rank_lead);
  EXPECT_TRUE(snap->timeline->lanes[2].rank_lead);
  EXPECT_EQ(snap->timeline->lanes[3].pids, std::vector<int64_t>{201});

  testing::Headless h;
  Dashboard dash;
  LayoutDump d = h.dashboard(dash, *snap);
  ASSERT_EQ(d.lanes.size(), 4u);
  // Click rank 1's first label (left of the lanes' area): its worker lane goes.
  const DumpLane* lead = lane_named(d, "rank 1 main thread");
  ASSERT_NE(lead, nullptr);
  const ImVec2 label(lead->rect.x0 + 20, lead->rect.y0 + 5);
  d = h.dashboard(dash, *snap, label, 1, true);
  d = h.dashboard(dash, *snap);
  EXPECT_EQ(dash.state().collapsed_ranks, std::set<int64_t>{1});
  lanes.clear();
  for (const DumpLane& l : d.lanes) lanes.push_back(l.name);
  EXPECT_EQ(lanes, (std::vector<std::string>{"rank 0 main thread", "rank 0 worker 0", "rank 1 main thread"}));
  // Again: expanded.
  d = h.dashboard(dash, *snap, label, 1, true);
  d = h.dashboard(dash, *snap);
  EXPECT_TRUE(dash.state().collapsed_ranks.empty());
  EXPECT_EQ(d.lanes.size(), 4u);
}

TEST(ViewsGpuTest, GpuLanesComeFirstAndTheHeadlineShowsGpuBusy) {
  testing::TempDir dir;
  testing::SimOptions o;
  o.workers = 2;
  o.epochs = 1;
  o.gpu = true;
  testing::write_sim_recording(dir.file("gpu.db"), o);
  auto snap = testing::load_snapshot(dir.file("gpu.db"));
  testing::Headless h;
  Dashboard dash;
  LayoutDump d = h.dashboard(dash, *snap);
  ASSERT_EQ(d.lanes.size(), 5u);  // GPU stream, main, pin, 2 workers
  EXPECT_EQ(d.lanes[0].name, "GPU 0 stream 7");
  EXPECT_EQ(d.lanes[0].role, "gpu");
  EXPECT_GT(d.lanes[0].drawn, 0);
  ASSERT_EQ(d.headline.size(), 4u);
  EXPECT_NE(d.headline[2].find("GPU busy"), std::string::npos) << d.headline[2];
  // Zoomed on one step: a copy and a kernel, labelled by name.
  const Row& r = snap->timeline->lanes[0].tracks[0].rows[0];
  ASSERT_GE(r.size(), 20u);
  dash.state().t0 = static_cast<double>(r[10].start_ns - 200000);
  dash.state().t1 = static_cast<double>(r[11].end_ns + 200000);
  dash.state().range_set = true;
  dash.state().follow = false;
  d = h.dashboard(dash, *snap);
  bool kernel = false;
  for (const DumpItem& it : d.items) kernel |= it.lane == 0 && it.label == "void sgemm_kernel<128>";
  EXPECT_TRUE(kernel);
}

TEST(ViewsErrorTest, AnUnreadableFileShowsItsMessage) {
  testing::TempDir dir;
  testing::write_file(dir.file("junk.db"), std::string(4096, 'x'));
  auto snap = testing::load_snapshot(dir.file("junk.db"));
  ASSERT_EQ(snap->state, SourceState::kError);
  testing::Headless h;
  Dashboard dash;
  LayoutDump d = h.dashboard(dash, *snap);
  ASSERT_NE(d.panel("message"), nullptr);
  EXPECT_EQ(d.state, "error");
  EXPECT_NE(d.message.find("junk.db"), std::string::npos);
  EXPECT_TRUE(d.lanes.empty());
}

TEST(DrawRowTest, ManyTinyItemsCostAboutOneRectanglePerFewPixels) {
  Row r;
  for (int64_t i = 0; i < 200000; ++i) {
    Item it;
    it.start_ns = i * 100;
    it.end_ns = i * 100 + 60;
    it.style = Style::kFetch;
    r.try_append(it);
  }
  testing::Headless h;
  int64_t drawn = 0;
  DumpLane stats;
  h.frame([&] {
    ImGui::Begin("t");
    TimeAxis ax;
    ax.t0 = 0;
    ax.t1 = 200000.0 * 100;
    ax.x0 = 0;
    ax.x1 = 1000;
    RowDraw d;
    d.dl = ImGui::GetWindowDrawList();
    d.axis = &ax;
    d.y0 = 0;
    d.y1 = 10;
    d.dump_stats = &stats;
    drawn = draw_row(r, d);
    ImGui::End();
  });
  EXPECT_LE(drawn, 1000 / static_cast<int64_t>(kMinPx) + 2);  // one merged run: gaps are sub-pixel
  EXPECT_GE(drawn, 1);
  EXPECT_EQ(stats.merged_items, 200000);
}

}  // namespace
}  // namespace stallscope
