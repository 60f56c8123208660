// Tests of `stallscope tune`'s analysis: the --loader-args text, which settings the model proposes
// to measure, the exhaustive grid, and the steady figures of a short run, on synthetic recordings
// whose every step is known by construction.
#include "analysis/tune.h"

#include <gtest/gtest.h>

#include "analysis/dataloader.h"
#include "analysis/report.h"
#include "analysis/session.h"
#include "tests/analysis/fixture.h"
#include "tests/unit/test_util.h"

namespace stallscope::analysis {
namespace {

using stallscope::testing::kMs;
using stallscope::testing::RecordingBuilder;
using stallscope::testing::SimConfig;

TEST(LoaderArgsTest, ParsesWhatReportAndTunePrint) {
  LoaderSetting s;
  s.num_workers = 3;
  s.prefetch_factor = 4;
  s.persistent_workers = true;
  std::string why;
  auto a = parse_loader_args(s.arguments(), &why);
  ASSERT_TRUE(a.has_value()) << why;
  EXPECT_EQ(a->num_workers, 3);
  EXPECT_EQ(a->prefetch_factor, 4);
  EXPECT_EQ(a->persistent_workers, true);
  const Json j = loader_args_json(*a, 2);
  EXPECT_EQ(j["num_workers"], 3);
  EXPECT_EQ(j["prefetch_factor"], 4);
  EXPECT_EQ(j["persistent_workers"], true);
  EXPECT_EQ(j["exact"], true);

  a = parse_loader_args(" num_workers = 0 ", &why);
  ASSERT_TRUE(a.has_value()) << why;
  EXPECT_EQ(a->num_workers, 0);
  EXPECT_FALSE(a->prefetch_factor.has_value());  // not given: stays as the script has it
  EXPECT_FALSE(loader_args_json(*a, 2).contains("prefetch_factor"));
}

// torch_threads rides along: not a DataLoader argument, so arguments() (what to paste into the
// call) leaves it out and loader_args_text() (what `run --loader-args` takes) has it.
TEST(LoaderArgsTest, TorchThreadsGoToTheHooksNotIntoTheCall) {
  LoaderSetting s;
  s.num_workers = 2;
  s.torch_threads = 1;
  EXPECT_EQ(s.arguments(), "num_workers=2, prefetch_factor=2, persistent_workers=False");
  EXPECT_EQ(loader_args_text(s), "num_workers=2, prefetch_factor=2, persistent_workers=False, torch_threads=1");
  std::string why;
  auto a = parse_loader_args(loader_args_text(s), &why);
  ASSERT_TRUE(a.has_value()) << why;
  EXPECT_EQ(a->torch_threads, 1);
  EXPECT_EQ(loader_args_json(*a, 2)["torch_threads"], 1);
  EXPECT_EQ(loader_args_of(s).torch_threads, 1);
  s.torch_threads = 0;  // as recorded: nothing to set
  EXPECT_EQ(loader_args_text(s), s.arguments());
  EXPECT_FALSE(loader_args_of(s).torch_threads.has_value());
  EXPECT_FALSE(loader_args_json(loader_args_of(s), 2).contains("torch_threads"));
  EXPECT_FALSE(parse_loader_args("num_workers=2, torch_threads=0", &why));
  EXPECT_NE(why.find("torch_threads='0': needs a whole number from 1"), std::string::npos) << why;
  EXPECT_FALSE(parse_loader_args("num_workers=2, torch_threads=two", &why));
}

TEST(LoaderArgsTest, RefusesWhatIsNotASetting) {
  std::string why;
  EXPECT_FALSE(parse_loader_args("prefetch_factor=4", &why));
  EXPECT_NE(why.find("needs num_workers=N"), std::string::npos) << why;
  EXPECT_FALSE(parse_loader_args("num_workers=-1", &why));
  EXPECT_NE(why.find("whole number"), std::string::npos) << why;
  EXPECT_FALSE(parse_loader_args("num_workers=2, prefetch_factor=0", &why));
  EXPECT_FALSE(parse_loader_args("num_workers=2, persistent_workers=maybe", &why));
  EXPECT_NE(why.find("True or False"), std::string::npos) << why;
  EXPECT_FALSE(parse_loader_args("num_workers=2, batch_size=8", &why));
  EXPECT_NE(why.find("'batch_size' is not one of"), std::string::npos) << why;
  EXPECT_FALSE(parse_loader_args("num_workers=99999999999", &why));
}

TEST(TuneTest, SweepCoversTheGridOnce) {
  const std::vector<LoaderSetting> g = sweep_settings(4);
  EXPECT_EQ(g.size(), 1u + 4 * 2 * 2);
  for (size_t i = 0; i < g.size(); ++i) {
    for (size_t j = i + 1; j < g.size(); ++j) EXPECT_FALSE(g[i] == g[j]) << g[i].arguments();
  }
  EXPECT_EQ(g.front().num_workers, 0);
}

// Batch end times (ns) of a run handing a batch every `gaps[i % gaps.size()]` ms.
std::vector<int64_t> ends_every(size_t n, std::vector<double> gaps_ms) {
  std::vector<int64_t> v;
  int64_t t = 1'000'000'000;
  for (size_t i = 0; i < n; ++i) {
    t += static_cast<int64_t>(gaps_ms[i % gaps_ms.size()] * 1e6);
    v.push_back(t);
  }
  return v;
}

TEST(LiveRateTest, SteadyRunsAreSureBurstyOnesLessSo) {
  // 10 ms a step: 100 steps/s after the warm-up, and as sure as it gets.
  const LiveRate steady = live_rate(ends_every(50, {10}), 10);
  EXPECT_EQ(steady.steps, 40);
  EXPECT_NEAR(steady.steps_per_s, 100, 1e-6);
  EXPECT_LT(steady.rel_se, 1e-6);
  // Bursts of four batches (prefetching) at the same mean: blocks of five steps even them out,
  // but not wholly (a block holds one or two of the long gaps).
  const LiveRate bursty = live_rate(ends_every(50, {1, 1, 1, 37}), 10);
  EXPECT_NEAR(bursty.steps_per_s, 100, 2);
  EXPECT_GT(bursty.rel_se, steady.rel_se);
  EXPECT_LT(bursty.rel_se, 0.1);
  // A run that slows down halfway is unsure.
  std::vector<int64_t> slowing = ends_every(30, {10});
  for (int64_t t = slowing.back(), i = 0; i < 20; ++i) slowing.push_back(t += 30'000'000);
  const LiveRate s = live_rate(slowing, 10);
  EXPECT_GT(s.rel_se, 0.15);
  // Too few steps: no rate, no confidence.
  EXPECT_EQ(live_rate(ends_every(11, {10}), 10).steps_per_s, 0);
  EXPECT_EQ(live_rate(ends_every(14, {10}), 10).rel_se, 1);
}

TEST(LiveRateTest, CannotWinOnlyWhenSurelyBelowTheMargin) {
  const LiveRate steady = live_rate(ends_every(50, {10}), 10);  // 100 steps/s, sure
  EXPECT_TRUE(cannot_win(steady, 120, 0.05));                   // 100 < 114
  EXPECT_FALSE(cannot_win(steady, 104, 0.05));                  // within 5 %
  std::vector<int64_t> slowing = ends_every(30, {10});
  for (int64_t t = slowing.back(), i = 0; i < 20; ++i) slowing.push_back(t += 30'000'000);
  const LiveRate unsure = live_rate(slowing, 10);
  ASSERT_GT(unsure.steps_per_s, 0);
  EXPECT_FALSE(cannot_win(unsure, unsure.steps_per_s * 1.2, 0.05));  // 20 % behind, but unsure
  EXPECT_FALSE(cannot_win(LiveRate{}, 100, 0.05));                   // nothing measured
}

TEST(TuneTest, NeighboursStayInsideTheGrid) {
  LoaderSetting s;
  s.num_workers = 1;
  s.prefetch_factor = 4;
  s.persistent_workers = true;
  const auto n = worker_neighbours(s, 1);
  ASSERT_EQ(n.size(), 1u);  // 2 is past the grid
  EXPECT_EQ(n[0].num_workers, 0);
  EXPECT_FALSE(n[0].persistent_workers);  // none without workers
  EXPECT_EQ(n[0].prefetch_factor, 2);
}

class TuneRecordingTest : public ::testing::Test {
 protected:
  stallscope::testing::TempDir dir_;
  struct Analysed {
    DataLoaderModel m;
    Report r;
  };
  Analysed run(const SimConfig& c) {
    const std::string p = dir_.file(stallscope::testing::unique_name("tune") + ".db");
    {
      RecordingBuilder b(p);
      simulate(b, c);
    }
    auto s = load_session(p);
    EXPECT_TRUE(s.ok()) << s.status().message();
    Analysed a;
    if (s.ok()) {
      a.m = build_dataloader_model(*s);
      a.r = analyze(*s, a.m);
    }
    return a;
  }
};

// num_workers=0: each step is a 30 ms fetch and 70 ms of compute, batches of 32. After the warm-up
// every step takes 100 ms, 30 of them in next().
TEST_F(TuneRecordingTest, SteadyFiguresSkipTheWarmupAndStopAtTheSteps) {
  SimConfig c;
  c.epochs = 1;
  c.batches_per_epoch = 60;
  c.iter_ns = 500 * kMs;  // a slow start, which the warm-up leaves out
  c.fetch_cpu = 0.0;
  c.compute_cpu = 1.0;
  c.usable_cores = 2;
  const Analysed a = run(c);
  const SteadyFigures f = steady_figures(a.m, a.r, 10, 40);
  EXPECT_EQ(f.warmup, 10);
  EXPECT_EQ(f.steps, 40);
  EXPECT_NEAR(f.window_s, 40 * 0.1, 1e-6);
  EXPECT_NEAR(f.samples_per_step, 32, 1e-9);
  EXPECT_NEAR(f.samples_per_s, 320, 1e-3);
  EXPECT_NEAR(f.stall, 0.3, 1e-3);
  // A run shorter than warm-up + steps is measured as far as it went.
  const SteadyFigures g = steady_figures(a.m, a.r, 10, 500);
  EXPECT_EQ(g.steps, 50);
  // And a warm-up longer than the run keeps one step to measure.
  const SteadyFigures h = steady_figures(a.m, a.r, 100, 40);
  EXPECT_EQ(h.warmup, 59);
  EXPECT_EQ(h.steps, 1);
}

// Tune's last trial: the fastest measured setting on one intra-op thread, only when the recording
// ran torch on more than one of the usable cores.
TEST_F(TuneRecordingTest, OneThreadTrialOnlyWhenTheRecordingRanMore) {
  SimConfig c;
  c.epochs = 2;
  c.fetch_cpu = 1.0;
  c.compute_cpu = 1.0;
  c.usable_cores = 2;
  c.torch_threads = 2;
  const Analysed two = run(c);
  ASSERT_TRUE(two.r.whatif.available) << two.r.whatif.why_not;
  LoaderSetting best;
  best.num_workers = 1;
  best.persistent_workers = true;
  const auto t = one_thread_trial(two.r.whatif, best);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->torch_threads, 1);
  EXPECT_EQ(t->num_workers, 1);
  EXPECT_TRUE(t->persistent_workers);
  EXPECT_FALSE(one_thread_trial(two.r.whatif, *t).has_value());  // sets threads already
  c.torch_threads = 1;
  const Analysed one = run(c);
  ASSERT_TRUE(one.r.whatif.available) << one.r.whatif.why_not;
  EXPECT_FALSE(one_thread_trial(one.r.whatif, best).has_value());
  c.torch_threads = 4;  // on one usable core, one thread runs at a time already
  c.usable_cores = 1;
  const Analysed narrow = run(c);
  ASSERT_TRUE(narrow.r.whatif.available) << narrow.r.whatif.why_not;
  EXPECT_FALSE(one_thread_trial(narrow.r.whatif, best).has_value());
  EXPECT_FALSE(one_thread_trial(WhatIf{}, best).has_value());  // no model
}

// The model proposes the advised setting first and its neighbours, never the recorded setting,
// each with the model's own prediction.
TEST_F(TuneRecordingTest, CandidatesAreTheAdvisedSettingAndItsNeighbours) {
  SimConfig c;
  c.epochs = 2;
  c.fetch_ns = [](int, int) { return 150 * kMs; };  // waiting: 3 workers hide it behind 70 ms steps
  c.fetch_cpu = 0.0;
  c.compute_cpu = 1.0;
  c.usable_cores = 4;
  const Analysed a = run(c);
  const WhatIf& w = a.r.whatif;
  ASSERT_TRUE(w.available) << w.why_not;
  ASSERT_TRUE(w.best.has_value());
  const LoaderSetting advised = w.candidates[*w.best].setting;
  EXPECT_GE(advised.num_workers, 3);
  const std::vector<WhatIfCandidate> t = tune_candidates(w, 4);
  ASSERT_EQ(t.size(), 4u);
  bool has_advised = false, has_below = false;
  for (const WhatIfCandidate& x : t) {
    EXPECT_FALSE(x.setting == w.recorded);
    has_advised |= x.setting == advised;
    has_below |= x.setting.num_workers == advised.num_workers - 1;
    const auto p = predicted(w, x.setting);
    ASSERT_TRUE(p.has_value());
    EXPECT_DOUBLE_EQ(p->samples_per_s, x.samples_per_s);
  }
  EXPECT_TRUE(has_advised);
  EXPECT_TRUE(has_below);
  for (size_t i = 1; i < t.size(); ++i) EXPECT_GE(t[i - 1].samples_per_s, t[i].samples_per_s);
  // A setting outside the model's list is predicted the same way as its own.
  LoaderSetting odd;
  odd.num_workers = 3;
  odd.prefetch_factor = 16;
  const auto p = predicted(w, odd);
  ASSERT_TRUE(p.has_value());
  EXPECT_GT(p->samples_per_s, w.candidates.front().samples_per_s);
  EXPECT_TRUE(tune_candidates(w, 0).empty());
}

}  // namespace
}  // namespace stallscope::analysis
