// Tests of the recommendation rules on simulated training loops: which ids fire for the classic
// input-pipeline bottlenecks, which stay silent, and the evidence they cite.
#include <gtest/gtest.h>

#include "analysis/loader_tuning.h"
#include "analysis/report.h"
#include "analysis/session.h"
#include "tests/analysis/fixture.h"
#include "tests/unit/test_util.h"

namespace stallscope::analysis {
namespace {

using stallscope::testing::kMs;
using stallscope::testing::RecordingBuilder;
using stallscope::testing::SimConfig;
using stallscope::testing::simulate;

const char* const kSpeedIds[] = {"increase_num_workers",     "reduce_num_workers", "enable_persistent_workers",
                                 "increase_prefetch_factor", "enable_pin_memory",  "slow_dataset_getitem"};

class RecommendTest : public ::testing::Test {
 protected:
  stallscope::testing::TempDir dir_;

  Report run(const SimConfig& c, const std::map<std::string, std::string>& meta = {}) {
    const std::string p = dir_.file(stallscope::testing::unique_name("run") + ".db");
    {
      RecordingBuilder b(p);
      for (const auto& [k, v] : meta) b.meta(k, v);
      simulate(b, c);
    }
    auto s = load_session(p);
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? analyze(*s) : Report{};
  }
};

const Recommendation* find(const Report& r, const std::string& id) {
  for (const Recommendation& rec : r.recommendations) {
    if (rec.id == id) return &rec;
  }
  return nullptr;
}

std::string ids(const Report& r) {
  std::string s;
  for (const Recommendation& rec : r.recommendations) s += rec.id + " ";
  return s;
}

void expect_no_speed_recommendation(const Report& r) {
  for (const char* id : kSpeedIds) EXPECT_EQ(find(r, id), nullptr) << id << " in: " << ids(r);
}

// Workers keep well ahead of a slow training step: nothing to fix in the input pipeline.
TEST_F(RecommendTest, ComputeBoundRunGetsNoSpeedRecommendation) {
  SimConfig c;
  c.num_workers = 4;
  c.fetch_ns = [](int, int) { return 20 * kMs; };
  c.compute_ns = 100 * kMs;
  c.worker_cpu = 0.2;
  c.worker_runq = 0.3;  // even with a busy machine: not data-bound, so no worker advice
  const Report r = run(c);
  EXPECT_LT(r.stall.fraction, 0.01);
  EXPECT_FALSE(r.data_bound);
  expect_no_speed_recommendation(r);
  EXPECT_NE(render_text(r).find("not the bottleneck"), std::string::npos);
}

// num_workers=0 with a 30 ms fetch per 100 ms step: move loading into workers.
TEST_F(RecommendTest, NumWorkersZeroSlowGetsIncreaseNumWorkers) {
  SimConfig c;  // 30 ms fetch in next(), 70 ms compute
  const Report r = run(c);
  const Recommendation* rec = find(r, "increase_num_workers");
  ASSERT_NE(rec, nullptr) << ids(r);
  EXPECT_EQ(rec->severity, "high");  // stall 0.30
  EXPECT_NE(rec->message.find("1/(1-0.30) = 1.43x"), std::string::npos) << rec->message;
  EXPECT_NE(rec->message.find("num_workers=0"), std::string::npos);
  // A speed rule without evidence of its own points at the longest stall.
  EXPECT_TRUE(rec->speed);
  ASSERT_TRUE(r.longest_stall.has_value());
  EXPECT_EQ(rec->where.what, r.longest_stall->what);
  EXPECT_NE(rec->where.what.find("longest stall: "), std::string::npos);
  EXPECT_EQ(rec->where.pid, 0);
  EXPECT_NEAR(*json::get_double(rec->evidence, "stall_fraction"), 0.30, 1e-9);
  EXPECT_NEAR(*json::get_double(rec->evidence, "ideal_speedup"), 1 / 0.7, 1e-9);
  EXPECT_EQ(json::get_int(rec->evidence, "suggested_num_workers"), 2);  // ceil(1.5 * 30 / 70) = 1, at least 2
  EXPECT_EQ(json::get_int(rec->evidence, "num_workers"), 0);
  EXPECT_EQ(find(r, "slow_dataset_getitem"), nullptr);
  EXPECT_EQ(find(r, "reduce_num_workers"), nullptr);
  EXPECT_EQ(find(r, "enable_pin_memory"), nullptr);  // CPU mode: never
}

// Two saturated workers on a 16-CPU machine with no run-queue pressure: add workers.
TEST_F(RecommendTest, SaturatedWorkersWithSpareCpusGetMoreWorkers) {
  SimConfig c;
  c.num_workers = 2;
  c.fetch_ns = [](int, int) { return 100 * kMs; };
  c.compute_ns = 20 * kMs;
  c.worker_cpu = 1.0;
  c.worker_runq = 0.02;
  const Report r = run(c, {{"cpu_count", "16"}});
  EXPECT_EQ(r.cpu_count, 16);
  const Recommendation* rec = find(r, "increase_num_workers");
  ASSERT_NE(rec, nullptr) << ids(r);
  EXPECT_EQ(json::get_int(rec->evidence, "suggested_num_workers"), 8);  // ceil(1.5 * 100 / 20)
  EXPECT_GE(*json::get_double(rec->evidence, "workers_busy_fraction"), 0.8);
  EXPECT_EQ(find(r, "slow_dataset_getitem"), nullptr) << ids(r);
  EXPECT_EQ(find(r, "reduce_num_workers"), nullptr) << ids(r);
}

// The advice's cap is the worker count of `stallscope run --loader tuned` (loader_tuning.h): on
// a 6-CPU machine both stop at 5, leaving a CPU to the training process.
TEST_F(RecommendTest, WorkerCapIsTheTunedLoaderCount) {
  EXPECT_EQ(worker_cap(1), 1);
  EXPECT_EQ(worker_cap(2), 1);
  EXPECT_EQ(worker_cap(6), 5);
  EXPECT_EQ(worker_cap(64), 63);
  SimConfig c;
  c.num_workers = 2;
  c.fetch_ns = [](int, int) { return 100 * kMs; };
  c.compute_ns = 10 * kMs;
  c.worker_cpu = 1.0;
  c.worker_runq = 0.02;
  const Report r = run(c, {{"cpu_count", "6"}});
  const Recommendation* rec = find(r, "increase_num_workers");
  ASSERT_NE(rec, nullptr) << ids(r);
  EXPECT_NE(rec->message.find("capped at 6 CPUs - 1 = 5"), std::string::npos) << rec->message;
  cpus::Budget six;
  six.affinity = 6;
  six.usable = 6;
  const TunedLoader t = tuned_loader(six);
  EXPECT_EQ(json::get_int(rec->evidence, "suggested_num_workers"), t.num_workers);
  EXPECT_EQ(t.num_workers, 5);
  EXPECT_TRUE(t.persistent_workers);
  EXPECT_EQ(t.prefetch_factor, kTunedPrefetchFactor);
  const Json doc = to_json(t);
  EXPECT_EQ(json::get_int(doc, "num_workers"), 5);
  EXPECT_EQ(json::get_int(doc, "usable_cores"), 6);
  EXPECT_EQ(json::get_bool(doc, "persistent_workers"), true);
  EXPECT_EQ(json::get_string(doc, "basis"),
            "6 usable (affinity 6, cgroup quota none) - 1 for the training process = 5 workers");
  // A cgroup quota of 1.5 CPUs on that machine: 2 usable, 1 worker.
  cpus::Budget quota = six;
  quota.quota = 1.5;
  quota.usable = cpus::usable_from(6, 1.5);
  EXPECT_EQ(tuned_loader(quota).num_workers, 1);
}

// Eight workers fighting over the CPUs (half their time runnable but not running).
TEST_F(RecommendTest, OversubscribedWorkersGetReduceNumWorkers) {
  SimConfig c;
  c.num_workers = 8;
  c.fetch_ns = [](int, int) { return 400 * kMs; };
  c.compute_ns = 20 * kMs;
  c.worker_cpu = 0.45;
  c.worker_runq = 0.5;
  const Report r = run(c);
  const Recommendation* rec = find(r, "reduce_num_workers");
  ASSERT_NE(rec, nullptr) << ids(r);
  EXPECT_EQ(rec->severity, "high");
  EXPECT_EQ(json::get_int(rec->evidence, "suggested_num_workers"), 4);  // round(8 x 0.45 cores they got)
  EXPECT_NEAR(*json::get_double(rec->evidence, "runq_delay_fraction"), 0.5, 1e-9);
  EXPECT_NE(rec->message.find("50.0%"), std::string::npos) << rec->message;
  EXPECT_EQ(find(r, "increase_num_workers"), nullptr) << ids(r);
  // Its evidence: the whole window, the worker with the most run-queue delay, its run-queue strip.
  EXPECT_TRUE(rec->speed);
  EXPECT_EQ(rec->where.counter, vocab::Counter::kRunqWait);
  EXPECT_NE(rec->where.pid, 0);
  EXPECT_NE(rec->where.what.find("pid " + std::to_string(rec->where.pid) + ") waited for a CPU 50% of its life"),
            std::string::npos)
      << rec->where.what;
  EXPECT_LE(rec->where.t0, r.window_start_ns);
  EXPECT_GE(rec->where.t1, r.window_end_ns);
  // The workers are saturated and the CPUs full: the dataset itself is too slow.
  ASSERT_NE(find(r, "slow_dataset_getitem"), nullptr) << ids(r);
  EXPECT_NEAR(*json::get_double(find(r, "slow_dataset_getitem")->evidence, "fetch_speedup_needed"), 400.0 / (8 * 20.0),
              1e-6);

  // With the machine's CPU count recorded: one worker per CPU.
  const Report two = run(c, {{"cpu_count", "2"}});
  ASSERT_NE(find(two, "reduce_num_workers"), nullptr) << ids(two);
  EXPECT_EQ(json::get_int(find(two, "reduce_num_workers")->evidence, "suggested_num_workers"), 2);
}

// Saturated workers, no run-queue data, but the recorder says the machine has 4 CPUs.
TEST_F(RecommendTest, SaturatedWorkersOnFullMachineGetSlowDatasetGetitem) {
  SimConfig c;
  c.num_workers = 3;
  c.fetch_ns = [](int, int) { return 90 * kMs; };
  c.compute_ns = 10 * kMs;
  const Report r = run(c, {{"cpu_count", "4"}});
  ASSERT_NE(find(r, "slow_dataset_getitem"), nullptr) << ids(r);
  EXPECT_EQ(find(r, "increase_num_workers"), nullptr) << ids(r);
  EXPECT_EQ(find(r, "reduce_num_workers"), nullptr) << ids(r);
}

// Workers re-created at every epoch with a 1.5 s start-up.
TEST_F(RecommendTest, RespawnEachEpochGetsPersistentWorkers) {
  SimConfig c;
  c.num_workers = 2;
  c.epochs = 4;
  c.batches_per_epoch = 30;
  c.compute_ns = 50 * kMs;
  c.fetch_ns = [](int, int) { return 10 * kMs; };
  c.worker_boot_ns = 1500 * kMs;
  c.start_method = "spawn";
  const Report r = run(c);
  const Recommendation* rec = find(r, "enable_persistent_workers");
  ASSERT_NE(rec, nullptr) << ids(r);
  EXPECT_EQ(rec->severity, "high");
  EXPECT_EQ(json::get_int(rec->evidence, "respawned_epochs"), 3);
  EXPECT_NEAR(*json::get_double(rec->evidence, "respawn_cost_s"), 3 * 1.5, 1e-9);
  EXPECT_NE(rec->message.find("spawn"), std::string::npos);
  // Its evidence: the slowest start of a later epoch, about 1.5 s from epoch begin to first batch.
  ASSERT_GE(rec->where.t1 - rec->where.t0, 1500 * kMs) << rec->where.what;
  EXPECT_NE(rec->where.what.find(" to hand its first batch (new workers started)"), std::string::npos)
      << rec->where.what;
  EXPECT_EQ(rec->where.what.rfind("epoch 0 ", 0), std::string::npos) << rec->where.what;
  EXPECT_EQ(find(r, "increase_num_workers"), nullptr) << ids(r);
  EXPECT_EQ(find(r, "increase_prefetch_factor"), nullptr) << ids(r);

  // The same run with persistent workers: nothing to say about it.
  c.persistent_workers = true;
  const Report p = run(c);
  EXPECT_EQ(find(p, "enable_persistent_workers"), nullptr) << ids(p);
}

// Workers have capacity to spare, but one batch in ten takes 400 ms: deeper prefetch.
TEST_F(RecommendTest, BurstyFetchGetsIncreasePrefetchFactor) {
  SimConfig c;
  c.num_workers = 2;
  c.batches_per_epoch = 200;
  c.compute_ns = 40 * kMs;
  c.fetch_ns = [](int, int b) { return (b % 10 == 0 ? 400 : 10) * kMs; };
  c.worker_cpu = 0.5;
  c.worker_runq = 0.02;
  const Report r = run(c);
  const Recommendation* rec = find(r, "increase_prefetch_factor");
  ASSERT_NE(rec, nullptr) << ids(r);
  EXPECT_EQ(json::get_int(rec->evidence, "prefetch_factor"), 2);
  EXPECT_EQ(json::get_int(rec->evidence, "suggested_prefetch_factor"), 5);  // ceil(400 / (2 x 40))
  EXPECT_GE(*json::get_double(rec->evidence, "fetch_p99_over_p50"), 2.5);
  EXPECT_EQ(find(r, "increase_num_workers"), nullptr) << ids(r);
  EXPECT_EQ(find(r, "slow_dataset_getitem"), nullptr) << ids(r);

  // Following the advice removes most of the stall in the same simulation.
  c.prefetch_factor = 5;
  const Report after = run(c);
  EXPECT_LT(after.stall.fraction, r.stall.fraction / 2) << r.stall.fraction << " -> " << after.stall.fraction;
}

// Copy-on-write growth is reported even when the run is compute-bound.
TEST_F(RecommendTest, MemoryGrowthIsReportedRegardless) {
  SimConfig c;
  c.num_workers = 4;
  c.fetch_ns = [](int, int) { return 20 * kMs; };
  c.compute_ns = 100 * kMs;
  c.worker_private_start = 50 << 20;
  c.worker_private_growth = 600 << 20;
  const Report r = run(c);
  expect_no_speed_recommendation(r);
  const Recommendation* rec = find(r, "worker_memory_growth");
  ASSERT_NE(rec, nullptr) << ids(r);
  EXPECT_EQ(rec->severity, "medium");  // >= 512 MiB per worker, 2.3 GiB together
  EXPECT_EQ(json::get_int(rec->evidence, "max_private_growth_bytes"), int64_t{600} << 20);
  EXPECT_EQ(json::get_int(rec->evidence, "concurrent_private_growth_bytes"), int64_t{2400} << 20);
  EXPECT_EQ(json::get_int(rec->evidence, "concurrent_workers"), 4);
  // Not a speed rule; its evidence is the growing worker's memory over the run.
  EXPECT_FALSE(rec->speed);
  EXPECT_EQ(rec->where.counter, vocab::Counter::kRss);
  EXPECT_EQ(rec->where.pid, json::get_int(rec->evidence, "max_growth_pid"));

  // Small growth stays quiet.
  c.worker_private_growth = 20 << 20;
  EXPECT_EQ(find(run(c), "worker_memory_growth"), nullptr);
}

TEST_F(RecommendTest, RecommendationsAreOrderedAndWellFormed) {
  SimConfig c;
  c.num_workers = 8;
  c.fetch_ns = [](int, int) { return 400 * kMs; };
  c.compute_ns = 20 * kMs;
  c.worker_cpu = 0.45;
  c.worker_runq = 0.3;
  c.worker_private_start = 0;
  c.worker_private_growth = 200 << 20;
  const Report r = run(c);
  ASSERT_GE(r.recommendations.size(), 3u) << ids(r);
  int last = 0;
  for (const Recommendation& rec : r.recommendations) {
    const int rank = rec.severity == "high" ? 0 : rec.severity == "medium" ? 1 : rec.severity == "low" ? 2 : -1;
    ASSERT_GE(rank, 0) << rec.severity;
    EXPECT_GE(rank, last) << ids(r);
    last = rank;
    EXPECT_FALSE(rec.message.empty());
    EXPECT_FALSE(rec.action.empty());
    EXPECT_TRUE(rec.evidence.is_object());
    EXPECT_FALSE(rec.evidence.empty());
  }
  const std::string summary = short_summary(r);
  int lines = 0;
  for (char ch : summary) lines += ch == '\n';
  EXPECT_GE(lines, 3);
  EXPECT_LE(lines, 6);
  EXPECT_NE(summary.find(r.recommendations[0].id), std::string::npos) << summary;
}

}  // namespace
}  // namespace stallscope::analysis
