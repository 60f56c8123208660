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
  void record(bool with_drains = false) {
    RecordingBuilder b(path_);
    SimConfig c;
    c.epochs = 3;
    c.batches_per_epoch = 250;
    c.num_workers = 2;
    c.persistent_workers = true;
    c.compute_ns = 100 * kMs;
    c.fetch_ns = [](int epoch, int batch) { return (epoch == 0 ? 60 : 240) * kMs + (batch % 7) * kMs; };
    c.last_batch_size = 5;  // drop_last=False: a batch of 32 would count 27 samples too many
    c.iter_ns = 40 * kMs;   // each epoch's __iter__ before its first next(): "starting the loader"
    c.finish = false;
    truth_ = simulate(b, c);
    // The steps: one after each hand-off, written after the rest (their buckets are read back).
    for (int64_t h : truth_.handoffs) b.instant(truth_.main_thread, "dl.step", h + 50 * kMs, int64_t{0}, int64_t{0});
    // An evaluation loader's next() calls on the same thread: loader 1.
    for (int i = 0; i < 40; ++i) {
      b.span(truth_.main_thread, "dl.next", truth_.window_start_ns + 5 * kS + i * 100 * kMs, 30 * kMs, int64_t{1}, i);
    }
    if (with_drains) {
      // One drain row at the end that covers every span, as the collector's drains together do: a
      // report's cut is measured back from the latest drain.
      b.commit();
      auto db = Db::open(path_, Db::Mode::kReadOnly);
      ASSERT_TRUE(db.ok());
      auto last = (*db)->query_int("SELECT max(id) FROM spans");
      auto end = (*db)->query_int("SELECT max(start_ns + dur_ns) FROM spans");
      ASSERT_TRUE(last.ok() && end.ok());
      end_ns_ = *end;
      b.writer().add_flush(FlushRow{*end, 1000, 0, int64_t{1}, *last, int64_t{0}, *end});
    }
    b.finish();
  }
  int64_t end_ns_ = 0;

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

// The training loader's hand-offs from handoff_summaries: batches, samples (each batch's collated
// size, joined to the worker that collated it) and the step times' quantiles, over the whole run
// and per period, against the report of every row.
TEST_F(OverTimeFromRecording, BatchesSamplesAndStepTimesAgreeWithTheReportOfEveryRow) {
  record();
  auto reader = Reader::open(path_);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  const Report r = analyzed(**reader);
  auto ot = over_time(**reader, r);
  ASSERT_TRUE(ot.ok()) << ot.status().message();
  ASSERT_TRUE(ot->available) << ot->note;
  ASSERT_TRUE(ot->total.batches.has_value());
  EXPECT_EQ(*ot->total.batches, 3 * 250);
  EXPECT_EQ(*ot->total.batches, r.steps);
  EXPECT_EQ(ot->total.samples, 3 * (249 * 32 + 5));
  EXPECT_EQ(ot->total.samples, r.samples);
  EXPECT_EQ(ot->total.samples_unknown, 0);
  // The loader's starts, once per epoch: with the waits, the report's data stall.
  EXPECT_EQ(ot->total.starts, 3);
  EXPECT_NEAR(ot->total.start_s, 3 * 0.040, 1e-9);
  EXPECT_NEAR(ot->total.start_s, r.stall.by_cause_s.at(kCauseLoaderStart), 1e-9);
  EXPECT_NEAR(ot->total.wait_s + ot->total.start_s, r.stall.seconds, 1e-9);
  // The step times: the gaps between the hand-offs, each quantile within 1 % of the exact value of
  // its rank.
  std::vector<int64_t> gaps;
  for (size_t i = 1; i < truth_.handoffs.size(); ++i) gaps.push_back(truth_.handoffs[i] - truth_.handoffs[i - 1]);
  std::sort(gaps.begin(), gaps.end());
  ASSERT_EQ(gaps.size(), 3u * 250 - 1);
  for (auto [q, got] : {std::pair{0.5, ot->total.step_p50_ms}, std::pair{0.9, ot->total.step_p90_ms},
                        std::pair{0.99, ot->total.step_p99_ms}}) {
    ASSERT_TRUE(got.has_value()) << q;
    const double exact = static_cast<double>(gaps[static_cast<size_t>(q * static_cast<double>(gaps.size() - 1))]);
    EXPECT_LE(std::fabs(*got * 1e6 - exact), 0.01 * exact + 1) << q;
  }
  EXPECT_NEAR(*ot->total.step_p50_ms, *r.step_time.p50_ms, 0.01 * *r.step_time.p50_ms + 0.01);
  // Per period: the hand-offs that ended in it.
  int64_t batches = 0;
  for (size_t k = 0; k < ot->periods.size(); ++k) {
    const OverTimePeriod& p = ot->periods[k];
    const int64_t lo = k == 0 ? INT64_MIN : p.t0_ns;
    const int64_t hi = k + 1 == ot->periods.size() ? INT64_MAX : p.t1_ns;
    const auto n =
        std::count_if(truth_.handoffs.begin(), truth_.handoffs.end(), [&](int64_t h) { return h >= lo && h < hi; });
    ASSERT_TRUE(p.batches.has_value());
    EXPECT_EQ(*p.batches, n) << "period " << k;
    batches += *p.batches;
  }
  EXPECT_EQ(batches, *ot->total.batches);
  // The text's over-time table and the JSON carry them.
  Report with = r;
  with.over_time = *ot;
  const Json j = to_json(with);
  EXPECT_EQ(j["over_time"]["total"]["batches"].get<int64_t>(), 750);
  EXPECT_EQ(j["over_time"]["total"]["samples"].get<int64_t>(), r.samples);
  EXPECT_NEAR(j["over_time"]["total"]["samples_per_s"].get<double>(),
              static_cast<double>(r.samples) / ot->total.length_s(), 1e-6);
  const std::string text = render_text(with);
  EXPECT_NE(text.find("samples/s   step p50"), std::string::npos) << text;
}

// queue_summaries: the training loader's queue over the whole run equals the report's Queue section,
// which builds the step functions from every row.
TEST_F(OverTimeFromRecording, TheQueueAgreesWithTheReportOfEveryRow) {
  record();
  auto reader = Reader::open(path_);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  const Report r = analyzed(**reader);
  ASSERT_TRUE(r.queue.available) << r.queue.note;
  auto ot = over_time(**reader, r);
  ASSERT_TRUE(ot.ok()) << ot.status().message();
  ASSERT_TRUE(ot->available) << ot->note;
  ASSERT_TRUE(ot->total.queue.has_value());
  const QueuePeriod& q = *ot->total.queue;
  EXPECT_NEAR(q.covered_s(), r.queue.active_s, 1e-9);
  EXPECT_NEAR(q.ready_mean(), r.queue.mean_ready.value_or(-1), 1e-9);
  EXPECT_NEAR(q.empty_fraction(), r.queue.empty_fraction.value_or(-1), 1e-9);
  EXPECT_NEAR(q.in_flight_mean(), r.queue.mean_in_flight.value_or(-1), 1e-9);
  EXPECT_EQ(q.ready_max, r.queue.max_ready);
  // The first epoch keeps the queue full (fetches faster than the steps: prefetch_factor 2 x 2
  // workers), the later ones run it empty.
  EXPECT_EQ(q.ready_max, 4);
  EXPECT_EQ(q.ready_min, 0);
  EXPECT_GT(q.empty_fraction(), 0.3);
  ASSERT_GE(ot->periods.size(), 3u);
  ASSERT_TRUE(ot->periods.front().queue.has_value());
  ASSERT_TRUE(ot->periods.back().queue.has_value());
  EXPECT_GT(ot->periods.front().queue->ready_mean(), 2.0);
  EXPECT_LT(ot->periods.back().queue->ready_mean(), 0.5);
  // The periods add up to the whole run.
  int64_t active = 0;
  for (const OverTimePeriod& p : ot->periods) active += p.queue ? p.queue->covered_ns : 0;
  EXPECT_EQ(active, q.covered_ns);
  Report with = r;
  with.over_time = *ot;
  const Json j = to_json(with);
  EXPECT_NEAR(j["over_time"]["total"]["queue"]["mean_ready"].get<double>(), q.ready_mean(), 1e-12);
  EXPECT_EQ(j["over_time"]["total"]["queue"]["max_ready"].get<int64_t>(), 4);
  const std::string text = render_text(with);
  EXPECT_NE(text.find("step p50  ready  fetch p50"), std::string::npos) << text;
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

// A long recording's report reads the detail of its latest part only (choose_detail_from,
// LoadOptions::detail_from_ns): what it reads starts at an epoch's start, the loader's settings
// and workers from before the cut are still known, and the whole run's figures come from the
// summaries, equal to those of the report that read every row.
TEST_F(OverTimeFromRecording, ALongRecordingIsReadFromItsLatestPartAndTheSummariesCoverTheRest) {
  record(/*with_drains=*/true);
  auto reader = Reader::open(path_);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  const Report whole = analyzed(**reader);
  auto whole_ot = over_time(**reader, whole);
  ASSERT_TRUE(whole_ot.ok() && whole_ot->available);
  auto all = load_session(**reader);
  ASSERT_TRUE(all.ok());

  // Every row fits the default budget; 'all' cuts nothing.
  auto none = choose_detail_from(**reader, DetailBudget{});
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_FALSE(none->has_value());
  DetailBudget everything;
  everything.all = true;
  everything.last_ns = 1;
  ASSERT_FALSE(choose_detail_from(**reader, everything)->has_value());

  // The latest 40 s: the cut moves on to the next epoch's start when one comes soon enough.
  DetailBudget last;
  last.last_ns = 40 * kS;
  auto from = choose_detail_from(**reader, last);
  ASSERT_TRUE(from.ok()) << from.status().message();
  ASSERT_TRUE(from->has_value());
  const int64_t cut = end_ns_ - 40 * kS;
  std::vector<int64_t> begins;
  for (const InstantRow& i : all->instants) {
    if (all->string(i.name_id) == "dl.epoch_begin" && i.arg0 == 0) begins.push_back(i.ts_ns);
  }
  ASSERT_EQ(begins.size(), 3u);
  const auto next_begin = std::lower_bound(begins.begin(), begins.end(), cut);
  if (next_begin != begins.end() && *next_begin <= cut + 20 * kS) {
    EXPECT_EQ(**from, *next_begin);
  } else {
    EXPECT_EQ(**from, cut);
  }
  ASSERT_GT(**from, begins.front());

  LoadOptions options;
  options.detail_from_ns = **from;
  auto part = load_session(**reader, options);
  ASSERT_TRUE(part.ok()) << part.status().message();
  EXPECT_EQ(part->loaded_from_ns, **from);
  EXPECT_EQ(part->end_ns, all->end_ns);
  EXPECT_LT(part->spans.size(), all->spans.size());
  for (const SpanRow& sp : part->spans) EXPECT_GE(part->span_end(sp), **from);
  int64_t configs = 0, starts = 0;
  for (const InstantRow& i : part->instants) {
    const std::string& name = part->string(i.name_id);
    configs += name == "dl.config";
    starts += name == "dl.worker_start";
    if (i.ts_ns < **from) {
      EXPECT_TRUE(name == "dl.config" || name.rfind("dl.worker_", 0) == 0) << name;
    }
  }
  EXPECT_EQ(configs, 1);
  EXPECT_EQ(starts, 2);  // the persistent workers started before the cut
  // Every row from the cut on is there: the same as the whole load's.
  auto count_from = [&](const Session& s) {
    int64_t n = 0;
    for (const SpanRow& sp : s.spans) n += s.span_end(sp) >= **from;
    for (const InstantRow& i : s.instants) n += i.ts_ns >= **from;
    return n;
  };
  EXPECT_EQ(count_from(*part), count_from(*all));

  Report r = analyze(*part);
  ASSERT_TRUE(r.main_loader.has_value());
  EXPECT_EQ(*r.main_loader, 0);
  ASSERT_TRUE(r.detail_from_ns.has_value());
  EXPECT_EQ(*r.detail_from_ns, **from);
  EXPECT_GE(r.window_start_ns, **from);
  EXPECT_EQ(r.window_end_ns, whole.window_end_ns);
  ASSERT_NE(r.loader(), nullptr);
  EXPECT_EQ(r.loader()->num_workers, whole.loader()->num_workers);
  ASSERT_EQ(r.workers.size(), 2u);
  for (const WorkerStats& w : r.workers) {
    EXPECT_LE(w.life_s, static_cast<double>(r.window_end_ns - **from) / 1e9 + 1) << w.pid;
    EXPECT_GT(w.busy_fraction, 0.5) << w.pid;  // busy over the life read, not the whole life
  }
  bool said = false;
  for (const std::string& n : r.notes) said |= n.find("a long recording") != std::string::npos;
  EXPECT_TRUE(said);

  // The whole run from the summaries: what the report of every row gives, period for period.
  auto ot = over_time(**reader, r);
  ASSERT_TRUE(ot.ok()) << ot.status().message();
  ASSERT_TRUE(ot->available) << ot->note;
  EXPECT_EQ(ot->total.next_calls, 3 * 251);
  EXPECT_EQ(ot->total.next_calls, whole_ot->total.next_calls);
  EXPECT_DOUBLE_EQ(ot->total.wait_s, whole_ot->total.wait_s);
  EXPECT_EQ(ot->total.steps, whole_ot->total.steps);
  EXPECT_EQ(ot->total.fetches, whole_ot->total.fetches);
  EXPECT_EQ(ot->total.fetch_p99_ms, whole_ot->total.fetch_p99_ms);
  EXPECT_EQ(ot->total.batches, whole_ot->total.batches);
  EXPECT_EQ(ot->total.batches, whole.steps);  // the whole run's, where the report's cover the latest part
  EXPECT_LT(r.steps, whole.steps);
  EXPECT_EQ(ot->total.samples, whole.samples);
  EXPECT_EQ(ot->total.starts, whole_ot->total.starts);
  EXPECT_DOUBLE_EQ(ot->total.start_s, whole_ot->total.start_s);
  EXPECT_EQ(ot->total.step_p99_ms, whole_ot->total.step_p99_ms);
  EXPECT_LE(ot->periods.front().t0_ns, whole.window_start_ns + kS);
  double wait_ns = 0;
  for (const SpanRow& sp : all->spans) {
    if (all->string(sp.name_id) == "dl.next" && sp.arg0 == 0 && sp.dur_ns) wait_ns += static_cast<double>(*sp.dur_ns);
  }
  EXPECT_NEAR(ot->total.wait_s, wait_ns / 1e9, 1e-9);
  // Workers whose start was not read (those of earlier epochs, on a long run): the training
  // process's children started where only the training loader started workers still count.
  Report unknown_workers = r;
  unknown_workers.workers.clear();
  auto by_children = over_time(**reader, unknown_workers);
  ASSERT_TRUE(by_children.ok()) << by_children.status().message();
  EXPECT_EQ(by_children->total.fetches, whole_ot->total.fetches);
  EXPECT_EQ(by_children->total.fetch_p50_ms, whole_ot->total.fetch_p50_ms);
  unknown_workers.detail_from_ns.reset();  // read whole, the report's workers are all there are
  auto whole_read = over_time(**reader, unknown_workers);
  ASSERT_TRUE(whole_read.ok());
  EXPECT_EQ(whole_read->total.fetches, 0);
  const Json j = to_json([&] {
    Report with = r;
    with.over_time = *ot;
    return with;
  }());
  EXPECT_EQ(j["over_time"]["total"]["next_calls"].get<int64_t>(), 3 * 251);
  EXPECT_EQ(j["detail_from_ns"].get<int64_t>(), **from);
}

TEST_F(OverTimeFromRecording, TheLatestRowsAreCountedFromTheDrains) {
  record(/*with_drains=*/true);
  // Drains of 1,000 events every 10 s after the recording's own one: the newest 2,500 events are
  // those of the last two; the cut is the time of the third from the end.
  {
    auto db = Db::open(path_, Db::Mode::kReadWrite);
    ASSERT_TRUE(db.ok());
    for (int k = 1; k <= 5; ++k) {
      ASSERT_TRUE((*db)
                      ->exec("INSERT INTO flushes (ts_ns, events, dropped_total) VALUES (" +
                             std::to_string(end_ns_ + k * 10 * kS) + ", 1000, 0)")
                      .ok());
    }
  }
  auto reader = Reader::open(path_);
  ASSERT_TRUE(reader.ok());
  auto at = (*reader)->time_of_last_rows(2500);
  ASSERT_TRUE(at.ok()) << at.status().message();
  ASSERT_TRUE(at->has_value());
  EXPECT_EQ(**at, end_ns_ + 30 * kS);
  auto fits = (*reader)->time_of_last_rows(6000);
  ASSERT_TRUE(fits.ok());
  EXPECT_FALSE(fits->has_value());
  DetailBudget rows;
  rows.max_rows = 2500;
  auto from = choose_detail_from(**reader, rows);
  ASSERT_TRUE(from.ok());
  ASSERT_TRUE(from->has_value());  // no epoch begins after the recording's end: the cut itself
  EXPECT_EQ(**from, end_ns_ + 30 * kS);
}

}  // namespace
}  // namespace stallscope::analysis
