// Multi-rank jobs on synthetic recordings: two ranks' DataLoader loops (rank 1's input pipeline
// slower), each with its dist.rank identity and a collective per step whose arrivals are known by
// construction; the per-rank figures, the matched collectives, the slowest rank and the time the
// job lost to it.
#include <gtest/gtest.h>

#include "analysis/report.h"
#include "tests/analysis/fixture.h"
#include "tests/unit/test_util.h"

namespace stallscope::analysis {
namespace {

using stallscope::testing::kMs;
using stallscope::testing::RecordingBuilder;
using stallscope::testing::SimConfig;
using stallscope::testing::SimTruth;

struct TwoRanks {
  SimTruth truth[2];
  double wait0_s = 0;  // rank 0's wait for rank 1, summed over the matched collectives
};

// Rank r's loop: 2 workers, fetches of 10 ms (rank 0) or 120 ms (rank 1), 20 ms steps. After each
// hand-off the rank calls a collective 5 ms into its step: synchronously on the odd steps (a
// dist.collective span), asynchronously on the even ones (dist.issue, dist.done); all leave 1 ms
// after the later arrival.
TwoRanks write_job(RecordingBuilder& b, int steps) {
  TwoRanks job;
  for (int r = 0; r < 2; ++r) {
    SimConfig c;
    c.main_pid = 1000 + 100 * r;
    c.first_worker_pid = 5000 + 100 * r;
    c.num_workers = 2;
    c.batches_per_epoch = steps;
    c.compute_ns = 20 * kMs;
    c.finish = false;
    c.fetch_ns = [r](int, int) { return (r == 0 ? 10 : 120) * kMs; };
    job.truth[r] = simulate(b, c);
  }
  int64_t threads[2];
  for (int r = 0; r < 2; ++r) {
    threads[r] = job.truth[r].main_thread;
    const std::string doc = R"({"rank":)" + std::to_string(r) + R"(,"local_rank":)" + std::to_string(r) +
                            R"(,"world_size":2,"node":"node-a","job":"j1"})";
    b.instant(threads[r], "dl.rank_unused", 0);  // a name outside the vocabulary: ignored
    b.instant(threads[r], "dist.rank", 500 * kMs, r, b.str(doc), 2);
  }
  const size_t n = std::min(job.truth[0].handoffs.size(), job.truth[1].handoffs.size());
  for (size_t k = 0; k < n; ++k) {
    const int64_t arrive[2] = {job.truth[0].handoffs[k] + 5 * kMs, job.truth[1].handoffs[k] + 5 * kMs};
    const int64_t leave = std::max(arrive[0], arrive[1]) + 1 * kMs;
    job.wait0_s += static_cast<double>(std::max<int64_t>(0, arrive[1] - arrive[0])) / 1e9;
    for (int r = 0; r < 2; ++r) {
      if (k % 2 == 1) {
        b.span(threads[r], "dist.collective", arrive[r], leave - arrive[r], 4096, static_cast<int64_t>(k),
               b.str("all_reduce"), 1);
      } else {
        b.instant(threads[r], "dist.issue", arrive[r], 1 << 20, static_cast<int64_t>(k), b.str("ddp.all_reduce"));
        b.instant(threads[r], "dist.done", leave, 0, static_cast<int64_t>(k), 0);
      }
    }
  }
  b.finish();
  return job;
}

class RanksTest : public ::testing::Test {
 protected:
  stallscope::testing::TempDir dir_;
  Report report(const std::string& name, const std::function<void(RecordingBuilder&)>& write) {
    {
      RecordingBuilder b(dir_.file(name));
      write(b);
    }
    auto s = load_session(dir_.file(name));
    EXPECT_TRUE(s.ok()) << s.status().message();
    return analyze(*s);
  }
};

TEST_F(RanksTest, TheRankWithTheSlowerPipelineIsTheSlowestAndTheOthersWaitInCollectives) {
  TwoRanks job;
  const Report r = report("job.db", [&](RecordingBuilder& b) { job = write_job(b, 40); });
  ASSERT_EQ(r.ranks.ranks.size(), 2u);
  const RankStats& r0 = r.ranks.ranks[0];
  const RankStats& r1 = r.ranks.ranks[1];
  EXPECT_EQ(r0.rank, 0);
  EXPECT_EQ(r1.rank, 1);
  EXPECT_EQ(r0.world_size, 2);
  EXPECT_EQ(r0.local_rank, 0);
  EXPECT_EQ(r1.node, "node-a");
  EXPECT_EQ(r1.job, "j1");
  EXPECT_EQ(r0.pid, 1000);
  EXPECT_EQ(r1.pid, 1100);
  // Each rank's own loop, as its simulation wrote it.
  for (int k = 0; k < 2; ++k) {
    const RankStats& st = r.ranks.ranks[static_cast<size_t>(k)];
    EXPECT_EQ(st.steps, job.truth[k].steps);
    EXPECT_NEAR(st.stall_fraction, job.truth[k].stall_fraction(), 1e-6) << k;
  }
  EXPECT_GT(r1.stall_fraction, 0.5);                     // rank 1 waits for its data
  EXPECT_LT(r0.stall_fraction, 0.2);                     // rank 0 does not...
  EXPECT_NEAR(r0.collective_wait_s, job.wait0_s, 1e-6);  // ...it waits for rank 1 in the collectives
  EXPECT_GT(r0.collective_wait_s, 1.0);
  EXPECT_DOUBLE_EQ(r1.collective_wait_s, 0);
  EXPECT_EQ(r0.collectives, 40);
  EXPECT_EQ(r.ranks.matched, 40);
  ASSERT_TRUE(r.ranks.slowest.has_value());
  EXPECT_EQ(r.ranks.slowest->rank, 1);
  EXPECT_EQ(r.ranks.slowest->last_at, 40);
  EXPECT_NEAR(r.ranks.slowest->lost_s, job.wait0_s, 1e-6);  // two ranks: the next-latest is rank 0

  const Json j = to_json(r);
  ASSERT_EQ(j["ranks"].size(), 2u);
  EXPECT_EQ(j["slowest_rank"]["rank"], 1);
  EXPECT_EQ(j["ranks"][0]["stall"]["fraction"].get<double>(), r0.stall_fraction);
  const std::string text = render_text(r);
  EXPECT_NE(text.find("slowest rank: 1"), std::string::npos) << text;
}

TEST_F(RanksTest, OneProcessIsNoJobAndCollectivesNotOnEveryRankAreNotMatched) {
  const Report one = report("one.db", [](RecordingBuilder& b) {
    SimConfig c;
    c.finish = false;
    const int64_t th = simulate(b, c).main_thread;
    b.instant(th, "dist.rank", 500 * kMs, 0, b.str(R"({"rank":0,"world_size":1})"), 1);
    b.finish();
  });
  EXPECT_TRUE(one.ranks.ranks.empty());
  EXPECT_EQ(to_json(one)["slowest_rank"], nullptr);
  EXPECT_EQ(render_text(one).find("Ranks\n"), std::string::npos);

  const Report odd = report("odd.db", [](RecordingBuilder& b) {
    for (int r = 0; r < 2; ++r) {
      SimConfig c;
      c.main_pid = 1000 + 100 * r;
      c.first_worker_pid = 5000 + 100 * r;
      c.finish = false;
      const int64_t th = simulate(b, c).main_thread;
      b.instant(th, "dist.rank", 500 * kMs, r, b.str("{}"), 2);
      // Rank 0 calls a broadcast where rank 1 calls an all_reduce: not one collective.
      b.span(th, "dist.collective", 2000 * kMs, kMs, 8, 0, b.str(r == 0 ? "broadcast" : "all_reduce"));
    }
    b.finish();
  });
  ASSERT_EQ(odd.ranks.ranks.size(), 2u);
  EXPECT_EQ(odd.ranks.matched, 0);
  EXPECT_FALSE(odd.ranks.slowest.has_value());
  EXPECT_NE(render_text(odd).find("the slowest rank is not known"), std::string::npos);
}

}  // namespace
}  // namespace stallscope::analysis
