// The run over time (analysis/over_time.h): the period a window is cut into, and each period's
// figures read from the summaries against the same figures counted from the detail rows of the
// recording: next() calls, their wait and the optimizer steps exactly, the workers' fetch
// quantiles within the sketch's error. And what a recording without summaries gets.
#include "analysis/over_time.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "analysis/report.h"
#include "analysis/session.h"
#include "storage/reader.h"
#include "storage/sqlite.h"
#include "tests/analysis/fixture.h"
#include "tests/unit/test_util.h"

namespace stallscope::analysis {
namespace {

using stallscope::testing::kMs;
using stallscope::testing::RecordingBuilder;
using stallscope::testing::SimConfig;
using stallscope::testing::SimTruth;
using stallscope::testing::simulate;

constexpr int64_t kS = 1'000'000'000;

TEST(OverTimeTest, PeriodIsTheShortestNiceLengthThatFits) {
  EXPECT_EQ(choose_period(3 * kS, 12).period_ns, 1 * kS);
  EXPECT_EQ(choose_period(3 * kS, 12).level_ns, 1 * kS);
  EXPECT_EQ(choose_period(12 * kS, 12).period_ns, 1 * kS);
  EXPECT_EQ(choose_period(12 * kS + 1, 12).period_ns, 2 * kS);
  EXPECT_EQ(choose_period(70 * kS, 12).period_ns, 10 * kS);
  EXPECT_EQ(choose_period(70 * kS, 12).level_ns, 10 * kS);
  EXPECT_EQ(choose_period(3600 * kS, 12).period_ns, 300 * kS);
  EXPECT_EQ(choose_period(3600 * kS, 12).level_ns, 100 * kS);
  EXPECT_EQ(choose_period(24 * 3600 * kS, 12).period_ns, 7200 * kS);
  EXPECT_EQ(choose_period(24 * 3600 * kS, 12).level_ns, 100 * kS);
  // 15 min is a multiple of 100 s; 30 s only of 10 s.
  EXPECT_EQ(choose_period(900 * kS * 12, 12).level_ns, 100 * kS);
  EXPECT_EQ(choose_period(30 * kS * 12, 12).level_ns, 10 * kS);
  // Past max_periods days: whole days.
  EXPECT_EQ(choose_period(30 * 86400 * kS, 12).period_ns, 3 * 86400 * kS);
  EXPECT_EQ(choose_period(0, 12).period_ns, 1 * kS);
  EXPECT_EQ(choose_period(5 * kS, 0).period_ns, 5 * kS);  // at least one period
}

class OverTimeFromRecording : public ::testing::Test {
 protected:
  stallscope::testing::TempDir dir_;
  std::string path_ = dir_.file("run.db");
  SimTruth truth_;

  // A training loader with 2 workers over 3 epochs of about 25 s, its fetches 4x slower from the
  // second epoch on (the loop starts to wait), an optimizer step after every batch, and an
  // evaluation loader in the same process between the epochs that must not count.
  void record() {
    RecordingBuilder b(path_);
    SimConfig c;
    c.epochs = 3;
    c.batches_per_epoch = 250;
    c.num_workers = 2;
    c.persistent_workers = true;
    c.compute_ns = 100 * kMs;
    c.fetch_ns = [](int epoch, int batch) { return (epoch == 0 ? 60 : 240) * kMs + (batch % 7) * kMs; };
    c.finish = false;
    truth_ = simulate(b, c);
    // The steps: one after each hand-off, written after the rest (their buckets are read back).
    for (int64_t h : truth_.handoffs) b.instant(truth_.main_thread, "dl.step", h + 50 * kMs, int64_t{0}, int64_t{0});
    // An evaluation loader's next() calls on the same thread: loader 1.
    for (int i = 0; i < 40; ++i) {
      b.span(truth_.main_thread, "dl.next", truth_.window_start_ns + 5 * kS + i * 100 * kMs, 30 * kMs, int64_t{1}, i);
    }
    b.finish();
  }

  Report analyzed(Reader& reader) {
    auto s = load_session(reader);
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? analyze(*s) : Report{};
  }
};

TEST_F(OverTimeFromRecording, PeriodsAgreeWithTheDetailRows) {
  record();
  auto reader = Reader::open(path_);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  const Report r = analyzed(**reader);
  ASSERT_TRUE(r.main_loader.has_value());
  ASSERT_EQ(*r.main_loader, 0);
  auto ot = over_time(**reader, r);
  ASSERT_TRUE(ot.ok()) << ot.status().message();
  ASSERT_TRUE(ot->available) << ot->note;
  EXPECT_EQ(ot->loader, 0);
  const int64_t window = r.window_end_ns - r.window_start_ns;
  EXPECT_EQ(ot->period_ns, choose_period(window, 12).period_ns);
  ASSERT_GE(ot->periods.size(), 6u);
  ASSERT_LE(ot->periods.size(), 13u);
  EXPECT_EQ(ot->periods.front().t0_ns, r.window_start_ns);
  EXPECT_EQ(ot->periods.back().t1_ns, r.window_end_ns);

  // The same figures from the detail rows.
  auto s = load_session(path_);
  ASSERT_TRUE(s.ok());
  const std::set<int64_t> workers(truth_.worker_pids.begin(), truth_.worker_pids.end());
  int64_t all_calls = 0;
  for (size_t k = 0; k < ot->periods.size(); ++k) {
    const OverTimePeriod& p = ot->periods[k];
    if (k > 0) {
      EXPECT_EQ(p.t0_ns, ot->periods[k - 1].t1_ns);
    }
    const int64_t lo = k == 0 ? INT64_MIN : p.t0_ns;
    const int64_t hi = k + 1 == ot->periods.size() ? INT64_MAX : p.t1_ns;
    int64_t calls = 0, wait_ns = 0, steps = 0;
    std::vector<int64_t> fetch;
    for (const SpanRow& sp : s->spans) {
      if (sp.start_ns < lo || sp.start_ns >= hi || !sp.dur_ns) continue;
      const std::string& name = s->string(sp.name_id);
      if (name == "dl.next" && sp.arg0 == 0 && sp.thread_id == truth_.main_thread) {
        ++calls;
        wait_ns += *sp.dur_ns;
      } else if (name == "dl.fetch" && workers.count(s->pid_of_thread(sp.thread_id)) != 0) {
        fetch.push_back(*sp.dur_ns);
      }
    }
    for (const InstantRow& in : s->instants) {
      if (in.ts_ns >= lo && in.ts_ns < hi && s->string(in.name_id) == "dl.step") ++steps;
    }
    all_calls += calls;
    EXPECT_EQ(p.next_calls, calls) << "period " << k;
    EXPECT_NEAR(p.wait_s, static_cast<double>(wait_ns) / 1e9, 1e-9) << "period " << k;
    EXPECT_EQ(p.steps, steps) << "period " << k;
    EXPECT_EQ(p.fetches, static_cast<int64_t>(fetch.size())) << "period " << k;
    ASSERT_FALSE(fetch.empty()) << "period " << k;
    std::sort(fetch.begin(), fetch.end());
    for (double q : {0.5, 0.99}) {
      const double exact = static_cast<double>(fetch[static_cast<size_t>(q * static_cast<double>(fetch.size() - 1))]);
      const double got = (q == 0.5 ? *p.fetch_p50_ms : *p.fetch_p99_ms) * 1e6;
      EXPECT_LE(std::fabs(got - exact), 0.01 * exact + 1) << "period " << k << " q " << q;
    }
  }
  // Every call of the training loader is in a period: 3 epochs of 250 batches, each epoch's
  // StopIteration call too.
  EXPECT_EQ(all_calls, 3 * 251);
  // The loop waits once the fetches slow down: the last period waits more than the first.
  EXPECT_LT(ot->periods.front().wait_fraction(), 0.05);
  EXPECT_GT(ot->periods.back().wait_fraction(), 0.1);
  EXPECT_LT(*ot->periods.front().fetch_p50_ms, 70);
  EXPECT_GT(*ot->periods.back().fetch_p50_ms, 230);
}

TEST_F(OverTimeFromRecording, TheReportShowsItInTextAndJson) {
  record();
  auto reader = Reader::open(path_);
  ASSERT_TRUE(reader.ok());
  Report r = analyzed(**reader);
  auto ot = over_time(**reader, r);
  ASSERT_TRUE(ot.ok());
  r.over_time = *ot;
  ASSERT_GE(r.wall_s, 60);
  const std::string text = render_text(r);
  EXPECT_NE(text.find("Over time (training loader 0, per "), std::string::npos) << text;
  Json j = to_json(r);
  ASSERT_TRUE(j["over_time"].is_object());
  EXPECT_EQ(j["over_time"]["periods"].size(), ot->periods.size());
  EXPECT_EQ(j["over_time"]["periods"][0]["next_calls"].get<int64_t>(), ot->periods[0].next_calls);
}

TEST_F(OverTimeFromRecording, WithoutSummariesItIsNotAvailableAndSaysWhy) {
  record();
  {
    auto db = Db::open(path_, Db::Mode::kReadWrite);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->exec("DROP TABLE span_summaries; DROP TABLE instant_summaries").ok());
  }
  auto reader = Reader::open(path_);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  const Report r = analyzed(**reader);
  auto ot = over_time(**reader, r);
  ASSERT_TRUE(ot.ok()) << ot.status().message();
  EXPECT_FALSE(ot->available);
  EXPECT_NE(ot->note.find("no summaries"), std::string::npos) << ot->note;
  EXPECT_TRUE(to_json(Report{})["over_time"].is_null());
}

TEST_F(OverTimeFromRecording, ADamagedSketchIsAnErrorNotACrash) {
  record();
  {
    auto db = Db::open(path_, Db::Mode::kReadWrite);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->exec("UPDATE span_summaries SET sketch = x'ffffffffffffffffffff'").ok());
  }
  auto reader = Reader::open(path_);
  ASSERT_TRUE(reader.ok());
  const Report r = analyzed(**reader);
  auto ot = over_time(**reader, r);
  ASSERT_FALSE(ot.ok());
  EXPECT_NE(ot.status().message().find("span_summaries"), std::string::npos) << ot.status().message();
}

}  // namespace
}  // namespace stallscope::analysis
