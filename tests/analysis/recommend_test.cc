// Tests of the recommendations on simulated training loops: which ids fire for the classic
// input-pipeline bottlenecks, which stay silent, the evidence they cite, and that following the
// advice gives what the what-if model predicted.
#include <gtest/gtest.h>

#include <functional>

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
 public:
  stallscope::testing::TempDir dir_;

  Report run(const SimConfig& c, const std::map<std::string, std::string>& meta = {},
             const std::function<void(RecordingBuilder&)>& more = nullptr) {
    const std::string p = dir_.file(stallscope::testing::unique_name("run") + ".db");
    {
      RecordingBuilder b(p);
      for (const auto& [k, v] : meta) b.meta(k, v);
      simulate(b, c);
      if (more) more(b);
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

// The advice is a claim about the future: following it in the same simulated loop (fixture.cc,
// an independent model of torch's DataLoader with cores to spare) must give the samples/s the
// what-if model predicted for it, within 3%.
void expect_advice_holds(RecommendTest& t, SimConfig c, const Report& before, int64_t cores) {
  const WhatIf& w = before.whatif;
  ASSERT_TRUE(w.best.has_value());
  const LoaderSetting& to = w.candidates[*w.best].setting;
  c.num_workers = static_cast<int>(to.num_workers);
  c.prefetch_factor = static_cast<int>(to.prefetch_factor);
  c.persistent_workers = to.persistent_workers;
  c.usable_cores = static_cast<int>(cores);
  const Report after = t.run(c);
  ASSERT_TRUE(after.samples_per_s && before.samples_per_s);
  EXPECT_GT(*after.samples_per_s, *before.samples_per_s);
  EXPECT_NEAR(*after.samples_per_s / w.candidates[*w.best].samples_per_s, 1.0, 0.03)
      << to.arguments() << ": measured " << *after.samples_per_s << ", predicted "
      << w.candidates[*w.best].samples_per_s;
}

// num_workers=0, a 30 ms fetch that only waits (I/O) per 70 ms step: one worker hides it.
TEST_F(RecommendTest, NumWorkersZeroWaitingFetchGetsOneWorker) {
  SimConfig c;  // 30 ms fetch in next(), 70 ms compute
  c.fetch_cpu = 0.0;
  c.compute_cpu = 1.0;
  c.usable_cores = 2;
  const Report r = run(c);
  const Recommendation* rec = find(r, "increase_num_workers");
  ASSERT_NE(rec, nullptr) << ids(r);
  EXPECT_EQ(rec->severity, "high");  // predicted 1.42x
  EXPECT_NE(rec->action.find("set num_workers=1,"), std::string::npos) << rec->action;
  EXPECT_NEAR(rec->expected_speedup, 100.0 / 70.0, 0.03);
  // The ideal bound is shown, labelled as the bound.
  EXPECT_NE(rec->message.find("The ideal bound, if all input wait vanished, is 1/(1-0.30) = 1.43x"), std::string::npos)
      << rec->message;
  EXPECT_NE(rec->message.find("num_workers=0"), std::string::npos);
  // A speed rule without evidence of its own points at the longest stall.
  EXPECT_TRUE(rec->speed);
  ASSERT_TRUE(r.longest_stall.has_value());
  EXPECT_EQ(rec->where.what, r.longest_stall->what);
  EXPECT_NEAR(*json::get_double(rec->evidence, "stall_fraction"), 0.30, 1e-9);
  EXPECT_NEAR(*json::get_double(rec->evidence, "ideal_speedup"), 1 / 0.7, 1e-9);
  EXPECT_EQ(json::get_int(rec->evidence, "suggested_num_workers"), 1);
  EXPECT_EQ(json::get_int(rec->evidence, "num_workers"), 0);
  EXPECT_EQ(find(r, "slow_dataset_getitem"), nullptr);
  EXPECT_EQ(find(r, "reduce_num_workers"), nullptr);
  EXPECT_EQ(find(r, "enable_pin_memory"), nullptr);  // CPU mode: never
  expect_advice_holds(*this, c, r, 2);
}

// Two saturated workers (100 ms of CPU per batch) and a 20 ms step on 16 cores: five workers
// deliver a batch per step.
TEST_F(RecommendTest, SaturatedWorkersWithSpareCoresGetMoreWorkers) {
  SimConfig c;
  c.num_workers = 2;
  c.fetch_ns = [](int, int) { return 100 * kMs; };
  c.compute_ns = 20 * kMs;
  c.fetch_cpu = 1.0;
  c.compute_cpu = 1.0;
  c.usable_cores = 16;
  const Report r = run(c);
  const Recommendation* rec = find(r, "increase_num_workers");
  ASSERT_NE(rec, nullptr) << ids(r);
  const int64_t k = json::get_int(rec->evidence, "suggested_num_workers").value_or(0);
  EXPECT_GE(k, 5);
  EXPECT_LE(k, 6);
  EXPECT_EQ(find(r, "slow_dataset_getitem"), nullptr) << ids(r);
  EXPECT_EQ(find(r, "reduce_num_workers"), nullptr) << ids(r);
  expect_advice_holds(*this, c, r, 16);
}

// `stallscope run --loader tuned` uses one worker per usable core less one (loader_tuning.h).
TEST(LoaderTuningTest, TunedLoaderLeavesACoreToTraining) {
  EXPECT_EQ(worker_cap(1), 1);
  EXPECT_EQ(worker_cap(2), 1);
  EXPECT_EQ(worker_cap(6), 5);
  EXPECT_EQ(worker_cap(64), 63);
  cpus::Budget six;
  six.affinity = 6;
  six.usable = 6;
  const TunedLoader t = tuned_loader(six);
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

// One core: loading and training share it, so no worker count makes the loop faster; what helps
// is a cheaper fetch, and the model says what half the fetch time is worth.
TEST_F(RecommendTest, OneBusyCoreGetsNoWorkerAdviceButACheaperFetch) {
  SimConfig c;  // 30 ms fetch, 70 ms step, all on the CPU
  c.fetch_cpu = 1.0;
  c.compute_cpu = 1.0;
  c.usable_cores = 1;
  const Report r = run(c);
  ASSERT_TRUE(r.whatif.available) << r.whatif.why_not;
  EXPECT_EQ(find(r, "increase_num_workers"), nullptr) << ids(r);
  EXPECT_EQ(r.whatif.bound, "cpu");
  const Recommendation* rec = find(r, "slow_dataset_getitem");
  ASSERT_NE(rec, nullptr) << ids(r);
  EXPECT_NE(rec->message.find("No DataLoader setting makes this loop faster"), std::string::npos) << rec->message;
  EXPECT_NE(rec->message.find("the 1 core is busy"), std::string::npos) << rec->message;
  // Half the fetch: 85 ms per step instead of 100.
  EXPECT_NEAR(rec->expected_speedup, 100.0 / 85.0, 0.03);
}

// The recording does not fit the model (here: a fetch of 400 ms of CPU delivered every 50 ms on 2
// cores, which those cores cannot do): low confidence, and no setting is advised.
TEST_F(RecommendTest, AModelThatDoesNotFitTheRunAdvisesNothing) {
  SimConfig c;
  c.num_workers = 8;
  c.fetch_ns = [](int, int) { return 400 * kMs; };
  c.compute_ns = 20 * kMs;
  c.fetch_cpu = 1.0;
  c.compute_cpu = 1.0;
  c.usable_cores = 2;
  const Report r = run(c);
  ASSERT_TRUE(r.whatif.available);
  EXPECT_GT(std::abs(r.whatif.fit_error), 0.5);
  EXPECT_EQ(r.whatif.confidence, "low");
  EXPECT_EQ(find(r, "increase_num_workers"), nullptr) << ids(r);
  EXPECT_EQ(find(r, "reduce_num_workers"), nullptr) << ids(r);
}

// Workers re-created at every epoch with a 1.5 s start-up, 100 batches of 50 ms steps per epoch.
TEST_F(RecommendTest, RespawnEachEpochGetsPersistentWorkers) {
  SimConfig c;
  c.num_workers = 2;
  c.epochs = 4;
  c.batches_per_epoch = 100;
  c.compute_ns = 50 * kMs;
  c.fetch_ns = [](int, int) { return 10 * kMs; };
  c.worker_boot_ns = 1500 * kMs;
  c.start_method = "spawn";
  c.fetch_cpu = 1.0;
  c.compute_cpu = 1.0;
  c.usable_cores = 16;
  const Report r = run(c);
  const Recommendation* rec = find(r, "enable_persistent_workers");
  ASSERT_NE(rec, nullptr) << ids(r);
  EXPECT_EQ(rec->severity, "medium");
  EXPECT_NEAR(r.whatif.inputs.startup_s, 1.5, 0.02);
  EXPECT_NE(rec->message.find("1.50 s each time to start"), std::string::npos) << rec->message;
  // Alone it saves 3 of the 4 start-ups: 4 x (1.5 + 100 x 50 ms) -> 1.5 + 4 x 5 s.
  EXPECT_NEAR(*json::get_double(rec->evidence, "predicted_gain_alone"), 26.0 / 21.5, 0.02);
  // One worker keeps up with a 50 ms step as well as two.
  ASSERT_NE(find(r, "reduce_num_workers"), nullptr) << ids(r);
  EXPECT_NE(find(r, "reduce_num_workers")->message.find("1 worker keeps up as well as 2"), std::string::npos);
  EXPECT_EQ(find(r, "increase_num_workers"), nullptr) << ids(r);
  EXPECT_EQ(find(r, "increase_prefetch_factor"), nullptr) << ids(r);
  expect_advice_holds(*this, c, r, 16);

  // With 30 batches per epoch, loading inside the loop beats starting workers at all.
  c.batches_per_epoch = 30;
  const Report few = run(c);
  ASSERT_NE(find(few, "reduce_num_workers"), nullptr) << ids(few);
  EXPECT_NE(find(few, "reduce_num_workers")->action.find("set num_workers=0"), std::string::npos);
  EXPECT_NE(find(few, "reduce_num_workers")->message.find("Starting the workers costs 1.50 s per epoch"),
            std::string::npos);
  expect_advice_holds(*this, c, few, 16);
  c.batches_per_epoch = 100;

  // The same run with persistent workers: nothing to say about it.
  c.persistent_workers = true;
  c.usable_cores = 16;
  const Report p = run(c);
  EXPECT_EQ(find(p, "enable_persistent_workers"), nullptr) << ids(p);
}

// Workers have capacity to spare, but one batch in ten takes 400 ms: a deeper queue (or more
// workers) hides it, and following the advice removes most of the stall.
TEST_F(RecommendTest, BurstyFetchGetsADeeperQueue) {
  SimConfig c;
  c.num_workers = 2;
  c.batches_per_epoch = 200;
  c.compute_ns = 40 * kMs;
  c.fetch_ns = [](int, int b) { return (b % 10 == 0 ? 400 : 10) * kMs; };
  c.fetch_cpu = 0.5;
  c.compute_cpu = 1.0;
  c.usable_cores = 16;
  const Report r = run(c);
  ASSERT_TRUE(r.whatif.best.has_value());
  const LoaderSetting& to = r.whatif.candidates[*r.whatif.best].setting;
  EXPECT_TRUE(to.prefetch_factor > 2 || to.num_workers > 2) << to.arguments();
  EXPECT_TRUE(find(r, "increase_prefetch_factor") || find(r, "increase_num_workers")) << ids(r);
  EXPECT_EQ(find(r, "slow_dataset_getitem"), nullptr) << ids(r);
  expect_advice_holds(*this, c, r, 16);
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

// The training process's CPU, its part in the kernel and its minor page faults, sampled every
// 100 ms over the first 15 s (the simulated run's window lies inside).
std::function<void(RecordingBuilder&)> process_counters(const SimConfig& c, double cpu, double sys, double faults) {
  return [=](RecordingBuilder& b) {
    for (int64_t t = 0; t <= 15000 * kMs; t += 100 * kMs) {
      b.counter(c.main_pid, "proc.cpu", "cores", t, cpu);
      b.counter(c.main_pid, "proc.sys_cpu", "cores", t, sys);
      b.counter(c.main_pid, "proc.minor_faults", "1/s", t, faults);
    }
  };
}

TEST_F(RecommendTest, AStepThatFaultsInFreshPagesIsToldToKeepThem) {
  SimConfig c;  // no workers: 100 steps of 30 ms fetch and 70 ms compute, 10 s
  const Report r = run(c, {}, process_counters(c, 1.0, 0.4, 100000));
  ASSERT_TRUE(r.train_faults_per_step && r.train_sys_cpu) << ids(r);
  EXPECT_NEAR(*r.train_faults_per_step, 100000 * r.wall_s / static_cast<double>(r.steps), 1);
  EXPECT_NEAR(*r.train_faults_per_step, 10000, 500);
  EXPECT_NEAR(*r.train_sys_cpu, 0.4, 1e-9);
  const Recommendation* rec = find(r, "allocator_page_faults");
  ASSERT_NE(rec, nullptr) << ids(r);
  EXPECT_TRUE(rec->speed);
  EXPECT_NEAR(rec->expected_speedup, 1 / (1 - 0.4), 1e-9);
  EXPECT_EQ(rec->severity, "high");
  EXPECT_NEAR(json::get_double(rec->evidence, "kernel_cpu_share").value_or(0), 0.4, 1e-9);
  EXPECT_NE(rec->action.find("tcmalloc"), std::string::npos) << rec->action;
  EXPECT_EQ(rec->where.counter, vocab::Counter::kCpu);  // the dashboard's CPU strip
  EXPECT_EQ(rec->where.pid, c.main_pid);
  EXPECT_NE(render_text(r).find("page faults 10,"), std::string::npos) << render_text(r);

  // A kernel share under 10 %, or under 1,024 faults a step: nothing.
  EXPECT_EQ(find(run(c, {}, process_counters(c, 1.0, 0.08, 100000)), "allocator_page_faults"), nullptr);
  EXPECT_EQ(find(run(c, {}, process_counters(c, 1.0, 0.4, 9000)), "allocator_page_faults"), nullptr);
  // Workers, and no batch size in bytes: the faults may be the batches' shared memory; nothing.
  c.num_workers = 2;
  EXPECT_EQ(find(run(c, {}, process_counters(c, 1.0, 0.4, 100000)), "allocator_page_faults"), nullptr);
}

TEST_F(RecommendTest, RecommendationsAreOrderedAndWellFormed) {
  SimConfig c;  // re-created workers, more of them than needed, growing memory
  c.num_workers = 2;
  c.epochs = 4;
  c.batches_per_epoch = 100;
  c.compute_ns = 50 * kMs;
  c.fetch_ns = [](int, int) { return 10 * kMs; };
  c.worker_boot_ns = 1500 * kMs;
  c.fetch_cpu = 1.0;
  c.compute_cpu = 1.0;
  c.worker_private_start = 0;
  c.worker_private_growth = 200 << 20;
  c.usable_cores = 16;
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
