// Tests for the quantile sketch (common/sketch.h) and the summaries the writer keeps
// (storage/summaries.h): sketch error against exact quantiles, merging, encoding and damaged
// bytes; summaries against the detail rows at every level and after every commit (what a reader of
// a recording cut off mid-run sees), rows that arrive for forgotten buckets, per-loader groups, and
// buckets in memory bounded however long the recording.
#include "storage/summaries.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <tuple>
#include <vector>

#include "common/sketch.h"
#include "storage/merge.h"
#include "storage/reader.h"
#include "storage/sqlite.h"
#include "storage/upgrade.h"
#include "storage/writer.h"
#include "tests/unit/test_util.h"

namespace stallscope {
namespace {

constexpr int64_t kSec = 1'000'000'000;

std::vector<int64_t> log_uniform(size_t n, uint32_t seed, double lo = 1e3, double hi = 1e10) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(std::log(lo), std::log(hi));
  std::vector<int64_t> v(n);
  for (auto& x : v) x = static_cast<int64_t>(std::exp(u(rng)));
  return v;
}

int64_t exact_quantile(std::vector<int64_t> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(std::floor(q * static_cast<double>(v.size() - 1)))];
}

TEST(SketchTest, QuantilesAreWithinTheStatedRelativeError) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const auto values = log_uniform(20000, seed);
    DurationSketch s;
    for (int64_t v : values) s.add(v);
    ASSERT_EQ(s.count(), values.size());
    for (double q : {0.0, 0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0}) {
      const double exact = static_cast<double>(exact_quantile(values, q));
      const double got = static_cast<double>(s.quantile(q));
      EXPECT_LE(std::abs(got - exact) / exact, DurationSketch::kRelativeError + 1e-9)
          << "q " << q << " exact " << exact << " sketch " << got;
    }
  }
}

TEST(SketchTest, ZeroAndNegativeDurationsAndOneNanosecond) {
  DurationSketch s;
  s.add(0);
  s.add(-5);
  s.add(1);
  s.add(1);
  EXPECT_EQ(s.quantile(0), 0);
  EXPECT_EQ(s.quantile(0.4), 0);  // rank 1 of 4
  EXPECT_EQ(s.quantile(1), 1);
  EXPECT_EQ(DurationSketch().quantile(0.5), 0);
  EXPECT_GT(DurationSketch::bin_of(INT64_MAX), 0);
}

TEST(SketchTest, MergingIsTheSketchOfTheUnionAndEncodingRoundTrips) {
  const auto a = log_uniform(5000, 7), b = log_uniform(3000, 8, 10, 1e6);
  DurationSketch sa, sb, all;
  for (int64_t v : a) sa.add(v), all.add(v);
  for (int64_t v : b) sb.add(v), all.add(v);
  sa.merge(sb);
  EXPECT_EQ(sa, all);
  EXPECT_EQ(sa.count(), 8000u);
  auto back = DurationSketch::decode(all.encode());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, all);
  EXPECT_EQ(back->count(), all.count());
  DurationSketch z;
  z.add(0, 3);
  z.add(INT64_MAX);
  auto zb = DurationSketch::decode(z.encode());
  ASSERT_TRUE(zb.ok());
  EXPECT_EQ(*zb, z);
  EXPECT_TRUE(DurationSketch::decode("").ok());
}

TEST(SketchTest, DamagedBytesAreAnErrorNotACrash) {
  DurationSketch s;
  s.add(1000);
  s.add(5000);
  const std::string good = s.encode();
  EXPECT_FALSE(DurationSketch::decode(good.substr(0, good.size() - 1)).ok());     // cut short
  EXPECT_FALSE(DurationSketch::decode(std::string("\x02\x00", 2)).ok());          // a zero count
  EXPECT_FALSE(DurationSketch::decode(std::string("\x02\x01\x00\x01", 4)).ok());  // bins not ascending
  EXPECT_FALSE(DurationSketch::decode(std::string(12, '\xff')).ok());             // a varint too long
  std::mt19937 rng(5);
  for (int i = 0; i < 2000; ++i) {
    std::string junk(rng() % 24, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    (void)DurationSketch::decode(junk);  // an error or a sketch; never a crash (ASan runs this)
  }
}

TEST(SummaryBucketTest, FloorsNegativeTimes) {
  EXPECT_EQ(summary_bucket(0, kSec), 0);
  EXPECT_EQ(summary_bucket(kSec - 1, kSec), 0);
  EXPECT_EQ(summary_bucket(kSec, kSec), 1);
  EXPECT_EQ(summary_bucket(-1, kSec), -1);
  EXPECT_EQ(summary_bucket(-kSec, kSec), -1);
  EXPECT_EQ(summary_bucket(-kSec - 1, kSec), -2);
}

class SummariesTest : public ::testing::Test {
 protected:
  testing::TempDir dir_;
  std::string path_ = dir_.file("run.db");

  // Every summary row against the same aggregate of the detail rows, read through a second
  // connection (as a reader of a live recording would).
  void expect_summaries_match_detail() {
    auto db = Db::open(path_, Db::Mode::kReadOnly);
    ASSERT_TRUE(db.ok()) << db.status().message();
    for (int64_t level : kSummaryLevelsNs) {
      const std::string L = std::to_string(level);
      const std::string bucket = "(CASE WHEN start_ns < 0 AND start_ns % " + L + " != 0 THEN start_ns / " + L +
                                 " - 1 ELSE start_ns / " + L + " END)";
      const std::string grp =
          "(CASE WHEN (SELECT value FROM strings WHERE id = name_id) IN ('dl.next', 'dl.step') THEN "
          "coalesce(arg0, -1) ELSE -1 END)";
      expect_same(**db,
                  "SELECT " + bucket + ", thread_id, name_id, " + grp +
                      ", count(*), sum(dur_ns), min(dur_ns), max(dur_ns) FROM spans WHERE dur_ns IS NOT NULL "
                      "GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
                  "SELECT bucket, thread_id, name_id, grp, count, total_ns, min_ns, max_ns FROM span_summaries WHERE "
                  "level_ns = " +
                      L + " ORDER BY 1, 2, 3, 4",
                  level);
      const std::string ibucket =
          "(CASE WHEN ts_ns < 0 AND ts_ns % " + L + " != 0 THEN ts_ns / " + L + " - 1 ELSE ts_ns / " + L + " END)";
      expect_same(**db,
                  "SELECT " + ibucket + ", thread_id, name_id, " + grp +
                      ", count(*) FROM instants GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
                  "SELECT bucket, thread_id, name_id, grp, count FROM instant_summaries WHERE level_ns = " + L +
                      " ORDER BY 1, 2, 3, 4",
                  level);
      expect_same(**db,
                  "SELECT " + ibucket +
                      ", track_id, count(*), sum(value), min(value), max(value) FROM counters "
                      "GROUP BY 1, 2 ORDER BY 1, 2",
                  "SELECT bucket, track_id, count, sum, min, max FROM counter_summaries WHERE level_ns = " + L +
                      " ORDER BY 1, 2",
                  level);
      const std::string gbucket = bucket;
      expect_same(**db,
                  "SELECT " + gbucket +
                      ", process_id, device, kind, count(*), sum(dur_ns), coalesce(sum(bytes), 0) "
                      "FROM gpu_activities GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
                  "SELECT bucket, process_id, device, kind, count, total_ns, bytes FROM gpu_summaries WHERE "
                  "level_ns = " +
                      L + " ORDER BY 1, 2, 3, 4",
                  level);
    }
  }

  static std::vector<std::vector<std::string>> rows(Db& db, const std::string& sql) {
    auto st = db.prepare(sql);
    EXPECT_TRUE(st.ok()) << sql << ": " << st.status().message();
    std::vector<std::vector<std::string>> out;
    if (!st.ok()) return out;
    while ((*st)->step()) {
      // Columns as text: exact for integers; REAL sums are compared to 1e-9 below.
      std::vector<std::string> r;
      for (int c = 0; c < (*st)->columns(); ++c) r.push_back((*st)->text(c));
      out.push_back(std::move(r));
    }
    EXPECT_TRUE((*st)->status().ok()) << (*st)->status().message();
    return out;
  }

  static void expect_same(Db& db, const std::string& detail_sql, const std::string& summary_sql, int64_t level) {
    const auto want = rows(db, detail_sql), got = rows(db, summary_sql);
    ASSERT_EQ(got.size(), want.size()) << "level " << level << "\n" << summary_sql;
    for (size_t i = 0; i < want.size(); ++i) {
      for (size_t c = 0; c < want[i].size(); ++c) {
        if (want[i][c] == got[i][c]) continue;
        // REAL columns: the same sum, added in another order
        const double a = std::stod(want[i][c]), b = std::stod(got[i][c]);
        EXPECT_NEAR(a, b, 1e-9 * std::max(1.0, std::abs(a)))
            << "level " << level << " row " << i << " column " << c << "\n"
            << summary_sql;
      }
    }
  }
};

TEST_F(SummariesTest, AgreeWithTheDetailRowsAfterEveryCommit) {
  auto w = Writer::create(path_);
  ASSERT_TRUE(w.ok()) << w.status().message();
  Writer& wr = **w;
  std::mt19937_64 rng(11);
  ASSERT_TRUE(wr.begin().ok());
  wr.add_string(1, "dl.next");
  wr.add_string(2, "dl.fetch");
  wr.add_string(3, "dl.step");
  wr.add_string(4, "train_step");
  const int64_t proc = wr.add_process(ProcessRow{0, 100, 1, "python", 0, {}, {}, {}});
  const int64_t main_thread = wr.add_thread(ThreadRow{0, proc, 100, "MainThread"});
  const int64_t worker = wr.add_thread(ThreadRow{0, proc, 101, "worker"});
  const int64_t track = wr.add_counter_track(CounterTrackRow{0, "proc.cpu", "cores", 100});
  ASSERT_TRUE(wr.commit().ok());

  // 30 commits of a run that moves forward about 8 s per commit, with late rows now and then: a
  // span that started 5 minutes ago ends, and a merge-like jump back before the session start.
  int64_t now = 0;
  for (int drain = 0; drain < 30; ++drain) {
    ASSERT_TRUE(wr.begin().ok());
    for (int i = 0; i < 400; ++i) {
      now += static_cast<int64_t>(rng() % (40'000'000));
      SpanRow s;
      s.thread_id = i % 3 ? main_thread : worker;
      s.name_id = 1 + static_cast<uint32_t>(rng() % 4);
      s.start_ns = now;
      s.dur_ns = static_cast<int64_t>(rng() % 50'000'000);
      s.arg0 = static_cast<int64_t>(rng() % 3);  // loader 0..2
      wr.add_span(s);
      if (i % 7 == 0) wr.add_instant(InstantRow{0, main_thread, now, 3, static_cast<int64_t>(rng() % 2), 1, {}});
      if (i % 5 == 0) wr.add_counter(CounterRow{track, now, static_cast<double>(rng() % 1000) / 7.0});
      if (i % 11 == 0) {
        GpuActivityRow g;
        g.process_id = proc;
        g.kind = i % 2 ? "kernel" : "memcpy";
        g.start_ns = now;
        g.dur_ns = static_cast<int64_t>(rng() % 1'000'000);
        g.bytes = 4096;
        wr.add_gpu_activity(g);
      }
    }
    if (drain % 6 == 5) {
      SpanRow late;
      late.thread_id = main_thread;
      late.name_id = 4;
      late.start_ns = now - 300 * kSec;
      late.dur_ns = 300 * kSec;
      wr.add_span(late);
      SpanRow before;
      before.thread_id = worker;
      before.name_id = 2;
      before.start_ns = -1'500'000'001;
      before.dur_ns = 7;
      wr.add_span(before);
    }
    SpanRow open;  // never ended: in the detail rows, not in the summaries
    open.thread_id = worker;
    open.name_id = 4;
    open.start_ns = now;
    wr.add_span(open);
    ASSERT_TRUE(wr.commit().ok());
    if (drain % 5 == 0 || drain == 29) expect_summaries_match_detail();
  }
  // About 4 minutes of run: what stays in memory is the last few intervals of each level, not the run.
  EXPECT_LT(wr.summaries().buckets_in_memory(), 200u);
}

TEST_F(SummariesTest, SketchesOfAllIntervalsGiveTheRunsQuantiles) {
  auto w = Writer::create(path_);
  ASSERT_TRUE(w.ok());
  Writer& wr = **w;
  ASSERT_TRUE(wr.begin().ok());
  wr.add_string(1, "dl.next");
  const int64_t th = wr.add_thread(ThreadRow{0, wr.add_process(ProcessRow{0, 5, {}, "p", 0, {}, {}, {}}), 5, "t"});
  const auto durs = log_uniform(30000, 3, 1e4, 1e9);
  int64_t t = 0;
  for (size_t i = 0; i < durs.size(); ++i) {
    SpanRow s;
    s.thread_id = th;
    s.name_id = 1;
    s.start_ns = t;
    s.dur_ns = durs[i];
    s.arg0 = 0;
    wr.add_span(s);
    t += 20'000'000;  // 10 minutes in all
    if (i % 1000 == 999) {
      ASSERT_TRUE(wr.commit().ok());
      ASSERT_TRUE(wr.begin().ok());
    }
  }
  ASSERT_TRUE(wr.commit().ok());
  for (int64_t level : kSummaryLevelsNs) {
    auto st = wr.db().prepare("SELECT sketch, count FROM span_summaries WHERE level_ns = ?");
    ASSERT_TRUE(st.ok());
    (*st)->bind(1, level);
    DurationSketch run;
    int64_t rows = 0;
    while ((*st)->step()) {
      auto s = DurationSketch::decode((*st)->blob(0));
      ASSERT_TRUE(s.ok()) << s.status().message();
      EXPECT_EQ(static_cast<int64_t>(s->count()), (*st)->int64(1));
      run.merge(*s);
      ++rows;
    }
    EXPECT_EQ(rows, 600 * kSec / level);
    ASSERT_EQ(run.count(), durs.size());
    for (double q : {0.5, 0.9, 0.99}) {
      const double exact = static_cast<double>(exact_quantile(durs, q));
      EXPECT_LE(std::abs(static_cast<double>(run.quantile(q)) - exact) / exact, DurationSketch::kRelativeError + 1e-9)
          << "level " << level << " q " << q;
    }
  }
}

// Every row of the summary tables, sketches included, as text.
std::vector<std::string> summary_rows(Db& db) {
  std::vector<std::string> out;
  for (const char* table :
       {"span_summaries", "instant_summaries", "counter_summaries", "gpu_summaries", "handoff_summaries"}) {
    auto st = db.prepare(std::string("SELECT * FROM ") + table + " ORDER BY 1, 2, 3, 4, 5");
    EXPECT_TRUE(st.ok());
    while ((*st)->step()) {
      std::string row = table;
      for (int c = 0; c < (*st)->columns(); ++c) row += "|" + (*st)->blob(c);
      out.push_back(row);
    }
  }
  return out;
}

std::vector<std::string> summary_rows(const std::string& path) {
  auto db = Db::open(path, Db::Mode::kReadOnly);
  EXPECT_TRUE(db.ok());
  return db.ok() ? summary_rows(**db) : std::vector<std::string>{};
}

TEST_F(SummariesTest, AnOlderRecordingGetsTheSameSummariesOnFirstOpen) {
  {
    auto w = Writer::create(path_);
    ASSERT_TRUE(w.ok());
    Writer& wr = **w;
    ASSERT_TRUE(wr.begin().ok());
    wr.add_string(1, "dl.next");
    wr.add_string(2, "dl.fetch");
    const int64_t proc = wr.add_process(ProcessRow{0, 7, {}, "p", 0, {}, {}, {}});
    const int64_t th = wr.add_thread(ThreadRow{0, proc, 7, "t"});
    const int64_t track = wr.add_counter_track(CounterTrackRow{0, "proc.cpu", "cores", 7});
    std::mt19937_64 rng(4);
    int64_t now = 0;
    for (int i = 0; i < 450'000; ++i) {  // past one write of the upgrade (200,000 rows)
      now += static_cast<int64_t>(rng() % 2'000'000);
      SpanRow s;
      s.thread_id = th;
      s.name_id = 1 + i % 2;
      s.start_ns = now;
      s.dur_ns = static_cast<int64_t>(rng() % 9'000'000);
      s.arg0 = i % 3;
      s.arg1 = i % 11 == 0 ? -1 : i;  // dl.next: a batch handed, or StopIteration
      wr.add_span(s);
      if (i % 9 == 0) wr.add_instant(InstantRow{0, th, now, 1, 0, {}, {}});
      if (i % 13 == 0) wr.add_counter(CounterRow{track, now, static_cast<double>(i % 17)});
      if (i % 50 == 0) {
        GpuActivityRow g;
        g.process_id = proc;
        g.kind = "memcpy";
        g.start_ns = now;
        g.dur_ns = 1000;
        g.bytes = 64;
        wr.add_gpu_activity(g);
      }
      if (i % 20000 == 19999) {
        ASSERT_TRUE(wr.commit().ok());
        ASSERT_TRUE(wr.begin().ok());
      }
    }
    ASSERT_TRUE(wr.set_meta("complete", "1").ok());
    ASSERT_TRUE(wr.commit().ok());
    ASSERT_TRUE(wr.finish().ok());
  }
  const auto written = summary_rows(path_);
  ASSERT_GT(written.size(), 1000u);
  // Made into a version 1 recording: no summary tables.
  auto as_version_1 = [this](const char* complete) {
    auto db = Db::open(path_, Db::Mode::kReadWrite);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->exec(stallscope::testing::kAsVersion1Sql).ok());
    ASSERT_TRUE((*db)->exec(std::string("UPDATE meta SET value = '") + complete + "' WHERE key = 'complete'").ok());
  };
  as_version_1("0");
  // Not closed cleanly (still being written, or cut off): left alone.
  auto r = upgrade_to_summaries(path_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->what, UpgradeOutcome::What::kNotFinished);
  {
    auto db = Db::open(path_, Db::Mode::kReadOnly);
    EXPECT_EQ(*(*db)->query_int("PRAGMA user_version"), 1);
  }
  // What reads it gets the same summaries for the read, in temporary tables of a read-only
  // connection, the file untouched.
  {
    auto reader = Reader::open(path_);
    ASSERT_TRUE(reader.ok()) << reader.status().message();
    EXPECT_FALSE(*(*reader)->has_summaries());
    int64_t last_done = 0, last_total = -1;
    ASSERT_TRUE((*reader)
                    ->build_temporary_summaries([&](int64_t done, int64_t total) {
                      last_done = done;
                      last_total = total;
                    })
                    .ok());
    EXPECT_TRUE(*(*reader)->has_summaries());
    EXPECT_EQ(last_done, last_total);
    EXPECT_EQ(summary_rows((*reader)->db()), written);
    auto spans = (*reader)->span_summaries(kSummaryLevelsNs[2], {1});
    ASSERT_TRUE(spans.ok());
    EXPECT_FALSE(spans->empty());
    auto db = Db::open(path_, Db::Mode::kReadOnly);
    EXPECT_EQ(*(*db)->query_int("PRAGMA user_version"), 1);
    EXPECT_EQ(*(*db)->query_int("SELECT count(*) FROM sqlite_master WHERE name LIKE '%_summaries'"), 0);
  }
  auto db = Db::open(path_, Db::Mode::kReadWrite);
  ASSERT_TRUE((*db)->exec("UPDATE meta SET value = '1' WHERE key = 'complete'").ok());
  db->reset();

  std::vector<std::pair<int64_t, int64_t>> progress;
  r = upgrade_to_summaries(path_, [&progress](int64_t done, int64_t total) { progress.emplace_back(done, total); });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->what, UpgradeOutcome::What::kUpgraded);
  EXPECT_EQ(summary_rows(path_), written);  // the same rows, sketches byte for byte
  ASSERT_GE(progress.size(), 3u);
  EXPECT_EQ(progress.back().first, r->rows);
  EXPECT_EQ(progress.back().second, r->rows);
  EXPECT_TRUE(std::is_sorted(progress.begin(), progress.end()));
  {
    auto v2 = Db::open(path_, Db::Mode::kReadOnly);
    EXPECT_EQ(*(*v2)->query_int("PRAGMA user_version"), 2);
    EXPECT_EQ(*(*v2)->query_int("SELECT count(*) FROM units WHERE table_name = 'span_summaries'"), 6);
  }
  // Opened again: nothing to do.
  r = upgrade_to_summaries(path_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->what, UpgradeOutcome::What::kCurrent);
}

TEST_F(SummariesTest, WhatIsNotARecordingIsLeftToTheReader) {
  {
    auto db = Db::open(path_, Db::Mode::kCreate);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->exec("CREATE TABLE t (x)").ok());
  }
  // Left to the reader, which says why in one line.
  for (const std::string& p : {path_, dir_.file("missing.db")}) {
    auto r = upgrade_to_summaries(p);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->what, UpgradeOutcome::What::kUnreadable);
  }
}

}  // namespace
}  // namespace stallscope

namespace stallscope {
namespace {

// --keep-detail (Writer::set_keep_detail): 200 s of drains every 100 ms, detail kept for 30 s.
// Detail older than the window is gone (but the instants that describe loaders and processes, and
// a span still open); detail inside it is all there; the summaries are those of the same rows
// written without the limit, byte for byte.
void write_drains(const std::string& path, int64_t keep_ns) {
  auto w = Writer::create(path);
  ASSERT_TRUE(w.ok()) << w.status().message();
  Writer& wr = **w;
  if (keep_ns > 0) {
    ASSERT_TRUE(wr.set_keep_detail(keep_ns).ok());
  }
  ASSERT_TRUE(wr.begin().ok());
  wr.add_string(1, "dl.next");
  wr.add_string(2, "dl.config");
  wr.add_string(3, "dl.sent");
  const int64_t proc = wr.add_process(ProcessRow{0, 7, {}, "p", 0, {}, {}, {}});
  const int64_t th = wr.add_thread(ThreadRow{0, proc, 7, "t"});
  const int64_t track = wr.add_counter_track(CounterTrackRow{0, "proc.cpu", "cores", 7});
  wr.add_instant(InstantRow{0, th, 1'000'000, 2, 0, 1, {}});  // dl.config at 1 ms
  SpanRow open;                                               // an epoch-long span still open: never deleted
  open.thread_id = th;
  open.name_id = 1;
  open.start_ns = 2'000'000;
  wr.add_span(open);
  constexpr int64_t kMs = 1'000'000;
  for (int64_t flush = 100 * kMs; flush <= 200'000 * kMs; flush += 100 * kMs) {
    if (flush > 100 * kMs) {
      ASSERT_TRUE(wr.begin().ok());
    }
    for (int64_t t = flush - 100 * kMs; t < flush; t += 10 * kMs) {  // 10 rows of each a drain
      SpanRow s;
      s.thread_id = th;
      s.name_id = 1;
      s.start_ns = t;
      s.dur_ns = 9 * kMs;
      s.arg0 = 0;
      wr.add_span(s);
      wr.add_instant(InstantRow{0, th, t + 5 * kMs, 3, 0, t / kMs, 0});
      wr.add_counter(CounterRow{track, t + 1, static_cast<double>(t % 7)});
      GpuActivityRow g;
      g.process_id = proc;
      g.kind = "kernel";
      g.start_ns = t;
      g.dur_ns = 2 * kMs;
      wr.add_gpu_activity(g);
    }
    wr.add_flush(FlushRow{flush, 40, 0, {}, {}, {}, {}});
    ASSERT_TRUE(wr.commit().ok());
  }
  ASSERT_TRUE(wr.set_meta("complete", "1").ok());
  ASSERT_TRUE(wr.finish().ok());
}

int64_t count(Db& db, const std::string& sql) {
  auto n = db.query_int(sql);
  EXPECT_TRUE(n.ok()) << sql << ": " << n.status().message();
  return n.ok() ? *n : -1;
}

// handoff_summaries: each next() call that handed a batch, its size from the batch's collate
// whichever arrives first (a worker's, once its dl.worker_start names its pid, even when that
// comes after the collate; or the collate inside the call, num_workers=0), the step since the
// previous hand-off; a batch never collated counts as unsized, StopIteration not at all.
// A recording written row by row for the join and the queues: its writer, names (ids 1, 2, ... in
// the order given), processes, threads, spans and instants, and drains (commits).
class JoinTest : public ::testing::Test {
 protected:
  static constexpr int64_t kMs = 1'000'000, kS = 1'000'000'000;
  void open(std::initializer_list<const char*> names) {
    auto w = Writer::create(path_);
    ASSERT_TRUE(w.ok()) << w.status().message();
    w_ = std::move(*w);
    ASSERT_TRUE(w_->begin().ok());
    uint32_t id = 0;
    for (const char* n : names) w_->add_string(++id, n);
  }
  int64_t process(int64_t pid, std::optional<int64_t> ppid, const char* name) {
    return w_->add_process(ProcessRow{0, pid, ppid, name, 0, {}, {}, {}});
  }
  int64_t thread(int64_t process, int64_t tid, const char* name) {
    return w_->add_thread(ThreadRow{0, process, tid, name});
  }
  void span(int64_t thread, uint32_t name, int64_t start, int64_t dur, int64_t a0, int64_t a1, int64_t a2) {
    w_->add_span(SpanRow{0, thread, start, dur, name, 0, a0, a1, a2});
  }
  void instant(int64_t thread, uint32_t name, int64_t ts, int64_t a0, int64_t a1, int64_t a2) {
    w_->add_instant(InstantRow{0, thread, ts, name, a0, a1, a2});
  }
  void drain() {
    ASSERT_TRUE(w_->commit().ok());
    ASSERT_TRUE(w_->begin().ok());
  }
  void close() {
    ASSERT_TRUE(w_->set_meta("complete", "1").ok());
    ASSERT_TRUE(w_->commit().ok());
    ASSERT_TRUE(w_->finish().ok());
  }
  Writer& writer() { return *w_; }

  testing::TempDir dir_;
  const std::string path_ = dir_.file("run.db");
  std::unique_ptr<Writer> w_;
};

TEST_F(JoinTest, EachHandedBatchIsCountedAndSizedFromItsCollate) {
  open({"dl.next", "dl.collate", "dl.worker_start"});
  const int64_t train = process(100, std::nullopt, "train"), worker = process(200, 100, "worker");
  const int64_t main = thread(train, 100, "main"), wt = thread(worker, 200, "worker");
  // Loader 0, one worker: batch 0 collated (5 samples) before its dl.worker_start is written.
  span(wt, 2, 1 * kMs, 1 * kMs, /*B*/ 0, /*samples*/ 5, /*G*/ 0);
  instant(main, 3, 0, 0, 0, 200);
  span(main, 1, 0, 10 * kMs, /*L*/ 0, /*B*/ 0, /*E*/ 0);
  // Batch 1 handed before its collate is written (the next drain), which then sizes it.
  span(main, 1, 20 * kMs, 5 * kMs, 0, 1, 0);
  drain();
  span(wt, 2, 12 * kMs, 1 * kMs, 1, 7, 0);
  // Batch 2 is never collated; then StopIteration (arg1 -1).
  span(main, 1, 40 * kMs, 2 * kMs, 0, 2, 0);
  span(main, 1, 50 * kMs, 1 * kMs, 0, -1, 0);
  // Loader 1 without workers: the collate inside the call sizes it (3 samples).
  span(main, 2, 61 * kMs, 1 * kMs, /*L*/ 1, /*B*/ 0, /*samples*/ 3);
  span(main, 1, 60 * kMs, 4 * kMs, 1, 0, 0);
  close();
  auto reader = Reader::open(path_);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  for (int64_t level : kSummaryLevelsNs) {
    auto rows = (*reader)->handoff_summaries(level);
    ASSERT_TRUE(rows.ok()) << rows.status().message();
    ASSERT_TRUE(rows->has_value());
    ASSERT_EQ((*rows)->size(), 2u) << level;  // one bucket, two loaders
    std::map<int64_t, HandoffSummaryRow> by_loader;
    for (const HandoffSummaryRow& r : **rows) by_loader[r.loader] = r;
    const HandoffSummaryRow& l0 = by_loader[0];
    EXPECT_EQ(l0.bucket, 0);
    EXPECT_EQ(l0.batches, 3);
    EXPECT_EQ(l0.samples, 5 + 7);
    EXPECT_EQ(l0.unsized, 1);
    // Steps end at 25 and 42 ms: 25 - 10 and 42 - 25.
    EXPECT_EQ(l0.steps, 2);
    EXPECT_EQ(l0.step_total_ns, 32 * kMs);
    EXPECT_EQ(l0.step_min_ns, 15 * kMs);
    EXPECT_EQ(l0.step_max_ns, 17 * kMs);
    auto sketch = DurationSketch::decode(l0.step_sketch);
    ASSERT_TRUE(sketch.ok());
    EXPECT_EQ(sketch->count(), 2u);
    const HandoffSummaryRow& l1 = by_loader[1];
    EXPECT_EQ(l1.batches, 1);
    EXPECT_EQ(l1.samples, 3);
    EXPECT_EQ(l1.unsized, 0);
    EXPECT_EQ(l1.steps, 0);
  }
}

// The same batch index handed in two epochs before either collate is written (a late drain, or an
// older recording's rows read table by table): each hand-off is sized by its own epoch's collate,
// in order, none left unsized. Each epoch's start (dl.epoch_begin to its first next() call) counts
// in the interval where it began, the begins written before any call as an older recording's are.
TEST_F(JoinTest, TheSameBatchOfTwoEpochsIsSizedInOrder) {
  open({"dl.next", "dl.collate", "dl.worker_start", "dl.epoch_begin"});
  const int64_t main = thread(process(100, std::nullopt, "train"), 100, "main");
  // __iter__ at 7 and 17 ms; at 9 ms an __iter__ of loader 1, which is never asked for a batch.
  for (int64_t at : {7, 17}) instant(main, 4, at * kMs, 0, 0, 1);
  instant(main, 4, 9 * kMs, 1, 0, 0);
  std::vector<int64_t> workers;
  for (int64_t pid : {200, 201}) {  // a worker per epoch (not persistent)
    workers.push_back(thread(process(pid, 100, "w"), pid, "w"));
    instant(main, 3, 0, 0, 0, pid);
  }
  span(main, 1, 10 * kMs, 1 * kMs, 0, 0, 0);  // epoch 0's batch 0
  span(main, 1, 20 * kMs, 1 * kMs, 0, 0, 1);  // epoch 1's batch 0
  span(workers[0], 2, 5 * kMs, 1 * kMs, 0, 6, 0);
  span(workers[1], 2, 15 * kMs, 1 * kMs, 0, 9, 0);
  ASSERT_TRUE(writer().commit().ok());
  ASSERT_TRUE(writer().finish().ok());
  auto reader = Reader::open(path_);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  auto rows = (*reader)->handoff_summaries(kSummaryLevelsNs[0]);
  ASSERT_TRUE(rows.ok() && rows->has_value());
  ASSERT_EQ((*rows)->size(), 1u);
  EXPECT_EQ((*rows)->front().batches, 2);
  EXPECT_EQ((*rows)->front().samples, 6 + 9);
  EXPECT_EQ((*rows)->front().unsized, 0);
  EXPECT_EQ((*rows)->front().starts, 2);
  EXPECT_EQ((*rows)->front().start_total_ns, (10 - 7 + 20 - 17) * kMs);
}

// A loader whose epoch began with num_workers=0 has no queue: its next() calls are not held for
// the queue's time order (they would be dropped when they went through). One with a worker, and one
// whose epoch_begin does not say (an older recording), are held as before.
TEST_F(JoinTest, ALoaderWithoutWorkersHoldsNoQueueEvents) {
  open({"dl.next", "dl.epoch_begin"});
  enum : uint32_t { kNext = 1, kBegin };
  const int64_t train = process(100, std::nullopt, "train");
  const int64_t main = thread(train, 100, "main");
  instant(main, kBegin, 0, 0, 0, 0);  // loader 0: num_workers=0
  for (int i = 0; i < 100; ++i) span(main, kNext, i * kMs, 500'000, 0, i, 0);
  drain();
  const size_t waiting_without = writer().summaries().queue_events_waiting();
  EXPECT_EQ(waiting_without, 1u);             // the epoch_begin alone
  instant(main, kBegin, 200 * kMs, 1, 0, 2);  // loader 1: two workers
  for (int i = 0; i < 100; ++i) span(main, kNext, 200 * kMs + i * kMs, 500'000, 1, i, 0);
  drain();
  EXPECT_EQ(writer().summaries().queue_events_waiting(), waiting_without + 1 + 200);
  // Loader 2's epoch_begin has no num_workers: its calls are held too.
  const size_t before = writer().summaries().queue_events_waiting();
  InstantRow begin;
  begin.thread_id = main;
  begin.name_id = kBegin;
  begin.ts_ns = 400 * kMs;
  begin.arg0 = 2;
  begin.arg1 = 0;
  writer().add_instant(begin);
  span(main, kNext, 401 * kMs, 500'000, 2, 0, 0);
  drain();
  EXPECT_EQ(writer().summaries().queue_events_waiting(), before + 3);
}

// queue_summaries: a loader's batches ready (put by its worker, not yet handed) and in flight (sent,
// not yet put) while it is active (first next() call to StopIteration), from rows that arrive out
// of time order: the worker's puts in a later drain than the hand-offs they precede. Events wait
// until 5 s of later rows have come, then go through in time order; one that comes later than that
// is counted late. A worker's put of an earlier epoch than its loader's is not counted.
TEST_F(JoinTest, QueueReadyAndInFlightFollowTheBatchesInTimeOrder) {
  open({"dl.next", "dl.sent", "dl.put", "dl.epoch_begin", "dl.epoch_end", "dl.worker_start"});
  enum : uint32_t { kNext = 1, kSent, kPut, kBegin, kEnd, kWorkerStart };
  const int64_t train = process(100, std::nullopt, "train"), worker = process(200, 100, "worker");
  const int64_t main = thread(train, 100, "main"), wt = thread(worker, 200, "worker");
  auto next = [&](int64_t start, int64_t end, int64_t batch) { span(main, kNext, start, end - start, 0, batch, 0); };
  // Epoch 0 of loader 0, one worker (pid 200). Drain 1: the training thread's rows.
  instant(main, kBegin, 0, 0, 0, 1);
  instant(main, kWorkerStart, 0, 0, 0, 200);
  instant(main, kSent, 1 * kMs, 0, 0, 0);
  instant(main, kSent, 2 * kMs, 0, 1, 0);
  next(5 * kMs, 12 * kMs, 0);
  next(20 * kMs, 21 * kMs, 1);
  drain();
  // Drain 2: the worker's puts (arg0: the batch), then StopIteration and the epoch's end.
  instant(wt, kPut, 10 * kMs, 0, 0, 0);
  instant(wt, kPut, 15 * kMs, 1, 0, 0);
  next(30 * kMs, 31 * kMs, -1);
  instant(main, kEnd, 31 * kMs, 0, 0, 2);
  drain();
  // Epoch 1, 10 s later: its rows move the time on past epoch 0's by more than the wait.
  const int64_t t1 = 10 * kS;
  instant(main, kBegin, t1, 0, 1, 1);
  instant(main, kSent, t1 + 1 * kMs, 0, 0, 0);
  instant(wt, kPut, t1 + 2 * kMs, 0, 0, 1);
  // A put of generation 0 (epoch 0's) after epoch 1 began: a batch of the iterator that ended, not
  // in this queue.
  instant(wt, kPut, t1 + 2 * kMs + 500'000, 5, 0, 0);
  next(t1 + 3 * kMs, t1 + 4 * kMs, 0);
  drain();
  // What a reader sees now: epoch 0 went through; epoch 1's events still wait.
  auto level_rows = [&](int64_t level) {
    auto reader = Reader::open(path_);
    EXPECT_TRUE(reader.ok()) << reader.status().message();
    std::map<int64_t, QueueSummaryRow> by_bucket;
    if (!reader.ok()) return by_bucket;
    auto rows = (*reader)->queue_summaries(level);
    EXPECT_TRUE(rows.ok() && rows->has_value());
    if (!rows.ok() || !rows->has_value()) return by_bucket;
    for (const QueueSummaryRow& r : **rows) {
      EXPECT_EQ(r.process_id, train);
      EXPECT_EQ(r.loader, 0);
      by_bucket[r.bucket] = r;
    }
    return by_bucket;
  };
  // Active 5-31 ms. ready: 1 over 10-12 and 15-21 ms; in flight: 2 over 5-10, 1 over 10-15 ms.
  auto expect_epoch_0 = [&](const QueueSummaryRow& r) {
    EXPECT_EQ(r.covered_ns, 26 * kMs);
    EXPECT_EQ(r.ready_ns, (2 + 6) * kMs);
    EXPECT_EQ(r.empty_ns, (5 + 3 + 10) * kMs);
    EXPECT_EQ(r.ready_min, 0);
    EXPECT_EQ(r.ready_max, 1);
    EXPECT_EQ(r.flight_ns, (5 * 2 + 5 * 1) * kMs);
    EXPECT_EQ(r.flight_min, 0);
    EXPECT_EQ(r.flight_max, 2);
  };
  {
    auto seconds = level_rows(kSummaryLevelsNs[0]);
    ASSERT_EQ(seconds.size(), 1u);
    ASSERT_EQ(seconds.count(0), 1u);
    expect_epoch_0(seconds[0]);
  }
  // A sent of another loader from long before: too late to go through in order.
  instant(main, kSent, 20 * kMs, 7, 0, 0);
  next(t1 + 5 * kMs, t1 + 6 * kMs, -1);
  drain();
  // Epoch 2 at 30 s: the loop waits 8 s for batch 0 while the worker puts batches 1 and 2; the
  // next() call's row comes at its end, after the time of its start has gone through. Its time from
  // then is covered with the values the queue held: 3 in flight, none ready.
  const int64_t t2 = 30 * kS;
  instant(main, kBegin, t2, 0, 2, 1);
  for (int64_t b : {0, 1, 2}) instant(main, kSent, t2 + 1 * kMs, 0, b, 0);
  drain();
  instant(wt, kPut, t2 + 1 * kS, 1, 0, 2);
  instant(wt, kPut, t2 + 6500 * kMs, 2, 0, 2);
  drain();
  instant(wt, kPut, t2 + 7999 * kMs, 0, 0, 2);
  next(t2 + 2 * kMs, t2 + 8 * kS, 0);
  next(t2 + 8500 * kMs, t2 + 8600 * kMs, -1);
  close();
  EXPECT_EQ(writer().summaries().queue_events_late(), 2);  // loader 7's sent, epoch 2's long call's start
  auto seconds = level_rows(kSummaryLevelsNs[0]);
  ASSERT_EQ(seconds.size(), 2u + 9u);  // epoch 2: 30-38 s
  expect_epoch_0(seconds[0]);
  // Epoch 1: active 3-6 ms after t1, one batch ready over 3-4 ms (put before the loop asked).
  const QueueSummaryRow& e1 = seconds[10];
  EXPECT_EQ(e1.covered_ns, 3 * kMs);
  EXPECT_EQ(e1.ready_ns, 1 * kMs);
  EXPECT_EQ(e1.empty_ns, 2 * kMs);
  EXPECT_EQ(e1.ready_max, 1);
  EXPECT_EQ(e1.flight_ns, 0);
  // Epoch 2, active from 2 ms to 8.6 s: ready 0 (3 in flight) to 1 s, 1 (2) to 6.5 s, 2 (1) to
  // 7.999 s, 3 (0) to 8 s, then 2.
  QueueSummaryRow e2;
  for (const auto& [bucket, r] : seconds) {
    if (bucket < 30) continue;
    e2.covered_ns += r.covered_ns;
    e2.ready_ns += r.ready_ns;
    e2.empty_ns += r.empty_ns;
    e2.flight_ns += r.flight_ns;
    e2.ready_max = std::max(e2.ready_max, r.ready_max);
    e2.flight_max = std::max(e2.flight_max, r.flight_max);
  }
  EXPECT_EQ(e2.covered_ns, 8598 * kMs);
  EXPECT_EQ(e2.empty_ns, 998 * kMs);
  EXPECT_EQ(e2.ready_ns, (5500 * 1 + 1499 * 2 + 1 * 3 + 600 * 2) * kMs);
  EXPECT_EQ(e2.flight_ns, (998 * 3 + 5500 * 2 + 1499 * 1) * kMs);
  EXPECT_EQ(e2.ready_max, 3);
  EXPECT_EQ(e2.flight_max, 3);
  EXPECT_EQ(seconds[30].ready_min, 0);
  EXPECT_EQ(seconds[30].flight_max, 3);
  // The 100-s interval holds all three.
  auto hundreds = level_rows(kSummaryLevelsNs[2]);
  ASSERT_EQ(hundreds.size(), 1u);
  EXPECT_EQ(hundreds[0].covered_ns, (29 + 8598) * kMs);
  EXPECT_EQ(hundreds[0].ready_ns, (9 + 5500 + 2998 + 3 + 1200) * kMs);
  EXPECT_EQ(hundreds[0].flight_max, 3);
}

TEST(KeepDetailTest, OldDetailIsDeletedAndTheSummariesKeepAllOfIt) {
  testing::TempDir dir;
  const std::string kept = dir.file("kept.db"), all = dir.file("all.db");
  constexpr int64_t kS = 1'000'000'000;
  write_drains(kept, 30 * kS);
  write_drains(all, 0);
  EXPECT_EQ(summary_rows(kept), summary_rows(all));
  ASSERT_GT(summary_rows(all).size(), 800u);  // 200 s: each second's span, instant, counter and GPU rows

  auto db = Db::open(kept, Db::Mode::kReadOnly);
  ASSERT_TRUE(db.ok());
  Db& d = **db;
  EXPECT_EQ(count(d, "SELECT value FROM meta WHERE key = 'keep_detail_ns'"), 30 * kS);
  const int64_t from = count(d, "SELECT value FROM meta WHERE key = 'detail_from_ns'");
  // Deleted in steps of 7.5 s (a quarter of 30 s): the detail reaches back 30 to 38.5 s.
  EXPECT_LE(from, 170 * kS);
  EXPECT_GE(from, 200 * kS - 30 * kS - 8'500'000'000);
  const std::string f = std::to_string(from);
  // Before `from`: nothing but the dl.config instant and the open span.
  EXPECT_EQ(count(d, "SELECT count(*) FROM spans WHERE start_ns < " + f + " AND dur_ns IS NOT NULL"), 0);
  EXPECT_EQ(count(d, "SELECT count(*) FROM spans WHERE dur_ns IS NULL"), 1);
  EXPECT_EQ(count(d, "SELECT count(*) FROM instants WHERE ts_ns < " + f), 1);
  EXPECT_EQ(count(d, "SELECT count(*) FROM instants WHERE name_id = 2"), 1);
  EXPECT_EQ(count(d, "SELECT count(*) FROM counters WHERE ts_ns < " + f), 0);
  EXPECT_EQ(count(d, "SELECT count(*) FROM gpu_activities WHERE start_ns < " + f), 0);
  // From `from` on: every row, as in the recording that kept everything.
  auto full = Db::open(all, Db::Mode::kReadOnly);
  ASSERT_TRUE(full.ok());
  for (const std::string& q :
       {"SELECT count(*) FROM spans WHERE start_ns >= " + f, "SELECT count(*) FROM instants WHERE ts_ns >= " + f,
        "SELECT count(*) FROM counters WHERE ts_ns >= " + f,
        "SELECT count(*) FROM gpu_activities WHERE start_ns >= " + f}) {
    EXPECT_EQ(count(d, q), count(**full, q)) << q;
    EXPECT_GT(count(d, q), 2000) << q;
  }
  EXPECT_LT(count(d, "SELECT count(*) FROM spans"), count(**full, "SELECT count(*) FROM spans") / 4);
}

// Spans that stop coming while the drains go on: the window passes the last of them, which stays
// (SQLite gives the next span the largest id + 1, which the writer counted on when it returned
// its id; docs/decisions.md, "The drain writes spans 32 to a statement"), and the spans that come
// afterwards get the ids the writer returned.
TEST(KeepDetailTest, TheLastSpanOutlivesTheWindowSoTheNextGetsTheIdReturned) {
  testing::TempDir dir;
  const std::string path = dir.file("gap.db");
  constexpr int64_t kS = 1'000'000'000, kMs = 1'000'000;
  auto w = Writer::create(path);
  ASSERT_TRUE(w.ok()) << w.status().message();
  Writer& wr = **w;
  ASSERT_TRUE(wr.set_keep_detail(10 * kS).ok());
  ASSERT_TRUE(wr.begin().ok());
  wr.add_string(1, "dl.next");
  const int64_t proc = wr.add_process(ProcessRow{0, 7, {}, "p", 0, {}, {}, {}});
  const int64_t th = wr.add_thread(ThreadRow{0, proc, 7, "t"});
  auto span = [&](int64_t start) {
    SpanRow s;
    s.thread_id = th;
    s.name_id = 1;
    s.start_ns = start;
    s.dur_ns = kMs;
    return wr.add_span(s);
  };
  int64_t last = 0;
  for (int i = 0; i < 40; ++i) last = span(i * 10 * kMs);  // 40 spans in the first 0.4 s
  wr.add_flush(FlushRow{kS / 2, 40, 0, {}, {}, {}, {}});
  ASSERT_TRUE(wr.commit().ok());
  for (int64_t flush = kS; flush <= 60 * kS; flush += kS) {  // a minute of drains without spans
    ASSERT_TRUE(wr.begin().ok());
    wr.add_flush(FlushRow{flush, 0, 0, {}, {}, {}, {}});
    ASSERT_TRUE(wr.commit().ok());
  }
  ASSERT_TRUE(wr.begin().ok());
  std::vector<int64_t> later;
  for (int i = 0; i < 40; ++i) later.push_back(span(60 * kS + i * kMs));
  wr.add_flush(FlushRow{61 * kS, 40, 0, {}, {}, {}, {}});
  Status c = wr.commit();
  ASSERT_TRUE(c.ok()) << c.message();
  ASSERT_TRUE(wr.finish().ok());

  auto db = Db::open(path, Db::Mode::kReadOnly);
  ASSERT_TRUE(db.ok());
  Db& d = **db;
  EXPECT_EQ(count(d, "SELECT count(*) FROM spans WHERE start_ns < " + std::to_string(kS)), 1);  // the last
  EXPECT_EQ(count(d, "SELECT id FROM spans WHERE start_ns < " + std::to_string(kS)), last);
  EXPECT_EQ(later.front(), last + 1);
  EXPECT_EQ(count(d, "SELECT min(id) FROM spans WHERE start_ns >= " + std::to_string(60 * kS)), later.front());
  EXPECT_EQ(count(d, "SELECT max(id) FROM spans"), later.back());
}

// `merge` of a recording made with --keep-detail: the merged file holds that input's summaries of
// the whole run (not only of the detail it kept), its ids the merged file's, each bucket moved by
// the input's clock offset (2.5 s: 2 buckets of 1 s, none of 10 s and 100 s). The other input's
// summaries are made from its rows, as before. Before merges carried them, the kept input's part
// of the merged summaries covered its last 30-38 s only.
TEST(KeepDetailTest, MergeCarriesTheSummariesOfTheDeletedPart) {
  testing::TempDir dir;
  const std::string kept = dir.file("kept.db"), all = dir.file("all.db"), job = dir.file("job.db");
  constexpr int64_t kS = 1'000'000'000;
  write_drains(kept, 30 * kS);
  write_drains(all, 0);
  for (auto [path, mono] : {std::pair{all, int64_t{1000} * kS}, std::pair{kept, int64_t{1000} * kS + 2'500'000'000}}) {
    auto db = Db::open(path, Db::Mode::kReadWrite);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)
                    ->exec("INSERT OR REPLACE INTO meta (key, value) VALUES ('host', 'node-a'), ('start_mono_ns', '" +
                           std::to_string(mono) + "')")
                    .ok());
  }
  auto merged = merge_recordings({all, kept}, job);
  ASSERT_TRUE(merged.ok()) << merged.status().message();
  ASSERT_EQ((*merged)[1].offset_ns, 2'500'000'000);

  // One input's rows of each summary table as text, its key column (thread, track or process:
  // the input's only one) left out, buckets moved by `shift_ns` (floored per level).
  auto rows_of = [](const std::string& path, std::optional<int64_t> key, int64_t shift_ns) {
    std::vector<std::string> out;
    auto db = Db::open(path, Db::Mode::kReadOnly);
    EXPECT_TRUE(db.ok());
    if (!db.ok()) return out;
    for (const char* table : {"span_summaries", "instant_summaries", "counter_summaries", "gpu_summaries"}) {
      auto st = (*db)->prepare(std::string("SELECT * FROM ") + table + " ORDER BY 1, 2, 3, 4, 5");
      EXPECT_TRUE(st.ok());
      while ((*st)->step()) {
        if (key && (*st)->int64(2) != *key) continue;
        const int64_t level = (*st)->int64(0);
        std::string row = std::string(table) + "|" + std::to_string(level) + "|" +
                          std::to_string((*st)->int64(1) + summary_bucket(shift_ns, level));
        for (int c = 3; c < (*st)->columns(); ++c) {
          // counter_summaries.last_ts_ns is a time: moved by the offset itself
          const bool time = std::string(table) == "counter_summaries" && c == 7;
          row += "|" + (time ? std::to_string((*st)->int64(c) + shift_ns) : (*st)->blob(c));
        }
        out.push_back(row);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  const auto kept_rows = rows_of(kept, std::nullopt, 2'500'000'000);
  ASSERT_GT(kept_rows.size(), 800u);
  EXPECT_EQ(rows_of(job, 2, 0), kept_rows);  // the kept input's thread, track and process are the second
  EXPECT_EQ(rows_of(job, 1, 0), rows_of(all, std::nullopt, 0));
  // The merged rows of the kept input hold every span of its run: 200 s of 10 per 100 ms.
  auto db = Db::open(job, Db::Mode::kReadOnly);
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(count(**db, "SELECT sum(count) FROM span_summaries WHERE thread_id = 2 AND level_ns = 100000000000"),
            20000);
  EXPECT_LT(count(**db, "SELECT count(*) FROM spans WHERE thread_id = 2"), 20000 / 4);
}

}  // namespace
}  // namespace stallscope
