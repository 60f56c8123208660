// The pipeline through the Loader: batches in order with many threads and a slow, uneven source;
// their content; per-sample randomness independent of the thread count; errors that name the
// file and the sample index and leave no thread behind; early stops from every state; the pool's
// slots coming back and no allocation after warm-up.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "loader/loader.h"
#include "tests/loader/test_sources.h"

namespace stallscope::loader {
namespace {

using testing::TestSource;
using testing::thread_count;
using testing::threads_back_to;

std::unique_ptr<Loader> make(std::shared_ptr<const Source> src, int64_t batch, int threads, int prefetch,
                             bool shuffle = true, uint64_t seed = 0) {
  LoaderOptions o;
  o.batch_size = batch;
  o.threads = threads;
  o.prefetch = prefetch;
  o.shuffle = shuffle;
  o.seed = seed;
  Result<std::unique_ptr<Loader>> l = Loader::create(std::move(src), o);
  EXPECT_TRUE(l.ok()) << l.status().message();
  return std::move(l.value());
}

int64_t at(const Batch& b, size_t field, int64_t row) {
  int64_t v = 0;
  std::memcpy(&v, b.slot->field(field) + row * 8, 8);
  return v;
}

struct Epoch {
  std::vector<int64_t> batch_index, samples;  // B of each batch received, and the samples in order
  std::vector<uint64_t> noise;                // the first Rng draw of each sample
  Status error;
};

Epoch run_epoch(Loader& l, int64_t max_batches = INT64_MAX) {
  Epoch e;
  Result<Loader::EpochStart> start = l.begin_epoch();
  EXPECT_TRUE(start.ok());
  for (int64_t got = 0; got < max_batches; ++got) {
    Pipeline::Next n = l.next(start->token);
    if (n.got == Pipeline::Got::kError) {
      e.error = n.error;
      break;
    }
    if (n.got != Pipeline::Got::kBatch) break;
    e.batch_index.push_back(n.batch.index);
    for (int64_t r = 0; r < n.batch.samples; ++r) {
      e.samples.push_back(at(n.batch, 0, r));
      e.noise.push_back(static_cast<uint64_t>(at(n.batch, 1, r)));
      float row0 = 0;
      std::memcpy(&row0, n.batch.slot->field(2) + r * 12, 4);
      EXPECT_EQ(row0, static_cast<float>(at(n.batch, 0, r)) + 0.5f);
    }
    l.handed(start->token, n.batch.index + 1);
  }
  return e;
}

TEST(PipelineTest, HandsBatchesInOrderWithManyThreadsAndAnUnevenSource) {
  auto src = std::make_shared<TestSource>(300);
  src->delay_us = 400;  // reads of 80..400 us: later batches often finish first
  const int before = thread_count();
  auto l = make(src, 7, 8, 8, true, 3);
  Sampler ref = Sampler::create(SamplerOptions{300, 7, true, 3, false, 0, 1}).value();
  const Epoch e = run_epoch(*l);
  ASSERT_TRUE(e.error.ok()) << e.error.message();
  std::vector<int64_t> want_b(43);
  for (int64_t b = 0; b < 43; ++b) want_b[b] = b;
  EXPECT_EQ(e.batch_index, want_b);
  EXPECT_EQ(e.samples, ref.epoch_indices(0));
  EXPECT_GT(src->max_running.load(), 1) << "the threads read in parallel";
  EXPECT_TRUE(threads_back_to(before)) << "an epoch's threads end with it";
}

TEST(PipelineTest, PerSampleRandomnessDoesNotDependOnTheThreads) {
  auto src = std::make_shared<TestSource>(120);
  src->delay_us = 50;
  auto one = make(src, 8, 1, 1, true, 9);
  auto many = make(src, 8, 6, 12, true, 9);
  const Epoch a = run_epoch(*one), b = run_epoch(*many);
  EXPECT_EQ(a.samples, b.samples);
  EXPECT_EQ(a.noise, b.noise);
  for (size_t i = 0; i < a.samples.size(); ++i) {
    Rng rng(sample_seed(9, 0, a.samples[i]));
    EXPECT_EQ(a.noise[i], rng.next());
  }
  const Epoch next = run_epoch(*one);  // epoch 1: other draws for the same samples
  EXPECT_NE(next.noise, a.noise);
}

// Waits up to 5 s for `reads` to reach `n`, then a little longer to see it go no further.
int64_t reads_settle(const TestSource& src, int64_t n) {
  for (int i = 0; i < 500 && src.reads.load() < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return src.reads.load();
}

TEST(PipelineTest, PrefetchBoundsTheBatchesAhead) {
  auto src = std::make_shared<TestSource>(400);
  auto l = make(src, 4, 4, 3);
  Result<Loader::EpochStart> start = l->begin_epoch();
  ASSERT_TRUE(start.ok());
  EXPECT_EQ(reads_settle(*src, 3 * 4), 3 * 4) << "3 batches in flight, no more";  // the training loop is slow
  Pipeline::Next n = l->next(start->token);
  ASSERT_EQ(n.got, Pipeline::Got::kBatch);
  EXPECT_EQ(reads_settle(*src, 4 * 4), 4 * 4);
}

TEST(PipelineTest, AnErrorNamesTheFileAndIndexAndStopsEveryThread) {
  for (bool throws : {false, true}) {
    auto src = std::make_shared<TestSource>(200);
    src->delay_us = 100;
    src->fail_at = 57;
    src->throw_at_fail = throws;
    const int before = thread_count();
    auto l = make(src, 10, 6, 12, false);
    const Epoch e = run_epoch(*l);
    ASSERT_FALSE(e.error.ok());
    EXPECT_NE(e.error.message().find("test.bin record 57"), std::string::npos) << e.error.message();
    EXPECT_NE(e.error.message().find("sample 57"), std::string::npos) << e.error.message();
    EXPECT_NE(e.error.message().find("batch 5"), std::string::npos) << e.error.message();
    // Batches before the failing one were all handed, in order; nothing after it.
    EXPECT_EQ(e.batch_index, (std::vector<int64_t>{0, 1, 2, 3, 4}));
    EXPECT_TRUE(threads_back_to(before)) << "threads left after an error: " << thread_count() - before;
    EXPECT_LT(src->reads.load(), 200) << "no batch after the failing one was read to the end";
    EXPECT_EQ(l->pool().free_slots(), l->pool().slots()) << "every slot back in the pool";
  }
}

TEST(PipelineTest, TheEarliestFailingBatchIsTheOneReported) {
  // Two failures in flight at once: the training loop sees the first in order.
  class TwoFailures : public TestSource {
   public:
    TwoFailures() : TestSource(100) {}
    Status read(int64_t i, std::span<std::byte* const> dst, Rng& rng, StageTimes* t) const override {
      if (i == 30) std::this_thread::sleep_for(std::chrono::milliseconds(50));  // fails last
      if (i == 30 || i == 45) return Status::Error("two.bin record " + std::to_string(i) + ": bad");
      return TestSource::read(i, dst, rng, t);
    }
  };
  auto l = make(std::make_shared<TwoFailures>(), 5, 4, 8, false);
  const Epoch e = run_epoch(*l);
  EXPECT_NE(e.error.message().find("record 30"), std::string::npos) << e.error.message();
  EXPECT_EQ(e.batch_index.size(), 6u);
}

TEST(PipelineTest, StoppingEarlyJoinsTheThreadsAndReturnsTheSlots) {
  auto src = std::make_shared<TestSource>(10000);
  src->delay_us = 200;
  const int before = thread_count();
  {
    auto l = make(src, 16, 4, 8);
    const Epoch e = run_epoch(*l, 2);  // the loop breaks after two batches
    EXPECT_EQ(e.batch_index.size(), 2u);
    EXPECT_GT(thread_count(), before);
    l->stop();
    EXPECT_TRUE(threads_back_to(before));
    EXPECT_EQ(l->pool().free_slots(), l->pool().slots());
    // A next() on the stopped epoch ends it, and a new epoch starts fresh threads.
    Result<Loader::EpochStart> s = l->begin_epoch();
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->epoch, 1);
    EXPECT_EQ(l->next(s->token).got, Pipeline::Got::kBatch);
  }  // destroyed mid-epoch
  EXPECT_TRUE(threads_back_to(before));
  EXPECT_LT(src->reads.load(), 10000);
}

TEST(PipelineTest, StopWakesAConsumerBlockedInNext) {
  auto src = std::make_shared<TestSource>(100);
  src->delay_us = 500000;  // half a second per sample
  auto l = make(src, 4, 1, 1);
  Result<Loader::EpochStart> s = l->begin_epoch();
  ASSERT_TRUE(s.ok());
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    l->stop();
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(l->next(s->token).got, Pipeline::Got::kEnd);
  stopper.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1500)) << "abandoned between samples";
}

TEST(PipelineTest, TimeoutLetsTheCallerCheckForSignals) {
  auto src = std::make_shared<TestSource>(10);
  src->delay_us = 300000;
  auto l = make(src, 10, 1, 1);
  Result<Loader::EpochStart> s = l->begin_epoch();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(l->next(s->token, std::chrono::milliseconds(10)).got, Pipeline::Got::kTimeout);
}

TEST(PipelineTest, ANewEpochEndsTheIteratorOfTheOldOne) {
  auto l = make(std::make_shared<TestSource>(100), 10, 2, 4);
  Result<Loader::EpochStart> a = l->begin_epoch();
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(l->next(a->token).got, Pipeline::Got::kBatch);
  Result<Loader::EpochStart> b = l->begin_epoch();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(l->next(a->token).got, Pipeline::Got::kEnd);
  EXPECT_EQ(l->next(b->token).got, Pipeline::Got::kBatch);
}

TEST(PipelineTest, NoAllocationAfterWarmUp) {
  auto l = make(std::make_shared<TestSource>(500), 10, 3, 6);
  const int64_t first = l->pool().allocations();
  EXPECT_EQ(first, (6 + 2) * 3) << "prefetch + 2 slots of 3 fields";
  for (int epoch = 0; epoch < 4; ++epoch) run_epoch(*l);  // each batch released before the next
  EXPECT_EQ(l->pool().allocations(), first);
  EXPECT_EQ(l->pool().grown(), 0);
}

TEST(PipelineTest, AConsumerThatKeepsEveryBatchMakesThePoolGrowNotStall) {
  auto l = make(std::make_shared<TestSource>(400), 10, 3, 4);
  Result<Loader::EpochStart> s = l->begin_epoch();
  ASSERT_TRUE(s.ok());
  std::vector<Batch> kept;
  for (;;) {
    Pipeline::Next n = l->next(s->token);
    if (n.got != Pipeline::Got::kBatch) break;
    kept.push_back(std::move(n.batch));
  }
  ASSERT_EQ(kept.size(), 40u);
  for (size_t i = 0; i < kept.size(); ++i) EXPECT_EQ(kept[i].index, static_cast<int64_t>(i));
  EXPECT_GE(l->pool().grown(), 40 - 6);
  kept.clear();
  EXPECT_EQ(l->pool().free_slots(), l->pool().slots());
}

TEST(PipelineTest, SlotsOutliveTheLoader) {
  Batch kept;
  {
    auto l = make(std::make_shared<TestSource>(20), 5, 2, 2, false);
    Result<Loader::EpochStart> s = l->begin_epoch();
    ASSERT_TRUE(s.ok());
    Pipeline::Next n = l->next(s->token);
    ASSERT_EQ(n.got, Pipeline::Got::kBatch);
    kept = std::move(n.batch);
  }
  EXPECT_EQ(at(kept, 0, 4), 4) << "the batch's memory is still there";  // ASan checks the rest
}

TEST(PipelineTest, ResumedLoaderContinuesWithTheSameSamples) {
  auto src = std::make_shared<TestSource>(230);
  auto whole = make(src, 9, 3, 6, true, 4);
  run_epoch(*whole);
  const Epoch full = run_epoch(*whole);  // epoch 1

  auto first = make(src, 9, 2, 3, true, 4);
  run_epoch(*first);
  const Epoch head = run_epoch(*first, 10);
  first->stop();
  auto second = make(src, 9, 5, 10, true, 4);  // other threads and prefetch: the same samples
  ASSERT_TRUE(second->load_state(first->state()).ok());
  const Epoch tail = run_epoch(*second);
  EXPECT_EQ(tail.batch_index.front(), 10);
  std::vector<int64_t> joined = head.samples;
  joined.insert(joined.end(), tail.samples.begin(), tail.samples.end());
  EXPECT_EQ(joined, full.samples);
  std::vector<uint64_t> noise = head.noise;
  noise.insert(noise.end(), tail.noise.begin(), tail.noise.end());
  EXPECT_EQ(noise, full.noise) << "the same augmentation draws after a resume";
}

TEST(PipelineTest, RefusesImpossibleSettings) {
  LoaderOptions o;
  o.batch_size = 0;
  EXPECT_FALSE(Loader::create(std::make_shared<TestSource>(10), o).ok());
  o.batch_size = 1;
  o.threads = -1;
  EXPECT_FALSE(Loader::create(std::make_shared<TestSource>(10), o).ok());
  EXPECT_GE(default_threads(), 1);
  EXPECT_GE(default_prefetch(1), 2);
}

}  // namespace
}  // namespace stallscope::loader
