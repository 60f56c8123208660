// `stallscope merge`: the recordings of a job's two ranks, each made by its own `stallscope run`
// and started 2 s apart, merged into one: rows all there, on one clock (exactly, from one host;
// from the collectives, across hosts whose realtime clocks disagree by 3 ms), pids of another host
// moved and followed by their arguments, strings re-interned; and the report of the merged
// recording finds the two ranks and the slower one.
#include "storage/merge.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <map>
#include <vector>

#include "analysis/report.h"
#include "storage/reader.h"
#include "storage/sqlite.h"
#include "storage/summaries.h"
#include "tests/analysis/fixture.h"
#include "tests/unit/test_util.h"

namespace stallscope::analysis {
namespace {

using stallscope::testing::kMs;
using stallscope::testing::RecordingBuilder;
using stallscope::testing::SimConfig;
using stallscope::testing::SimTruth;

constexpr int64_t kStartGap = 2000 * kMs;  // rank 1's recording started 2 s after rank 0's

// The job on one global clock: both loops start at 3 s of rank 0's clock; rank r's file counts
// from its own start. A collective per step, 5 ms into it, all leaving 1 ms after the later
// arrival. Returns each rank's hand-offs on the global clock.
std::vector<int64_t> write_rank(const std::string& path, int r, const std::string& host, int64_t real_skew_ns,
                                const std::vector<int64_t>& other_arrivals, std::vector<int64_t>* arrivals) {
  RecordingBuilder b(path);
  const int64_t origin = r == 0 ? 0 : kStartGap;  // the file's clock = global - origin
  b.meta("host", host);
  b.meta("start_mono_ns", std::to_string(1'000'000'000'000 + origin));
  b.meta("start_real_ns", std::to_string(1'700'000'000'000'000'000 + origin + real_skew_ns));
  SimConfig c;
  c.main_pid = 1000 + r;
  c.first_worker_pid = 2000 + 10 * r;
  c.num_workers = 2;
  c.batches_per_epoch = 30;
  c.compute_ns = 20 * kMs;
  c.start_ns = 3000 * kMs - origin;
  c.finish = false;
  c.fetch_ns = [r](int, int) { return (r == 0 ? 10 : 120) * kMs; };
  const SimTruth t = simulate(b, c);
  b.instant(t.main_thread, "dist.rank", c.start_ns - kMs, r,
            b.str(R"({"rank":)" + std::to_string(r) + R"(,"world_size":2,"node":")" + host + R"("})"), 2);
  std::vector<int64_t> global;
  for (int64_t h : t.handoffs) global.push_back(h + origin);
  for (size_t k = 0; k < global.size(); ++k) arrivals->push_back(global[k] + 5 * kMs);
  if (!other_arrivals.empty()) {
    for (size_t k = 0; k < std::min(arrivals->size(), other_arrivals.size()); ++k) {
      const int64_t leave = std::max((*arrivals)[k], other_arrivals[k]) + kMs;
      b.span(t.main_thread, "dist.collective", (*arrivals)[k] - origin, leave - (*arrivals)[k], 64,
             static_cast<int64_t>(k), b.str("all_reduce"), 1);
    }
  }
  b.meta("end_ns", std::to_string(t.window_end_ns + 10 * kMs));
  b.finish();
  return global;
}

// Two passes: arrivals depend only on each rank's own loop, so the first pass finds them and the
// second writes the collectives that need both.
void write_job(const stallscope::testing::TempDir& dir, const std::string& host1, int64_t skew_ns) {
  std::vector<int64_t> a0, a1, unused;
  write_rank(dir.file("probe0.db"), 0, "node-a", 0, {}, &a0);
  write_rank(dir.file("probe1.db"), 1, host1, skew_ns, {}, &a1);
  unused.clear();
  write_rank(dir.file("rank0.db"), 0, "node-a", 0, a1, &unused);
  unused.clear();
  write_rank(dir.file("rank1.db"), 1, host1, skew_ns, a0, &unused);
}

int64_t count(const std::string& db, const char* table) {
  auto r = Reader::open(db);
  auto n = (*r)->count(table);
  return n.ok() ? *n : -1;
}

// How far an instant's time falls behind the latest before it, in id order.
int64_t worst_step_back(const std::string& db) {
  auto reader = Reader::open(db);
  std::optional<int64_t> latest;
  int64_t worst = 0;
  EXPECT_TRUE((*reader)
                  ->for_each_instant(0, count(db, "instants"),
                                     [&](const InstantRow& in) {
                                       if (latest) worst = std::max(worst, *latest - in.ts_ns);
                                       latest = std::max(latest.value_or(in.ts_ns), in.ts_ns);
                                     })
                  .ok());
  return worst;
}

TEST(MergeTest, RanksOfOneHostShareTheMonotonicClockExactly) {
  stallscope::testing::TempDir dir;
  write_job(dir, "node-a", 0);
  const std::string job = dir.file("job.db");
  auto merged = merge_recordings({dir.file("rank0.db"), dir.file("rank1.db")}, job);
  ASSERT_TRUE(merged.ok()) << merged.status().message();
  EXPECT_EQ((*merged)[1].clock, "same host");
  EXPECT_EQ((*merged)[1].offset_ns, kStartGap);
  EXPECT_EQ((*merged)[1].pid_shift, 0);
  for (const char* t : {"spans", "instants", "counters", "processes", "threads"}) {
    EXPECT_EQ(count(job, t), count(dir.file("rank0.db"), t) + count(dir.file("rank1.db"), t)) << t;
  }

  auto s = load_session(job);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const Report r = analyze(*s);
  ASSERT_EQ(r.ranks.ranks.size(), 2u);
  EXPECT_EQ(r.ranks.matched, 30);
  ASSERT_TRUE(r.ranks.slowest.has_value());
  EXPECT_EQ(r.ranks.slowest->rank, 1);
  EXPECT_EQ(r.ranks.slowest->last_at, 30);
  EXPECT_GT(r.ranks.ranks[0].collective_wait_s, 1.0);
  EXPECT_DOUBLE_EQ(r.ranks.ranks[1].collective_wait_s, 0);
  // Each rank's own loop, as in its own recording.
  for (int k = 0; k < 2; ++k) {
    auto one = load_session(dir.file("rank" + std::to_string(k) + ".db"));
    ASSERT_TRUE(one.ok());
    const Report alone = analyze(*one);
    EXPECT_EQ(r.ranks.ranks[static_cast<size_t>(k)].steps, alone.steps);
    EXPECT_NEAR(r.ranks.ranks[static_cast<size_t>(k)].stall_fraction, alone.stall.fraction, 1e-9);
    EXPECT_EQ(r.ranks.ranks[static_cast<size_t>(k)].samples_per_s, alone.samples_per_s);
  }
  // Each rank's loader queue (queue_summaries, built from the merged rows in time order) holds the
  // same time and batch-time as its own recording's, at every level.
  auto queue_totals = [](const std::string& path, int64_t level) {
    auto db = Db::open(path, Db::Mode::kReadOnly);
    EXPECT_TRUE(db.ok());
    std::map<int64_t, std::vector<int64_t>> by_pid;
    if (!db.ok()) return by_pid;
    auto st = (*db)->prepare(
        "SELECT p.pid, sum(covered_ns), sum(ready_ns), sum(empty_ns), sum(flight_ns), max(ready_max), "
        "max(flight_max), count(*) FROM queue_summaries q JOIN processes p ON p.id = q.process_id WHERE level_ns = " +
        std::to_string(level) + " GROUP BY 1");
    EXPECT_TRUE(st.ok());
    while (st.ok() && (*st)->step()) {
      for (int c = 1; c < 8; ++c) by_pid[(*st)->int64(0)].push_back((*st)->int64(c));
    }
    return by_pid;
  };
  for (int64_t level : kSummaryLevelsNs) {
    auto both = queue_totals(job, level);
    ASSERT_EQ(both.size(), 2u) << level;
    for (int k = 0; k < 2; ++k) {
      auto alone = queue_totals(dir.file("rank" + std::to_string(k) + ".db"), level);
      ASSERT_EQ(alone.size(), 1u);
      const auto& [pid, totals] = *alone.begin();
      EXPECT_GT(totals[0], 0) << k;
      // the sums and the highest values; not the row count (rank 1's buckets move by its 2 s)
      EXPECT_EQ(std::vector<int64_t>(both[pid].begin(), both[pid].end() - 1),
                std::vector<int64_t>(totals.begin(), totals.end() - 1))
          << "rank " << k << " level " << level;
    }
  }
  // The merged file's instants follow time as closely as each input's do (readers bisect on it).
  EXPECT_LE(worst_step_back(job),
            std::max(worst_step_back(dir.file("rank0.db")), worst_step_back(dir.file("rank1.db"))));
}

// Inputs recorded with --keep-detail: the merged file has every event from the later of their cuts,
// on its own clock.
TEST(MergeTest, KeepsTheLatestCutOfInputsThatKeptDetailForAWindow) {
  stallscope::testing::TempDir dir;
  write_job(dir, "node-a", 0);
  for (auto [file, from] : {std::pair<const char*, int64_t>{"rank0.db", 2500 * kMs}, {"rank1.db", 1000 * kMs}}) {
    auto db = Db::open(dir.file(file), Db::Mode::kReadWrite);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(
        (*db)->exec("INSERT INTO meta (key, value) VALUES ('detail_from_ns', '" + std::to_string(from) + "')").ok());
  }
  const std::string job = dir.file("job.db");
  ASSERT_TRUE(merge_recordings({dir.file("rank0.db"), dir.file("rank1.db")}, job).ok());
  auto reader = Reader::open(job);
  ASSERT_TRUE(reader.ok());
  auto meta = (*reader)->meta();
  ASSERT_TRUE(meta.ok());
  // rank 1's cut at 1 s of its clock is 3 s of rank 0's, later than rank 0's 2.5 s.
  EXPECT_EQ(meta->at("detail_from_ns"), std::to_string(1000 * kMs + kStartGap));
}

TEST(MergeTest, AcrossHostsTheCollectivesCorrectTheRealtimeClocks) {
  stallscope::testing::TempDir dir;
  write_job(dir, "node-b", 3 * kMs);  // node-b's realtime clock is 3 ms ahead
  const std::string job = dir.file("job.db");
  auto merged = merge_recordings({dir.file("rank0.db"), dir.file("rank1.db")}, job);
  ASSERT_TRUE(merged.ok()) << merged.status().message();
  const MergedInput& m = (*merged)[1];
  EXPECT_EQ(m.clock, "collectives");
  EXPECT_EQ(m.matched, 30);
  EXPECT_EQ(m.offset_ns, kStartGap);  // the 3 ms of realtime error are gone
  EXPECT_EQ(m.residual_ns, 0);
  EXPECT_EQ(m.pid_shift, 10'000'000);

  auto s = load_session(job);
  ASSERT_TRUE(s.ok());
  const Report r = analyze(*s);
  ASSERT_EQ(r.ranks.ranks.size(), 2u);
  EXPECT_EQ(r.ranks.ranks[1].pid, 10'001'001);
  EXPECT_EQ(r.ranks.ranks[1].node, "node-b");
  EXPECT_EQ(r.ranks.ranks[1].steps, 30);  // its workers found through the moved pids
  ASSERT_TRUE(r.ranks.slowest.has_value());
  EXPECT_EQ(r.ranks.slowest->rank, 1);
  auto from = json::parse(s->meta.at("merged_from"));
  ASSERT_TRUE(from.ok());
  ASSERT_EQ(from->size(), 2u);
  EXPECT_EQ((*from)[1]["clock"], "collectives");
}

TEST(MergeTest, RefusesOneInputAndUnreadableOnes) {
  stallscope::testing::TempDir dir;
  write_job(dir, "node-a", 0);
  EXPECT_FALSE(merge_recordings({dir.file("rank0.db")}, dir.file("j1.db")).ok());
  stallscope::testing::write_file(dir.file("text.db"), "not a recording\n");
  auto bad = merge_recordings({dir.file("rank0.db"), dir.file("text.db")}, dir.file("j2.db"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("text.db"), std::string::npos) << bad.status().message();
}

void set_meta(const std::string& db, const std::string& key, const std::string& value) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  const std::string sql = "INSERT OR REPLACE INTO meta (key, value) VALUES ('" + key + "', '" + value + "')";
  EXPECT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(h);
  sqlite3_close(h);
}

TEST(MergeTest, RefusesRecordingsThatAreNotPartsOfOneJob) {
  stallscope::testing::TempDir dir;
  write_job(dir, "node-a", 0);
  const std::string a = dir.file("rank0.db"), b = dir.file("rank1.db");
  // The same file twice (also under another name) is refused, mismatch allowed or not.
  for (bool allow : {false, true}) {
    auto twice = merge_recordings({a, dir.path() + "/./rank0.db"}, dir.file("t.db"), allow);
    ASSERT_FALSE(twice.ok());
    EXPECT_NE(twice.status().message().find("given twice"), std::string::npos) << twice.status().message();
  }
  set_meta(a, "job", "job-1");
  set_meta(b, "job", "job-2");
  auto jobs = merge_recordings({a, b}, dir.file("j.db"));
  ASSERT_FALSE(jobs.ok());
  EXPECT_EQ(jobs.status().message(),
            a + " and " + b +
                " are of different jobs (job-1, job-2); merge the recordings of one job (or pass --allow-mismatch)");
  EXPECT_EQ(::access(dir.file("j.db").c_str(), F_OK), -1);
  EXPECT_TRUE(merge_recordings({a, b}, dir.file("j2.db"), true).ok());

  set_meta(b, "job", "job-1");
  set_meta(a, "world_size", "2");
  set_meta(b, "world_size", "4");
  auto sizes = merge_recordings({a, b}, dir.file("s.db"));
  ASSERT_FALSE(sizes.ok());
  EXPECT_NE(sizes.status().message().find("different world sizes (2, 4)"), std::string::npos);

  set_meta(b, "world_size", "2");
  set_meta(a, "rank", "1");
  set_meta(b, "rank", "1");
  auto ranks = merge_recordings({a, b}, dir.file("r.db"));
  ASSERT_FALSE(ranks.ok());
  EXPECT_NE(ranks.status().message().find("both hold rank 1"), std::string::npos);
  set_meta(a, "rank", "0");
  auto fine = merge_recordings({a, b}, dir.file("ok.db"));
  EXPECT_TRUE(fine.ok()) << fine.status().message();

  // The command: one line, exit status 1, nothing written; --allow-mismatch merges.
  set_meta(a, "rank", "1");
  auto r = stallscope::testing::run_process({STALLSCOPE_BIN, "merge", a, b, "-o", dir.file("c.db")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(stallscope::testing::count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--allow-mismatch"), std::string::npos) << r.err;
  EXPECT_EQ(::access(dir.file("c.db").c_str(), F_OK), -1);
  r = stallscope::testing::run_process({STALLSCOPE_BIN, "merge", "--allow-mismatch", a, b, "-o", dir.file("c.db")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(MergeTest, TheCommandSaysHowEachClockWasAlignedAndRefusesInOneLine) {
  using stallscope::testing::count_lines;
  using stallscope::testing::run_process;
  stallscope::testing::TempDir dir;
  write_job(dir, "node-b", 3 * kMs);
  const std::string a = dir.file("rank0.db"), b = dir.file("rank1.db"), job = dir.file("job.db");
  auto r = run_process({STALLSCOPE_BIN, "merge", a, b, "-o", job});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("realtime refined by 30 collectives (residual 0.0 us)"), std::string::npos) << r.err;
  r = run_process({STALLSCOPE_BIN, "report", "--json", job});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto doc = json::parse(r.out);
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ((*doc)["slowest_rank"]["rank"], 1);

  r = run_process({STALLSCOPE_BIN, "merge", a, b, "-o", job});  // exists
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  r = run_process({STALLSCOPE_BIN, "merge", a, "-o", dir.file("x.db")});
  EXPECT_EQ(r.exit_code, 2);
  r = run_process({STALLSCOPE_BIN, "merge", a, dir.file("missing.db"), "-o", dir.file("y.db")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_EQ(::access(dir.file("y.db").c_str(), F_OK), -1);
  r = run_process({STALLSCOPE_BIN, "merge", a, b, "-o", job, "--force", "-q"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

}  // namespace
}  // namespace stallscope::analysis
