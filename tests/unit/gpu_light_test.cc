// Light GPU mode's marks (collector/gpu_light.h) against a simulated GPU: a driver whose events
// are reached when a test-controlled clock passes the time the simulated queue says.
#include "collector/gpu_light.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace stallscope {
namespace {

// The simulated GPU. Work on the default stream (nullptr) is queued until `busy_until`; an event
// recorded there is reached at max(now, busy_until) + latency; on any other stream (the reader's,
// which has nothing queued) at now + latency.
struct FakeGpu {
  std::mutex mu;  // the test's threads share the simulated GPU
  std::atomic<uint64_t> now{1'000'000'000};
  uint64_t busy_until = 0;
  uint64_t latency = 4'000;
  void* ctx = nullptr;
  int record_fails_after = -1;  // >= 0: event_record fails once that many have succeeded
  int records = 0;
  std::vector<uint64_t> late_waits;  // the next waits return this much after the event, one each
  int waits = 0;
  std::map<void*, uint64_t> reached;  // recorded events
  std::vector<std::unique_ptr<int>> storage;
};
FakeGpu* g_fake = nullptr;

CudaDriver fake_driver() {
  CudaDriver d;
  d.ctx_get_current = [](void** c) {
    *c = g_fake->ctx;
    return kCudaSuccess;
  };
  d.ctx_set_current = [](void*) { return kCudaSuccess; };
  d.event_create = [](void** e, unsigned) {
    std::lock_guard<std::mutex> lock(g_fake->mu);
    g_fake->storage.push_back(std::make_unique<int>(0));
    *e = g_fake->storage.back().get();
    return kCudaSuccess;
  };
  d.stream_create = [](void** s, unsigned) {
    std::lock_guard<std::mutex> lock(g_fake->mu);
    g_fake->storage.push_back(std::make_unique<int>(1));
    *s = g_fake->storage.back().get();
    return kCudaSuccess;
  };
  d.event_record = [](void* e, void* stream) {
    std::lock_guard<std::mutex> lock(g_fake->mu);
    if (g_fake->record_fails_after >= 0 && g_fake->records >= g_fake->record_fails_after) return 1;
    ++g_fake->records;
    const uint64_t now = g_fake->now.load();
    const uint64_t start = stream == nullptr ? std::max(now, g_fake->busy_until) : now;
    g_fake->reached[e] = start + g_fake->latency;
    return kCudaSuccess;
  };
  d.event_query = [](void* e) {
    std::lock_guard<std::mutex> lock(g_fake->mu);
    auto it = g_fake->reached.find(e);
    if (it == g_fake->reached.end()) return 400;  // CUDA_ERROR_INVALID_HANDLE
    return it->second <= g_fake->now ? kCudaSuccess : kCudaNotReady;
  };
  d.event_synchronize = [](void* e) {
    std::lock_guard<std::mutex> lock(g_fake->mu);
    const uint64_t reached = g_fake->reached.at(e);
    uint64_t now = g_fake->now.load();
    while (now < reached && !g_fake->now.compare_exchange_weak(now, reached)) {
    }
    if (g_fake->waits < static_cast<int>(g_fake->late_waits.size())) g_fake->now += g_fake->late_waits[g_fake->waits];
    ++g_fake->waits;
    return kCudaSuccess;
  };
  d.event_elapsed_ms = [](float* ms, void* a, void* b) {
    std::lock_guard<std::mutex> lock(g_fake->mu);
    *ms = static_cast<float>((static_cast<double>(g_fake->reached.at(b)) - static_cast<double>(g_fake->reached.at(a))) /
                             1e6);
    return kCudaSuccess;
  };
  return d;
}

class GpuLightTest : public ::testing::Test {
 protected:
  void SetUp() override { g_fake = &fake_; }
  void TearDown() override { g_fake = nullptr; }
  GpuMarks make(int pool = 8) {
    return GpuMarks(
        fake_driver(), [] { return g_fake->now.load(); }, pool);
  }
  std::vector<GpuActivity> poll(GpuMarks& m) {
    std::vector<GpuActivity> out;
    m.poll([&](const GpuActivity& a) { out.push_back(a); });
    return out;
  }
  // Queues 5 ms of work, marks, lets it run, and returns how much later than the GPU reached it
  // the mark says it was reached (ns; NaN when the mark was not resolved).
  double late_after_5ms_of_work(GpuMarks& m) {
    const uint64_t t = fake_.now;
    fake_.busy_until = t + 5'000'000;
    if (!m.mark(GpuMarkKind::kNextBegin)) return std::nan("");
    fake_.now = t + 6'000'000;
    const std::vector<GpuActivity> got = poll(m);
    if (got.size() != 1) return std::nan("");
    return static_cast<double>(got[0].end_ns) - static_cast<double>(t + 5'000'000 + fake_.latency);
  }
  FakeGpu fake_;
  int ctx_ = 0;
};

TEST_F(GpuLightTest, NothingWithoutAContext) {
  GpuMarks m = make();
  EXPECT_FALSE(m.mark(GpuMarkKind::kNextBegin));
  EXPECT_FALSE(m.bound());
  EXPECT_FALSE(m.anchor());
  EXPECT_EQ(m.recorded(), 0u);
}

TEST_F(GpuLightTest, MarkIsReachedWhenTheQueuedWorkIsDone) {
  fake_.ctx = &ctx_;
  GpuMarks m = make();
  ASSERT_TRUE(m.mark(GpuMarkKind::kNextBegin));  // binds: the pool is made here
  ASSERT_TRUE(m.anchor());                       // the reader's first anchor, after the mark
  const uint64_t t = fake_.now;
  fake_.busy_until = t + 5'000'000;  // 5 ms of work queued before the next mark
  ASSERT_TRUE(m.mark(GpuMarkKind::kNextBegin));
  EXPECT_EQ(poll(m).size(), 1u);  // the first mark (reached before the anchor); the second not yet
  EXPECT_EQ(m.pending(), 1u);
  fake_.now = t + 6'000'000;
  const std::vector<GpuActivity> got = poll(m);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].kind, GpuActivityKind::kMark);
  EXPECT_STREQ(got[0].name, "next_begin");
  EXPECT_EQ(got[0].start_ns, t);
  // Reached at busy_until + latency; the anchor's error is half its latency.
  const double want = static_cast<double>(t + 5'000'000 + fake_.latency);
  EXPECT_NEAR(static_cast<double>(got[0].end_ns), want, static_cast<double>(fake_.latency) / 2 + 1000);
  EXPECT_EQ(m.pending(), 0u);
  EXPECT_EQ(m.unresolved(), 0u);
}

TEST_F(GpuLightTest, AnAnchorWhoseWaitReturnedLateIsTakenAgain) {
  // The reader descheduled in its first two waits (3 ms, then 1 ms late): the anchor keeps the
  // third, tight try, so the mark's instant is off by half the latency, not by 1.5 ms.
  fake_.ctx = &ctx_;
  GpuMarks m = make();
  ASSERT_TRUE(m.mark(GpuMarkKind::kNextBegin));
  ASSERT_TRUE(poll(m).empty());  // no anchor yet: the reader has not bound
  fake_.late_waits = {3'000'000, 1'000'000};
  ASSERT_TRUE(m.anchor());
  EXPECT_EQ(fake_.waits, 3);  // the third try was tight: no fourth
  ASSERT_EQ(poll(m).size(), 1u);
  EXPECT_NEAR(late_after_5ms_of_work(m), 0.0, static_cast<double>(fake_.latency) / 2 + 1000);
}

TEST_F(GpuLightTest, AnAnchorKeepsItsTightestTry) {
  // Every wait late, the second least: that try's instants are kept (the error is half of 0.2 ms).
  fake_.ctx = &ctx_;
  GpuMarks m = make();
  ASSERT_TRUE(m.mark(GpuMarkKind::kNextBegin));
  ASSERT_TRUE(poll(m).empty());
  fake_.late_waits = {3'000'000, 200'000, 900'000, 2'000'000};
  ASSERT_TRUE(m.anchor());
  EXPECT_EQ(fake_.waits, 4);
  ASSERT_EQ(poll(m).size(), 1u);
  const double late = late_after_5ms_of_work(m);
  EXPECT_NEAR(late, 0.0, (200'000.0 + static_cast<double>(fake_.latency)) / 2 + 1000);
  EXPECT_GT(std::abs(late), 50'000.0);  // not a tighter try's
}

TEST_F(GpuLightTest, AMarkOlderThanEveryAnchorIsMeasuredBackFromTheOldest) {
  fake_.ctx = &ctx_;
  GpuMarks m = make();
  const uint64_t t = fake_.now;
  ASSERT_TRUE(m.mark(GpuMarkKind::kNextEnd));  // idle GPU: reached at t + latency
  fake_.now += 3'000'000;
  ASSERT_TRUE(m.anchor());
  const std::vector<GpuActivity> got = poll(m);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_STREQ(got[0].name, "next_end");
  EXPECT_NEAR(static_cast<double>(got[0].end_ns), static_cast<double>(t + fake_.latency),
              static_cast<double>(fake_.latency) / 2 + 1000);
  EXPECT_GE(got[0].end_ns, got[0].start_ns);
}

TEST_F(GpuLightTest, AFullPoolSkipsMarksUntilThePollFreesEvents) {
  fake_.ctx = &ctx_;
  GpuMarks m = make(2);
  ASSERT_TRUE(m.mark(GpuMarkKind::kNextBegin));
  ASSERT_TRUE(m.anchor());
  fake_.busy_until = fake_.now + 1'000'000'000;  // a long queue: nothing more is reached for a second
  EXPECT_TRUE(m.mark(GpuMarkKind::kNextBegin));  // the pool's second and last event
  EXPECT_FALSE(m.mark(GpuMarkKind::kNextEnd));
  EXPECT_EQ(m.skipped(), 1u);
  fake_.now += 2'000'000'000ull;
  EXPECT_EQ(poll(m).size(), 2u);
  EXPECT_TRUE(m.mark(GpuMarkKind::kNextEnd));
  EXPECT_EQ(m.recorded(), 3u);
}

// The training thread marks while the reader anchors and polls (run under TSan in CI): every
// mark is resolved once, in order, reached no earlier than recorded.
TEST_F(GpuLightTest, MarksAndPollsOnTwoThreads) {
  fake_.ctx = &ctx_;
  GpuMarks m = make(64);
  ASSERT_TRUE(m.mark(GpuMarkKind::kNextBegin));
  std::atomic<bool> done{false};
  std::vector<GpuActivity> got;
  std::thread reader([&] {
    int polls = 0;
    while (!done.load() || m.pending() > 0) {
      if (polls++ % 50 == 0) {
        ASSERT_TRUE(m.anchor());
      }
      m.poll([&](const GpuActivity& a) { got.push_back(a); });
      fake_.now.fetch_add(20'000);  // the reader's time passes too
      std::this_thread::yield();
    }
  });
  constexpr int kMarks = 2000;
  int recorded = 1;
  for (int i = 1; i < kMarks; ++i) {
    fake_.now.fetch_add(10'000);
    if (m.mark(i % 2 ? GpuMarkKind::kNextEnd : GpuMarkKind::kNextBegin)) ++recorded;
  }
  done.store(true);
  reader.join();
  EXPECT_EQ(static_cast<int>(got.size()) + static_cast<int>(m.unresolved()), recorded);
  EXPECT_EQ(static_cast<uint64_t>(recorded) + m.skipped(), static_cast<uint64_t>(kMarks));
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_GE(got[i].end_ns, got[i].start_ns);
    if (i > 0) {
      EXPECT_GT(got[i].start_ns, got[i - 1].start_ns);
    }
  }
  EXPECT_FALSE(m.failed());
}

TEST_F(GpuLightTest, AnotherContextIsSkipped) {
  fake_.ctx = &ctx_;
  GpuMarks m = make();
  ASSERT_TRUE(m.mark(GpuMarkKind::kNextBegin));
  int other = 0;
  fake_.ctx = &other;
  EXPECT_FALSE(m.mark(GpuMarkKind::kNextBegin));
  EXPECT_EQ(m.skipped(), 1u);
  EXPECT_EQ(m.recorded(), 1u);
}

TEST_F(GpuLightTest, ARefusedRecordStopsTheMarksForGood) {
  fake_.ctx = &ctx_;
  fake_.record_fails_after = 1;
  GpuMarks m = make();
  ASSERT_TRUE(m.mark(GpuMarkKind::kNextBegin));
  EXPECT_FALSE(m.mark(GpuMarkKind::kNextBegin));
  EXPECT_TRUE(m.failed());
  EXPECT_NE(m.why_failed().find("cuEventRecord"), std::string::npos);
  fake_.record_fails_after = -1;
  EXPECT_FALSE(m.mark(GpuMarkKind::kNextBegin));  // stays off
}

}  // namespace
}  // namespace stallscope
