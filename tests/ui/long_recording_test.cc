// Long recordings in the dashboard: the detail of a window at a time (RecordingTail::start_from,
// read_window), the overview of the whole run from the summaries (overview.h), the window a view
// asks for (wanted_detail), and SnapshotSource holding a bounded part of a recording that is larger
// than its budget: at open, when the view moves to the past, and while following one that grows.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <thread>

#include "storage/reader.h"
#include "storage/sqlite.h"
#include "storage/summaries.h"
#include "tests/ui/headless.h"
#include "tests/ui/sim_recording.h"
#include "tests/unit/test_util.h"
#include "ui/overview.h"
#include "ui/recording_tail.h"
#include "ui/snapshot_source.h"

namespace stallscope {
namespace {

using namespace ui;
using testing::kMsNs;

// Counts what a read hands over, and checks each row against a window.
struct CountingSink : RowSink {
  int64_t t0 = INT64_MIN, t1 = INT64_MAX;
  std::atomic<int64_t> counters{0}, counters_outside{0};
  int64_t spans = 0, instants = 0, gpu = 0, outside = 0;
  void on_meta(const std::map<std::string, std::string>&) override {}
  void on_string(uint32_t, std::string) override {}
  void on_processes(const std::vector<ProcessRow>&) override {}
  void on_threads(const std::vector<ThreadRow>&) override {}
  void on_counter_tracks(const std::vector<CounterTrackRow>&) override {}
  void on_instant(const InstantRow& r) override {
    ++instants;
    if (r.ts_ns < t0 || r.ts_ns > t1) ++outside;
  }
  void on_span(const SpanRow& r) override {
    ++spans;
    if (r.start_ns > t1 || (r.dur_ns && r.start_ns + *r.dur_ns < t0)) ++outside;
  }
  void on_counter(const CounterRow& r) override {
    ++counters;
    if (r.ts_ns < t0 || r.ts_ns > t1) ++counters_outside;
  }
  void on_gpu(const GpuActivityRow& r) override {
    ++gpu;
    if (r.start_ns > t1 || r.start_ns + r.dur_ns < t0) ++outside;
  }
  void on_flush(int64_t) override {}
};

int64_t count(Reader& r, const std::string& sql, int64_t a, int64_t b) {
  auto st = r.db().prepare(sql);
  EXPECT_TRUE(st.ok());
  if (!st.ok()) return -1;
  (*st)->bind(1, a).bind(2, b);
  EXPECT_TRUE((*st)->step());
  return (*st)->int64(0);
}

testing::SimOptions small_run() {
  testing::SimOptions o;
  o.step_ns = 100 * kMsNs;  // a minute and a half: 1-s buckets are a small part of it
  o.workers = 2;
  o.epochs = 6;
  o.batches = 100;
  o.gpu = true;
  o.commit_rows = 200;  // drains of about 20 ms
  return o;
}

class LongRecordingTest : public ::testing::Test {
 protected:
  testing::TempDir dir_;
};

TEST_F(LongRecordingTest, AWindowReadHandsOverExactlyTheRowsInTheWindow) {
  const std::string path = dir_.file("run.db");
  const auto truth = testing::write_sim_recording(path, small_run());
  auto reader = Reader::open(path);
  ASSERT_TRUE(reader.ok());
  for (const auto& [f0, f1] : {std::pair{0.4, 0.6}, std::pair{0.0, 0.05}, std::pair{0.93, 1.2}}) {
    const int64_t a = static_cast<int64_t>(static_cast<double>(truth.end_ns) * f0);
    const int64_t b = static_cast<int64_t>(static_cast<double>(truth.end_ns) * f1);
    auto tail = RecordingTail::open(path);
    ASSERT_TRUE(tail.ok());
    CountingSink sink;
    sink.t0 = a;
    sink.t1 = b;
    auto st = (*tail)->read_window(sink, a, b);
    ASSERT_TRUE(st.ok()) << st.status().message();
    Reader& r = **reader;
    EXPECT_EQ(
        sink.spans,
        count(r, "SELECT count(*) FROM spans WHERE start_ns <= ?2 AND (dur_ns IS NULL OR start_ns + dur_ns >= ?1)", a,
              b))
        << f0;
    EXPECT_GT(sink.spans, 0);
    EXPECT_EQ(sink.instants, count(r, "SELECT count(*) FROM instants WHERE ts_ns BETWEEN ?1 AND ?2", a, b)) << f0;
    EXPECT_EQ(sink.counters.load(), count(r, "SELECT count(*) FROM counters WHERE ts_ns BETWEEN ?1 AND ?2", a, b))
        << f0;
    EXPECT_EQ(sink.gpu,
              count(r, "SELECT count(*) FROM gpu_activities WHERE start_ns <= ?2 AND start_ns + dur_ns >= ?1", a, b))
        << f0;
    EXPECT_EQ(sink.outside, 0);
    EXPECT_EQ(sink.counters_outside.load(), 0);
    EXPECT_EQ(st->rows, sink.spans + sink.instants + sink.counters + sink.gpu);

    // Polls after start_from(a): everything that reaches a or later, and nothing before.
    auto from = RecordingTail::open(path);
    ASSERT_TRUE(from.ok());
    ASSERT_TRUE((*from)->start_from(a).ok());
    CountingSink later;
    later.t0 = a;
    ASSERT_TRUE((*from)->poll(later, 5000).ok());
    while (true) {
      auto p = (*from)->poll(later, 5000);
      ASSERT_TRUE(p.ok());
      if (p->rows == 0 && p->pending == 0) break;
    }
    EXPECT_EQ(later.spans, count(r,
                                 "SELECT count(*) FROM spans WHERE ?2 >= 0 AND (dur_ns IS NULL OR "
                                 "start_ns + dur_ns >= ?1)",
                                 a, 0))
        << f0;
    EXPECT_EQ(later.instants, count(r, "SELECT count(*) FROM instants WHERE ts_ns >= ?1 AND ?2 >= 0", a, 0)) << f0;
    EXPECT_EQ(later.counters.load(), count(r, "SELECT count(*) FROM counters WHERE ts_ns >= ?1 AND ?2 >= 0", a, 0))
        << f0;
    EXPECT_EQ(later.gpu,
              count(r, "SELECT count(*) FROM gpu_activities WHERE start_ns + dur_ns >= ?1 AND ?2 >= 0", a, 0))
        << f0;
    EXPECT_EQ(later.outside, 0);
  }
}

TEST_F(LongRecordingTest, TheOverviewAgreesWithTheDetailRows) {
  const std::string path = dir_.file("run.db");
  const auto truth = testing::write_sim_recording(path, small_run());
  auto reader = Reader::open(path);
  ASSERT_TRUE(reader.ok());
  Reader& r = **reader;
  auto o = read_overview(r, truth.end_ns);
  ASSERT_TRUE(o.ok()) << o.status().message();
  const Overview& ov = **o;
  EXPECT_EQ(ov.level_ns, kSummaryLevelsNs[0]);  // a run of seconds: the 1-s level
  // Every row counts in one bucket: the whole run's rows are the recording's.
  EXPECT_EQ(ov.total_rows, truth.events);
  EXPECT_EQ(ov.rows_in(INT64_MIN / 2, INT64_MAX / 2), truth.events);
  EXPECT_LE(ov.first_ns, 0);
  EXPECT_GE(ov.end_ns, truth.end_ns);

  // Each thread's main activity, and its share of each bucket against the spans themselves.
  auto threads = r.threads();
  ASSERT_TRUE(threads.ok());
  auto ids = r.string_ids({"dl.next", "dl.fetch", "dl.pin"});
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->size(), 3u);
  std::map<Style, int> styles;
  for (const ThreadRow& t : *threads) {
    auto it = ov.threads.find(t.id);
    if (it == ov.threads.end()) continue;
    ++styles[it->second.style];
    const char* name = it->second.style == Style::kNext    ? "dl.next"
                       : it->second.style == Style::kFetch ? "dl.fetch"
                       : it->second.style == Style::kPin   ? "dl.pin"
                                                           : nullptr;
    ASSERT_NE(name, nullptr) << t.name;
    std::vector<double> want(ov.size(), 0.0);
    auto st = r.db().prepare("SELECT start_ns, dur_ns FROM spans WHERE thread_id = ?1 AND name_id = ?2");
    ASSERT_TRUE(st.ok());
    (*st)->bind(1, t.id).bind(2, static_cast<int64_t>(ids->at(name)));
    while ((*st)->step()) {
      const int64_t b = summary_bucket((*st)->int64(0), ov.level_ns) - ov.first_bucket;
      ASSERT_GE(b, 0);
      ASSERT_LT(b, static_cast<int64_t>(ov.size()));
      want[static_cast<size_t>(b)] += static_cast<double>((*st)->int64(1)) / static_cast<double>(ov.level_ns);
    }
    for (size_t i = 0; i < ov.size(); ++i) {
      EXPECT_NEAR(it->second.busy[i], std::min(1.0, want[i]), 1e-5) << t.name << " bucket " << i;
    }
  }
  EXPECT_EQ(styles[Style::kNext], 1);                        // the training loop
  EXPECT_EQ(styles[Style::kFetch], 2 * small_run().epochs);  // two workers, started anew each epoch
  EXPECT_EQ(styles[Style::kPin], 1);
  ASSERT_EQ(ov.devices.size(), 1u);  // the GPU's busy share
  double gpu = 0;
  for (float v : ov.devices.begin()->second.busy) gpu += v;
  EXPECT_GT(gpu, 0.5);
}

// A timeline with an overview of 100 buckets of 1 s, 1000 rows each, holding [60 s, latest].
Timeline windowed_timeline(int64_t detail_rows) {
  auto o = std::make_shared<Overview>();
  o->level_ns = kSummaryLevelsNs[0];
  o->first_bucket = 0;
  o->rows.assign(100, 1000);
  o->total_rows = 100000;
  o->first_ns = 0;
  o->end_ns = 100 * o->level_ns;
  Timeline tl;
  tl.overview = o;
  tl.first_ns = 0;
  tl.end_ns = o->end_ns;
  tl.detail_t0 = 60 * o->level_ns;
  tl.detail_t1 = INT64_MAX;
  tl.detail_rows = detail_rows;
  return tl;
}

TEST(OverviewLevelTest, TheFinestLevelWithinTheBucketLimit) {
  constexpr int64_t kH = int64_t{3600} * 1'000'000'000;
  EXPECT_EQ(overview_level(kH / 2), kSummaryLevelsNs[0]);                              // 1 800 buckets of 1 s
  EXPECT_EQ(overview_level(24 * kH), kSummaryLevelsNs[2]);                             // 864 of 100 s at open
  EXPECT_EQ(overview_level(24 * kH, Overview::kMaxFineBuckets), kSummaryLevelsNs[1]);  // then 8 640 of 10 s
  EXPECT_EQ(overview_level(30 * 24 * kH, Overview::kMaxFineBuckets), kSummaryLevelsNs[2]);
}

TEST(WantedDetailTest, AViewOutsideTheDetailHeldAsksForAWindowAroundItWithinTheBudget) {
  constexpr int64_t kS = 1'000'000'000;
  const Timeline tl = windowed_timeline(20000);
  // Within what is held: nothing.
  EXPECT_FALSE(wanted_detail(tl, 70.0 * kS, 80.0 * kS));
  EXPECT_FALSE(wanted_detail(tl, 60.0 * kS, 140.0 * kS));  // past the end counts as held (followed)
  // The whole run is 100 000 rows: more than the budget, the overview shows it.
  EXPECT_FALSE(wanted_detail(tl, 0, 100.0 * kS));
  // Two seconds at 10 s: a window around it of at most half the budget (10 buckets), centred.
  auto w = wanted_detail(tl, 10.0 * kS, 12.0 * kS);
  ASSERT_TRUE(w);
  EXPECT_LE(w->first, 10 * kS);
  EXPECT_GE(w->second, 12 * kS);
  EXPECT_LT(w->second, INT64_MAX);
  const Overview& o = *tl.overview;
  EXPECT_LE(o.rows_in(w->first, w->second), 10000);
  EXPECT_GE(o.rows_in(w->first, w->second), 3000);
  // Fifteen seconds (16 buckets, within the budget but not half of it): the view alone.
  w = wanted_detail(tl, 20.0 * kS, 35.0 * kS);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->first, 20 * kS);
  EXPECT_EQ(w->second, 35 * kS);
  // Reaching the latest bucket: the latest part, followed.
  auto t = windowed_timeline(200000);
  t.detail_t0 = 99 * kS;
  w = wanted_detail(t, 90.0 * kS, 99.5 * kS);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->second, INT64_MAX);
  EXPECT_LE(w->first, 90 * kS);
  // A timeline read whole asks for nothing.
  Timeline whole;
  whole.end_ns = 100 * kS;
  EXPECT_FALSE(wanted_detail(whole, 0, 1.0 * kS));
}

// Every item of every lane reaches [t0, t1].
void expect_items_within(const Timeline& tl, int64_t t0, int64_t t1, int64_t* items) {
  *items = 0;
  for (const Lane& l : tl.lanes) {
    for (const Track& tr : l.tracks) {
      for (const Row& row : tr.rows) {
        for (size_t i = 0; i < row.size(); ++i) {
          ++*items;
          EXPECT_GE(row[i].end_ns, t0) << l.name;
          EXPECT_LE(row[i].start_ns, t1) << l.name;
        }
      }
    }
  }
}

TEST_F(LongRecordingTest, ALongRecordingOpensWithItsOverviewAndLatestPartThenReadsTheWindowAskedFor) {
  const std::string path = dir_.file("long.db");
  const auto truth = testing::write_sim_recording(path, small_run());
  SourceOptions so;
  so.analysis = false;
  so.detail_rows = truth.events / 10;
  SnapshotSource src(path, so);
  ASSERT_TRUE(src.wait_until(SnapshotSource::settled, 30000));
  auto snap = src.current();
  ASSERT_EQ(snap->state, SourceState::kFinished) << snap->error;
  const Timeline& tl = *snap->timeline;
  ASSERT_TRUE(tl.windowed());
  EXPECT_EQ(tl.detail_rows, so.detail_rows);
  // The whole run's ends; the detail of the latest tenth or so.
  EXPECT_LE(tl.first_ns, truth.first_epoch_begin_ns);
  EXPECT_GE(tl.end_ns, truth.end_ns);
  EXPECT_GT(tl.detail_t0, truth.end_ns / 2);
  EXPECT_EQ(tl.detail_t1, INT64_MAX);
  EXPECT_LE(tl.rows_read, so.detail_rows + 2 * small_run().commit_rows);
  EXPECT_GT(tl.rows_read, so.detail_rows / 2);
  int64_t items = 0;
  expect_items_within(tl, tl.detail_t0, INT64_MAX, &items);
  EXPECT_GT(items, 0);
  EXPECT_EQ(tl.lanes.size(), 5u);  // GPU, main, pin, two workers

  // The view moves to the second tenth of the run: its window is read, and only it is held.
  const double v0 = static_cast<double>(truth.end_ns) * 0.15, v1 = static_cast<double>(truth.end_ns) * 0.17;
  const auto want = wanted_detail(tl, v0, v1);
  ASSERT_TRUE(want);
  EXPECT_LT(want->second, INT64_MAX);
  src.request_detail(want->first, want->second);
  ASSERT_TRUE(src.wait_until(
      [&](const Snapshot& s) {
        return s.timeline && s.timeline->detail_t0 == want->first && s.timeline->detail_t1 == want->second;
      },
      30000));
  auto past = src.current();
  EXPECT_FALSE(wanted_detail(*past->timeline, v0, v1));
  expect_items_within(*past->timeline, want->first, want->second, &items);
  EXPECT_GT(items, 0);
  // The loop's waits in the window are there, every one of them.
  auto reader = Reader::open(path);
  ASSERT_TRUE(reader.ok());
  auto next_id = (*reader)->string_ids({"dl.next"});
  ASSERT_TRUE(next_id.ok());
  const int64_t nexts = count(**reader,
                              "SELECT count(*) FROM spans WHERE name_id = " + std::to_string(next_id->at("dl.next")) +
                                  " AND start_ns <= ?2 AND start_ns + dur_ns >= ?1",
                              want->first, want->second);
  int64_t seen = 0;
  for (const Lane& l : past->timeline->lanes) {
    for (const Track& tr : l.tracks) {
      for (const Row& row : tr.rows) {
        for (size_t i = 0; i < row.size(); ++i) seen += row[i].style == Style::kNext;
      }
    }
  }
  EXPECT_EQ(seen, nexts);
  EXPECT_GT(nexts, 5);
  // Asking again for what is held changes nothing.
  const uint64_t gen = past->generation;
  src.request_detail(want->first + 1, want->second - 1);
  EXPECT_FALSE(src.wait_until([&](const Snapshot& s) { return s.generation != gen; }, 300));

  // Back to the end: the latest part again, from where the view asked.
  const auto latest = wanted_detail(*past->timeline, static_cast<double>(truth.end_ns) * 0.97,
                                    static_cast<double>(truth.end_ns) * 0.99);
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->second, INT64_MAX);
  src.request_detail(latest->first, latest->second);
  ASSERT_TRUE(src.wait_until(
      [&](const Snapshot& s) {
        return s.timeline && s.timeline->detail_t0 == latest->first && s.timeline->detail_t1 == INT64_MAX;
      },
      30000));
  // A recording that fits is read whole, as before.
  SourceOptions all = so;
  all.detail_rows = truth.events + 1;
  SnapshotSource whole(path, all);
  ASSERT_TRUE(whole.wait_until(SnapshotSource::settled, 30000));
  EXPECT_FALSE(whole.current()->timeline->windowed());
  EXPECT_EQ(whole.current()->timeline->rows_read, truth.events);
}

TEST_F(LongRecordingTest, FollowingARecordingAsItGrowsHoldsABoundedPart) {
  const std::string path = dir_.file("growing.db");
  testing::SimOptions o = small_run();
  o.epochs = 24;
  o.batches = 40;
  o.commit_rows = 100;
  const int64_t budget = 1000;
  SourceOptions so;
  so.analysis = false;
  so.detail_rows = budget;
  so.cut_off_poll_ms = 5;  // the sim has no recorder process: followed as a cut-off recording
  std::unique_ptr<SnapshotSource> src;
  int64_t most_rows = 0, cuts = 0, last_t0 = INT64_MIN, epoch_rows = 0;
  int64_t previous_end = 0;
  o.after_epoch = [&](int epoch, int64_t end_ns) {
    if (!src) src = std::make_unique<SnapshotSource>(path, so);
    const bool caught_up = src->wait_until(
        [&](const Snapshot& s) {
          return s.timeline && s.timeline->end_ns >= end_ns && s.state != SourceState::kLoading;
        },
        20000);
    EXPECT_TRUE(caught_up) << "epoch " << epoch;
    const auto snap = src->current();
    const Timeline& tl = *snap->timeline;
    most_rows = std::max(most_rows, tl.rows_read);
    if (tl.windowed() && tl.detail_t0 != last_t0) {
      ++cuts;
      last_t0 = tl.detail_t0;
    }
    if (epoch == 1) epoch_rows = tl.rows_read / 2;
    previous_end = end_ns;
  };
  const auto truth = testing::write_sim_recording(path, o);
  ASSERT_TRUE(src);
  EXPECT_GT(truth.events, 10 * budget);
  // Cut again and again as it grew, never holding much more than twice the budget (plus what one
  // poll brings: about an epoch).
  EXPECT_GE(cuts, 3);
  EXPECT_LE(most_rows, 2 * budget + 2 * epoch_rows + o.commit_rows) << "epoch rows " << epoch_rows;
  // Finished: the latest part, and the overview of the whole run.
  ASSERT_TRUE(src->wait_until(
      [&](const Snapshot& s) {
        return s.state == SourceState::kFinished && s.timeline && s.timeline->end_ns >= truth.end_ns;
      },
      20000));
  const Timeline& tl = *src->current()->timeline;
  ASSERT_TRUE(tl.windowed());
  EXPECT_LE(tl.first_ns, truth.first_epoch_begin_ns);
  EXPECT_GT(tl.detail_t0, previous_end / 2);
  EXPECT_EQ(tl.overview->total_rows, truth.events);
  // The last batch handed is in the detail.
  const testing::SimBatch& last = truth.batches.back();
  bool found = false;
  for (const Lane& l : tl.lanes) {
    if (l.role != LaneRole::kMain) continue;
    for (const Track& tr : l.tracks) {
      for (const Row& row : tr.rows) {
        for (size_t i = 0; i < row.size(); ++i) found |= row[i].style == Style::kNext && row[i].end_ns == last.handed;
      }
    }
  }
  EXPECT_TRUE(found);
}

TEST_F(LongRecordingTest, TheWholeRunIsDrawnFromTheOverviewOutsideTheDetail) {
  const std::string path = dir_.file("long.db");
  const auto truth = testing::write_sim_recording(path, small_run());
  SourceOptions so;
  so.detail_rows = truth.events / 10;
  SnapshotSource src(path, so);
  ASSERT_TRUE(src.wait_until(SnapshotSource::settled, 30000));
  auto snap = src.current();
  ASSERT_TRUE(snap->timeline && snap->timeline->windowed());
  ASSERT_TRUE(snap->analysis) << snap->analysis_error;
  testing::Headless h;
  Dashboard dash;
  LayoutDump d = h.dashboard(dash, *snap);
  // The default view is the whole run: drawn from the overview up to the detail held, with bars in
  // the lanes; it holds more rows than the budget, so it asks for no window.
  ASSERT_TRUE(d.windowed);
  EXPECT_EQ(d.detail_t0, snap->timeline->detail_t0);
  ASSERT_EQ(d.overview_ranges.size(), 1u);
  EXPECT_NEAR(d.overview_ranges[0].second, static_cast<double>(snap->timeline->detail_t0), 1.0);
  // Each worker lane shows the workers that held its place in every epoch, started anew each time
  // and found by their order of start.
  std::map<int64_t, int> worker_of_pid;
  for (const testing::SimBatch& b : truth.batches) worker_of_pid[b.worker_pid] = b.worker;
  auto reader = Reader::open(path);
  ASSERT_TRUE(reader.ok());
  auto threads = (*reader)->threads();
  auto procs = (*reader)->processes();
  ASSERT_TRUE(threads.ok() && procs.ok());
  std::map<int64_t, int64_t> pid_of_thread;
  for (const ThreadRow& t : *threads) {
    for (const ProcessRow& p : *procs) {
      if (p.id == t.process_id) pid_of_thread[t.id] = p.pid;
    }
  }
  int worker_lanes = 0;
  for (const Lane& l : snap->timeline->lanes) {
    if (l.role != LaneRole::kWorker) continue;
    ++worker_lanes;
    EXPECT_EQ(l.overview_threads.size(), static_cast<size_t>(small_run().epochs)) << l.name;
    for (int64_t t : l.overview_threads) EXPECT_EQ(worker_of_pid.at(pid_of_thread.at(t)), l.worker) << l.name;
  }
  EXPECT_EQ(worker_lanes, 2);
  for (const DumpLane& l : d.lanes) {
    if (l.role != "gpu") {
      EXPECT_GT(l.overview, 2) << l.name;  // a bar per bucket with work
    }
  }
  EXPECT_FALSE(dash.state().detail_request);
  // Zoomed into a second early in the run: that window is asked for.
  ViewState& st = dash.state();
  st.t0 = static_cast<double>(truth.end_ns) * 0.1;
  st.t1 = st.t0 + 1e9;
  st.range_set = true;
  st.follow = false;
  d = h.dashboard(dash, *snap);
  ASSERT_TRUE(dash.state().detail_request);
  EXPECT_LE(dash.state().detail_request->first, static_cast<int64_t>(st.t0));
  EXPECT_GE(dash.state().detail_request->second, static_cast<int64_t>(st.t1));
  ASSERT_EQ(d.overview_ranges.size(), 1u);  // until it is read, the overview
  src.request_detail(dash.state().detail_request->first, dash.state().detail_request->second);
  const double v0 = st.t0, v1 = st.t1;
  ASSERT_TRUE(
      src.wait_until([&](const Snapshot& s) { return s.timeline && !wanted_detail(*s.timeline, v0, v1); }, 30000));
  // The analysis follows the window (the queue, the worker strips and the batches are its): the
  // window is analysed as `report --detail T0:T1` would.
  ASSERT_TRUE(src.wait_until(
      [&](const Snapshot& s) {
        return SnapshotSource::settled(s) && s.analysis && s.analysis->report.detail_to_ns &&
               s.timeline->detail_t1 == *s.analysis->report.detail_to_ns;
      },
      30000));
  snap = src.current();
  EXPECT_EQ(*snap->analysis->report.detail_from_ns, snap->timeline->detail_t0);
  EXPECT_GT(snap->analysis->report.steps, 0);
  EXPECT_LE(snap->analysis->report.window_end_ns, snap->timeline->detail_t1 + 1'000'000'000);
  d = h.dashboard(dash, *snap);
  EXPECT_TRUE(d.overview_ranges.empty());
  EXPECT_FALSE(dash.state().detail_request);
  int64_t drawn = 0;
  for (const DumpLane& l : d.lanes) drawn += l.drawn;
  EXPECT_GT(drawn, 10);
  EXPECT_GT(d.queue_columns, 10);  // the queue of the window, from its analysis
  EXPECT_GT(d.stall_rects, 0);
  // Another overview of the same data, or the same window asked for again: no new analysis.
  const auto analysed = snap->analysis;
  src.request_detail(snap->timeline->detail_t0, snap->timeline->detail_t1);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(src.current()->analysis, analysed);
  EXPECT_FALSE(src.current()->analysis_pending);
}

}  // namespace
}  // namespace stallscope
