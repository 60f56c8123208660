// The dashboard's model: append-only storage shared between snapshots, rows and their invariants,
// incremental reads of a recording, lanes built from a simulated DataLoader run, headline bins,
// step series and counter means.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "storage/reader.h"
#include "storage/sqlite.h"
#include "storage/writer.h"
#include "tests/ui/headless.h"
#include "tests/ui/sim_recording.h"
#include "tests/unit/test_util.h"
#include "ui/analysis_view.h"
#include "ui/recording_tail.h"
#include "ui/snapshot_builder.h"

namespace stallscope {
namespace {

using namespace ui;
using testing::kMsNs;

TEST(AppendLogTest, CopiesKeepTheirContentsWhileTheWriterAppends) {
  AppendLog<int64_t> log;
  std::vector<AppendLog<int64_t>> copies;
  for (int64_t i = 0; i < 100000; ++i) {
    log.push_back(i * 3);
    if (i % 9973 == 0) copies.push_back(log);
  }
  ASSERT_EQ(log.size(), 100000u);
  for (size_t i = 0; i < log.size(); i += 777) EXPECT_EQ(log[i], static_cast<int64_t>(i) * 3);
  for (const auto& c : copies) {
    ASSERT_GT(c.size(), 0u);
    EXPECT_EQ(c.back(), static_cast<int64_t>(c.size() - 1) * 3);
  }
  const auto lb = log.lower_bound(0, log.size(), 300, [](int64_t v, int64_t k) { return v < k; });
  EXPECT_EQ(lb, 100u);
  AppendLog<int64_t> snapshot = log;
  log.reset();
  log.push_back(7);
  EXPECT_EQ(snapshot.size(), 100000u);
  EXPECT_EQ(snapshot[5], 15);
  EXPECT_EQ(log[0], 7);
}

TEST(RowTest, KeepsItemsSortedAndNonOverlappingWithPrefixBusyTime) {
  Row r;
  auto item = [](int64_t s, int64_t e) {
    Item it;
    it.start_ns = s;
    it.end_ns = e;
    return it;
  };
  EXPECT_TRUE(r.try_append(item(0, 10)));
  EXPECT_TRUE(r.try_append(item(10, 15)));
  EXPECT_FALSE(r.try_append(item(12, 20)));  // overlaps
  EXPECT_FALSE(r.try_append(item(5, 8)));    // goes back in time
  EXPECT_TRUE(r.try_append(item(30, 40)));
  EXPECT_EQ(r.busy(0, 3), 25);
  EXPECT_EQ(r.busy(1, 3), 15);
  EXPECT_EQ(r.first_ending_after(10), 1u);
  EXPECT_EQ(r.first_ending_after(15), 2u);
  EXPECT_EQ(r.first_starting_at_or_after(11), 2u);
}

TEST(StepSeriesTest, MinMaxAndMeanMatchBruteForce) {
  std::mt19937 rng(7);
  analysis::StepFunction f;
  int64_t t = 0;
  for (int i = 0; i < 5000; ++i) {
    t += 1 + static_cast<int64_t>(rng() % 100);
    f.push_back({t, static_cast<int64_t>(rng() % 17)});
  }
  StepSeries s(f);
  for (int q = 0; q < 3000; ++q) {
    size_t a = rng() % f.size(), b = q % 3 == 0 ? a + rng() % 300 : rng() % f.size();  // short ranges too
    if (a > b) std::swap(a, b);
    if (a == b) ++b;
    if (b > f.size()) continue;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t i = a; i < b; ++i) {
      lo = std::min(lo, f[i].value);
      hi = std::max(hi, f[i].value);
    }
    const auto mm = s.minmax(a, b);
    EXPECT_EQ(mm.first, lo);
    EXPECT_EQ(mm.second, hi);
  }
  // Mean over [ts[10], ts[20]] by hand.
  double area = 0;
  for (size_t i = 10; i < 20; ++i)
    area += static_cast<double>(f[i].value) * static_cast<double>(f[i + 1].ts_ns - f[i].ts_ns);
  EXPECT_NEAR(s.mean(f[10].ts_ns, f[20].ts_ns), area / static_cast<double>(f[20].ts_ns - f[10].ts_ns), 1e-9);
  EXPECT_EQ(s.at(f[0].ts_ns - 1), 0);
  EXPECT_EQ(s.at(f[3].ts_ns), f[3].value);
}

TEST(StepSeriesTest, LowerBoundFromAnyHintMatchesTheStandardOne) {
  // Through the block index and within blocks, from hints near and far, with equal times (several
  // points at one ns), before the first point and after the last, and in the last, partial block.
  std::mt19937 rng(11);
  analysis::StepFunction f;
  int64_t t = 100;
  for (int i = 0; i < 64 * 40 + 17; ++i) {
    t += static_cast<int64_t>(rng() % 4 == 0 ? 0 : 1 + rng() % 50);
    f.push_back({t, 1});
  }
  StepSeries s(f);
  std::vector<int64_t> ts;
  for (const auto& p : f) ts.push_back(p.ts_ns);
  for (int q = 0; q < 5000; ++q) {
    const size_t hint = rng() % (ts.size() + 2);
    const int64_t at = 90 + static_cast<int64_t>(rng() % static_cast<uint64_t>(t - 80));
    const size_t want = std::max(hint > ts.size() ? ts.size() : hint,
                                 static_cast<size_t>(std::lower_bound(ts.begin(), ts.end(), at) - ts.begin()));
    ASSERT_EQ(s.lower_bound(at, hint), std::min(want, ts.size())) << "t " << at << " from " << hint;
  }
  EXPECT_EQ(s.lower_bound(ts.back() + 1), ts.size());
  EXPECT_EQ(s.lower_bound(0), 0u);
}

TEST(CounterSeriesTest, MeanIsTimeWeighted) {
  CounterSeries c;
  c.append(0, 0);
  c.append(100, 1.0);  // 1 over (0, 100]
  c.append(300, 3.0);  // 3 over (100, 300]
  double v = 0;
  int64_t covered = 0;
  ASSERT_TRUE(c.mean(0, 300, &v, &covered));
  EXPECT_NEAR(v, (100 * 1.0 + 200 * 3.0) / 300, 1e-12);
  EXPECT_EQ(covered, 300);
  ASSERT_TRUE(c.mean(50, 150, &v));
  EXPECT_NEAR(v, (50 * 1.0 + 50 * 3.0) / 100, 1e-12);
  EXPECT_FALSE(c.mean(400, 500, &v));
}

class SimTest : public ::testing::Test {
 protected:
  testing::TempDir dir_;
};

TEST_F(SimTest, LanesAreMainPinAndOneLanePerWorkerAcrossRespawns) {
  testing::SimOptions o;
  o.workers = 3;
  o.epochs = 3;
  o.persistent = false;  // new worker processes each epoch: still one lane per worker id
  const auto truth = testing::write_sim_recording(dir_.file("run.db"), o);
  auto snap = testing::load_snapshot(dir_.file("run.db"), false);
  ASSERT_EQ(snap->state, SourceState::kFinished) << snap->error;
  const Timeline& tl = *snap->timeline;
  std::vector<std::string> names;
  for (const Lane& l : tl.lanes) names.push_back(l.name);
  EXPECT_EQ(names, (std::vector<std::string>{"main thread", "pin memory", "worker 0", "worker 1", "worker 2"}));
  for (const Lane& l : tl.lanes) {
    if (l.role != LaneRole::kWorker) continue;
    EXPECT_EQ(l.pids.size(), 3u) << l.name;  // one process per epoch, in time order
    for (size_t k = 0; k < l.pids.size(); ++k) {
      EXPECT_EQ(l.pids[k], truth.worker_pids[k * 3 + static_cast<size_t>(l.worker)]) << l.name;
    }
    EXPECT_EQ(l.tracks.size(), 3u);
    EXPECT_EQ(l.row_count, 2);  // dl.fetch, dl.collate nested inside
    EXPECT_EQ(l.row_depth, (std::vector<int32_t>{0, 1}));
  }
  // Every span is in exactly one row: main (next + StopIteration), pin, workers (fetch + collate).
  int64_t items = 0;
  for (const Lane& l : tl.lanes) {
    for (const Track& t : l.tracks) {
      for (const Row& r : t.rows) items += static_cast<int64_t>(r.size());
    }
  }
  EXPECT_EQ(items, truth.spans);
  // Derived steps: between one hand-off and the next next() call, batches-1 per epoch... plus the
  // step before each epoch's StopIteration call.
  const Lane& main = tl.lanes[0];
  EXPECT_EQ(main.tracks[0].steps.size(), static_cast<size_t>(o.epochs * o.batches));
  // Headline bins: the stall time is the sum of dl.next durations.
  int64_t stall = 0, handed = 0;
  for (const Bin& b : *tl.bins) {
    stall += b.stall_ns;
    handed += b.handed;
  }
  EXPECT_EQ(stall, truth.stall_ns);
  EXPECT_EQ(handed, o.epochs * o.batches);
  // Counters per process.
  EXPECT_EQ(tl.counters.size(), 1u + 3u * 3u);
  EXPECT_GT(tl.counters.at(truth.worker_pids[0]).series[kRunq].samples.size(), 5u);
}

// The reference loader's worker threads live in the training process: each gets a worker lane
// (not an "other thread" lane), and hovering one of its fetches finds that batch.
TEST_F(SimTest, ReferenceLoaderThreadsGetWorkerLanes) {
  const std::string path = dir_.file("ref.db");
  {
    auto w = Writer::create(path);
    ASSERT_TRUE(w.ok());
    Writer& wr = **w;
    ASSERT_TRUE(wr.begin().ok());
    ASSERT_TRUE(wr.set_meta("complete", "1").ok());
    const char* names[] = {"",
                           "dl.next",
                           "dl.fetch",
                           "dl.put",
                           "dl.config",
                           "dl.epoch_begin",
                           R"({"loader": 3, "kind": "reference", "batch_size": 4, "num_workers": 2})"};
    for (uint32_t i = 1; i < std::size(names); ++i) wr.add_string(i, names[i]);
    ProcessRow p;
    p.pid = 77;
    p.start_ns = 0;
    const int64_t proc = wr.add_process(p);
    const int64_t main = wr.add_thread(ThreadRow{0, proc, 77, "MainThread"});
    const int64_t threads[2] = {wr.add_thread(ThreadRow{0, proc, 78, "ss-loader-0"}),
                                wr.add_thread(ThreadRow{0, proc, 79, "ss-loader-1"})};
    auto instant = [&](int64_t th, uint32_t name, int64_t ts, int64_t a0, int64_t a1, int64_t a2) {
      InstantRow r;
      r.thread_id = th;
      r.ts_ns = ts;
      r.name_id = name;
      r.arg0 = a0;
      r.arg1 = a1;
      r.arg2 = a2;
      wr.add_instant(r);
    };
    auto span = [&](int64_t th, uint32_t name, int64_t start, int64_t dur, int64_t a0, int64_t a1, int64_t a2) {
      SpanRow r;
      r.thread_id = th;
      r.start_ns = start;
      r.dur_ns = dur;
      r.name_id = name;
      r.arg0 = a0;
      r.arg1 = a1;
      r.arg2 = a2;
      wr.add_span(r);
    };
    instant(main, 4, kMsNs, 3, 6, 0);
    instant(main, 5, kMsNs, 3, 0, 2);
    for (int b = 0; b < 6; ++b) {
      const int64_t start = (2 + 10 * (b / 2)) * kMsNs;
      span(threads[b % 2], 2, start, 8 * kMsNs, 3, b, b % 2);
      instant(threads[b % 2], 3, start + 8 * kMsNs, 3, b, b % 2);
      span(main, 1, start + 7 * kMsNs, 1 * kMsNs + 1000, 3, b, 0);
    }
    ASSERT_TRUE(wr.commit().ok());
  }
  auto snap = testing::load_snapshot(path);
  ASSERT_TRUE(snap->timeline && snap->analysis) << snap->error << snap->analysis_error;
  std::vector<std::string> names;
  for (const Lane& l : snap->timeline->lanes) names.push_back(l.name);
  EXPECT_EQ(names, (std::vector<std::string>{"main thread", "worker 0", "worker 1"}));
  for (size_t i = 1; i < 3; ++i) {
    const Lane& l = snap->timeline->lanes[i];
    EXPECT_EQ(l.role, LaneRole::kWorker);
    EXPECT_EQ(l.loader, 3);
    EXPECT_EQ(l.worker, static_cast<int32_t>(i - 1));
    const Track& t = l.tracks[0];
    ASSERT_EQ(t.rows.size(), 1u);
    ASSERT_EQ(t.rows[0].size(), 3u);
    for (size_t k = 0; k < 3; ++k) {
      const analysis::BatchInfo* b = snap->analysis->batch_of(l, t, t.rows[0][k]);
      ASSERT_NE(b, nullptr) << l.name << " fetch " << k;
      EXPECT_EQ(b->batch, static_cast<int64_t>(2 * k + (i - 1)));  // its own batch, not the other thread's
    }
  }
}

TEST_F(SimTest, GpuActivitiesGetTheirOwnLaneFirst) {
  testing::SimOptions o;
  o.workers = 2;
  o.epochs = 1;
  o.gpu = true;
  o.pin = false;
  testing::write_sim_recording(dir_.file("gpu.db"), o);
  auto snap = testing::load_snapshot(dir_.file("gpu.db"), false);
  const Timeline& tl = *snap->timeline;
  ASSERT_FALSE(tl.lanes.empty());
  EXPECT_EQ(tl.lanes[0].name, "GPU 0 stream 7");
  EXPECT_EQ(tl.lanes[0].role, LaneRole::kGpu);
  EXPECT_TRUE(tl.gpu_mode);
  EXPECT_EQ(tl.lanes[0].items, 2 * o.batches);  // a copy and a kernel per step
  // Pageable copies (no pin_memory) are styled as such.
  const Row& r = tl.lanes[0].tracks[0].rows[0];
  std::set<Style> styles;
  for (size_t i = 0; i < r.size(); ++i) styles.insert(r[i].style);
  EXPECT_TRUE(styles.count(Style::kCopyPageable));
  EXPECT_TRUE(styles.count(Style::kKernel));
}

TEST_F(SimTest, TailReadsOnlyNewRows) {
  const std::string path = dir_.file("grow.db");
  auto w = Writer::create(path);
  ASSERT_TRUE(w.ok());
  Writer& wr = **w;
  ASSERT_TRUE(wr.begin().ok());
  ASSERT_TRUE(wr.set_meta("complete", "0").ok());
  wr.add_string(1, "dl.next");
  ProcessRow p;
  p.pid = 42;
  const int64_t proc = wr.add_process(p);
  const int64_t th = wr.add_thread(ThreadRow{0, proc, 42, "MainThread"});
  auto span = [&](int64_t s, int64_t b) {
    SpanRow r;
    r.thread_id = th;
    r.start_ns = s;
    r.dur_ns = 10;
    r.name_id = 1;
    r.arg0 = 0;
    r.arg1 = b;
    r.arg2 = 0;
    wr.add_span(r);
  };
  span(0, 0);
  span(100, 1);
  ASSERT_TRUE(wr.commit().ok());
  auto tail = RecordingTail::open(path);
  ASSERT_TRUE(tail.ok()) << tail.status().message();
  SnapshotBuilder b;
  auto st = (*tail)->poll(b);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->spans, 2);
  auto first = b.publish();
  ASSERT_TRUE(wr.begin().ok());
  span(200, 2);
  ASSERT_TRUE(wr.commit().ok());
  st = (*tail)->poll(b);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->spans, 1);  // only the new one
  auto second = b.publish();
  EXPECT_EQ(second->lanes[0].tracks[0].rows[0].size(), 3u);
  EXPECT_EQ(first->lanes[0].tracks[0].rows[0].size(), 2u);  // the older snapshot did not change
  st = (*tail)->poll(b);
  EXPECT_EQ(st->rows, 0);
  EXPECT_FALSE(b.dirty() && false);
}

TEST_F(SimTest, IdsAtTheEndsOfInt64AreReadInParts) {
  // A damaged recording's ids can be anywhere in int64: reading it in parts must neither overflow
  // (UBSan checks this in the sanitizer build) nor skip or repeat rows.
  testing::SimOptions o;
  o.workers = 2;
  o.epochs = 1;
  o.batches = 40;
  const std::string path = dir_.file("far_ids.db");
  const auto truth = testing::write_sim_recording(path, o);
  {
    auto db = Db::open(path, Db::Mode::kReadWrite);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(
        (*db)
            ->exec("UPDATE spans SET id = 9223372036854775000 WHERE id = (SELECT max(id) FROM spans);"
                   "UPDATE spans SET id = -9223372036854775000 WHERE id = (SELECT min(id) FROM spans);"
                   "UPDATE instants SET id = 9223372036854775807 WHERE id = (SELECT max(id) FROM instants);"
                   "UPDATE instants SET id = 8000000000000000000 WHERE id = (SELECT min(id) FROM instants);"
                   "UPDATE counters SET rowid = 9000000000000000000 WHERE rowid = (SELECT max(rowid) FROM counters);")
            .ok());
  }
  auto tail = RecordingTail::open(path);
  ASSERT_TRUE(tail.ok()) << tail.status().message();
  SnapshotBuilder b;
  int64_t spans = 0, instants = 0, polls = 0;
  for (; polls < 100; ++polls) {
    auto st = (*tail)->poll(b, 50);
    ASSERT_TRUE(st.ok()) << st.status().message();
    EXPECT_GE(st->pending, 0);
    spans += st->spans;
    instants += st->instants;
    if (st->pending == 0) break;
  }
  EXPECT_LT(polls, 100) << "the backlog never emptied";
  // The span moved below zero is before where reading starts (ids are positive in a recording);
  // every other row is read exactly once.
  EXPECT_EQ(spans, truth.spans - 1);
  auto reader = Reader::open(path);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(instants, *(*reader)->count("instants"));
  auto again = (*tail)->poll(b, 50);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->rows, 0);
}

TEST_F(SimTest, ALargeFirstReadSplitAcrossTwoConnectionsMissesNothing) {
  // Enough counter samples and instants that the first poll reads them on a second connection.
  testing::SimOptions o;
  o.workers = 4;
  o.epochs = 1;
  o.batches = 1000;
  o.all_counter_tracks = true;
  o.sample_ns = 1 * kMsNs;
  const auto truth = testing::write_sim_recording(dir_.file("big.db"), o);
  auto tail = RecordingTail::open(dir_.file("big.db"));
  ASSERT_TRUE(tail.ok());
  SnapshotBuilder b;
  auto st = (*tail)->poll(b);
  ASSERT_TRUE(st.ok()) << st.status().message();
  auto reader = Reader::open(dir_.file("big.db"));
  ASSERT_TRUE(reader.ok());
  const int64_t instants = *(*reader)->count("instants");
  EXPECT_GT(instants + *(*reader)->count("counters"), 200000);
  EXPECT_EQ(st->instants, instants);
  EXPECT_EQ(st->spans, truth.spans);
  auto tl = b.publish();
  int64_t markers = 0;
  for (const Lane& l : tl->lanes) {
    for (const Track& t : l.tracks) markers += static_cast<int64_t>(t.markers.size());
  }
  EXPECT_EQ(markers, instants);
  // Only the three tracks the dashboard draws are read: each fully, in time order.
  auto tracks = (*reader)->counter_tracks();
  ASSERT_TRUE(tracks.ok());
  int64_t wanted = 0;
  for (const CounterTrackRow& t : *tracks) {
    const int metric = t.name == "proc.cpu"         ? kCpu
                       : t.name == "proc.runq_wait" ? kRunq
                       : t.name == "proc.rss"       ? kRss
                                                    : -1;
    if (metric < 0) continue;
    auto rows = (*reader)->counters(t.id);
    ASSERT_TRUE(rows.ok());
    wanted += static_cast<int64_t>(rows->size());
    EXPECT_EQ(tl->counters.at(t.pid).series[metric].samples.size(), rows->size()) << t.name << " of " << t.pid;
  }
  EXPECT_EQ(st->counters, wanted);
  // A second poll finds nothing new.
  st = (*tail)->poll(b);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->rows, 0);
}

TEST_F(SimTest, OverlappingSpansOfOneDepthGoToOverflowRows) {
  const std::string path = dir_.file("overlap.db");
  auto w = Writer::create(path);
  ASSERT_TRUE(w.ok());
  Writer& wr = **w;
  ASSERT_TRUE(wr.begin().ok());
  wr.add_string(1, "range");
  ProcessRow p;
  p.pid = 7;
  const int64_t th = wr.add_thread(ThreadRow{0, wr.add_process(p), 7, "t"});
  for (int64_t s : {0, 5, 8, 20}) {  // 0-10, 5-15, 8-18 overlap; 20-30 fits row 0
    SpanRow r;
    r.thread_id = th;
    r.start_ns = s;
    r.dur_ns = 10;
    r.name_id = 1;
    wr.add_span(r);
  }
  ASSERT_TRUE(wr.commit().ok());
  auto snap = testing::load_snapshot(path, false);
  const Lane& l = snap->timeline->lanes.at(0);
  EXPECT_EQ(l.row_count, 3);
  EXPECT_EQ(l.tracks[0].rows[0].size(), 2u);
  EXPECT_EQ(l.items, 4);
}

}  // namespace
}  // namespace stallscope
