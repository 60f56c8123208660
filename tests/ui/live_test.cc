// Following a recording while it is written: a Recorder drains the collector's arena into the
// database (as `stallscope run` does) while the dashboard's SnapshotSource tails it. New spans must
// appear in a published snapshot within 250 ms of being recorded; a recording whose recorder is
// gone is shown as cut off, with everything that was flushed.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <utility>
#include <vector>

#include "collector/collector.h"
#include "stallscope/stallscope.h"
#include "storage/recorder.h"
#include "tests/ui/sim_recording.h"
#include "tests/unit/test_util.h"
#include "ui/analysis_view.h"
#include "ui/snapshot_source.h"

namespace stallscope {
namespace {

using Clock = std::chrono::steady_clock;
using namespace ui;

// Items named `name` over every lane of the snapshot.
int64_t count_named(const Snapshot& s, const std::string& name) {
  if (!s.timeline) return 0;
  int64_t n = 0;
  for (const Lane& l : s.timeline->lanes) {
    for (const Track& t : l.tracks) {
      for (const Row& r : t.rows) {
        for (size_t i = 0; i < r.size(); ++i) n += s.timeline->str(r[i].name_id) == name;
      }
    }
  }
  return n;
}

TEST(LiveTest, NewSpansAppearWithinAQuarterOfASecond) {
  testing::TempDir dir;
  const std::string name = testing::unique_name("ss-ui-live");
  std::string err;
  Arena* arena = Arena::create(name, ArenaConfig{}, &err);
  ASSERT_NE(arena, nullptr) << err;
  Collector::join(arena);
  const std::string path = dir.file("live.db");
  // The recorder's default flush interval, as `stallscope run` uses it.
  auto rec = Recorder::start(arena, path, {{"command", "live test"}});
  ASSERT_TRUE(rec.ok()) << rec.status().message();

  SnapshotSource src(path);
  ASSERT_TRUE(src.wait_until([](const Snapshot& s) { return s.state != SourceState::kLoading; }, 5000));
  EXPECT_EQ(src.current()->state, SourceState::kLive) << src.current()->error;

  const uint32_t id = ss_intern("ui.live_probe");
  std::vector<double> latencies;
  for (int k = 1; k <= 8; ++k) {
    ss_span_begin_args(id, k, 0, 0);
    ss_span_end();
    const auto t0 = Clock::now();  // recorded: the span has ended
    const bool seen = src.wait_until([&](const Snapshot& s) { return count_named(s, "ui.live_probe") >= k; }, 2000);
    ASSERT_TRUE(seen) << "span " << k << " never appeared";
    latencies.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    std::this_thread::sleep_for(std::chrono::milliseconds(37 * k % 120));  // land at different points of a flush
  }
  std::string shown;
  for (double l : latencies) shown += " " + std::to_string(static_cast<int>(l));
  std::printf("recorded -> visible in a snapshot (ms):%s\n", shown.c_str());
  for (size_t i = 0; i < latencies.size(); ++i) {
    EXPECT_LT(latencies[i], 250.0) << "span " << i + 1 << " took " << latencies[i] << " ms to appear";
  }
  // The snapshot thread never blocked the recorder: it kept flushing.
  EXPECT_FALSE((*rec)->failed());

  // Finishing the recording turns the live view into a replay.
  ASSERT_TRUE((*rec)->stop().ok());
  EXPECT_TRUE(src.wait_until([](const Snapshot& s) { return s.state == SourceState::kFinished; }, 3000));
  EXPECT_EQ(count_named(*src.current(), "ui.live_probe"), 8);
  Collector::leave();
  Arena::unlink(name);
}

TEST(LiveTest, AnalysisFollowsTheData) {
  testing::TempDir dir;
  testing::SimOptions o;
  o.workers = 2;
  o.epochs = 1;
  testing::write_sim_recording(dir.file("run.db"), o);
  SnapshotSource src(dir.file("run.db"));
  ASSERT_TRUE(src.wait_until(SnapshotSource::settled, 20000));
  auto s = src.current();
  EXPECT_EQ(s->state, SourceState::kFinished);
  ASSERT_TRUE(s->analysis);
  EXPECT_EQ(s->analysis->report.steps, o.batches);
  EXPECT_GT(s->open_seconds, 0);
  // The file's size (the database and any write-ahead log) comes with the data.
  struct stat st {};
  ASSERT_EQ(::stat(dir.file("run.db").c_str(), &st), 0);
  int64_t bytes = st.st_size;
  if (::stat(dir.file("run.db-wal").c_str(), &st) == 0) bytes += st.st_size;
  EXPECT_EQ(s->file_bytes, bytes);
}

TEST(LiveTest, ARecordingCutOffMidRunShowsWhatWasFlushed) {
  testing::TempDir dir;
  testing::SimOptions o;
  o.workers = 2;
  o.epochs = 2;
  o.complete = false;  // as if the launcher was killed: meta complete=0, no recorder alive
  testing::write_sim_recording(dir.file("killed.db"), o);
  SnapshotSource src(dir.file("killed.db"));
  ASSERT_TRUE(src.wait_until(SnapshotSource::settled, 20000));
  auto s = src.current();
  EXPECT_EQ(s->state, SourceState::kCutOff);
  ASSERT_TRUE(s->timeline);
  EXPECT_EQ(count_named(*s, "dl.next"), 2 * (o.batches + 1));
  ASSERT_TRUE(s->analysis);
  EXPECT_FALSE(s->analysis->report.complete);
}

// Items over every lane (all rows, all tracks) and markers: the whole timeline's content.
std::pair<int64_t, int64_t> content(const Timeline& tl) {
  int64_t items = 0, markers = 0;
  for (const Lane& l : tl.lanes) {
    for (const Track& t : l.tracks) {
      items += static_cast<int64_t>(t.steps.size());
      for (const Row& r : t.rows) items += static_cast<int64_t>(r.size());
      markers += static_cast<int64_t>(t.markers.size());
    }
  }
  return {items, markers};
}

TEST(LiveTest, ALargeRecordingOpensInPartsShownAsTheyArrive) {
  testing::TempDir dir;
  testing::SimOptions o;
  o.workers = 3;
  o.epochs = 2;
  o.batches = 200;
  const auto truth = testing::write_sim_recording(dir.file("big.db"), o);

  // The reference: one read.
  SourceOptions one;
  one.load_part_rows = 0;
  SnapshotSource whole(dir.file("big.db"), one);
  ASSERT_TRUE(whole.wait_until(SnapshotSource::settled, 20000));
  auto ref = whole.current();
  ASSERT_EQ(ref->state, SourceState::kFinished);
  EXPECT_EQ(ref->timeline->spans, truth.spans);

  // In parts of ~1/8 of the rows: every part is published while the state says loading, with
  // more rows each time and a growing share read; the analysis waits for the last part.
  struct Seen {
    SourceState state;
    int64_t rows;
    double fraction;
    bool analysis;
  };
  std::vector<Seen> seen;
  SourceOptions parts;
  parts.load_part_rows = ref->timeline->rows_read / 8;
  parts.on_publish = [&](const Snapshot& s) {
    if (s.timeline) seen.push_back({s.state, s.timeline->rows_read, s.load_fraction, s.analysis != nullptr});
  };
  SnapshotSource src(dir.file("big.db"), parts);
  ASSERT_TRUE(src.wait_until(SnapshotSource::settled, 20000));
  auto s = src.current();
  ASSERT_EQ(s->state, SourceState::kFinished);
  int loading = 0;
  for (size_t i = 0; i < seen.size(); ++i) {
    if (seen[i].state != SourceState::kLoading) continue;
    ++loading;
    EXPECT_FALSE(seen[i].analysis);
    EXPECT_GT(seen[i].fraction, 0.0);
    EXPECT_LT(seen[i].fraction, 1.0);
    if (i > 0) {
      EXPECT_GT(seen[i].rows, seen[i - 1].rows);
      EXPECT_GT(seen[i].fraction, seen[i - 1].fraction);
    }
  }
  EXPECT_GE(loading, 6);
  EXPECT_LE(loading, 10);
  EXPECT_GT(s->first_timeline_seconds, 0);
  EXPECT_LE(s->first_timeline_seconds, s->open_seconds);
  EXPECT_EQ(s->load_fraction, 1.0);
  // Once loaded, the same timeline as one read gives, and the analysis ran on it.
  EXPECT_EQ(s->timeline->rows_read, ref->timeline->rows_read);
  EXPECT_EQ(s->timeline->spans, ref->timeline->spans);
  EXPECT_EQ(s->timeline->instants, ref->timeline->instants);
  EXPECT_EQ(s->timeline->counter_samples, ref->timeline->counter_samples);
  EXPECT_EQ(s->timeline->lanes.size(), ref->timeline->lanes.size());
  EXPECT_EQ(content(*s->timeline), content(*ref->timeline));
  EXPECT_EQ(s->timeline->end_ns, ref->timeline->end_ns);
  ASSERT_TRUE(s->analysis);
  EXPECT_EQ(s->analysis->report.steps, ref->analysis->report.steps);
}

TEST(LiveTest, AMissingFileIsAnErrorSnapshot) {
  SnapshotSource src("/nonexistent/dir/run.db");
  ASSERT_TRUE(src.wait_until(SnapshotSource::settled, 5000));
  auto s = src.current();
  EXPECT_EQ(s->state, SourceState::kError);
  EXPECT_NE(s->error.find("/nonexistent/dir/run.db"), std::string::npos) << s->error;
}

}  // namespace
}  // namespace stallscope
