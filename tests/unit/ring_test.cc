// Tests for the per-thread rings and the hot path: single and multi-threaded producers,
// wrap-around, and full-ring drops counted.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "collector/collector.h"
#include "stallscope/stallscope.h"
#include "tests/unit/test_util.h"

namespace stallscope {
namespace {

// Reads every committed event of ring `r`, as the drainer does.
std::vector<Event> consume(Ring* r, uint64_t capacity) {
  std::vector<Event> out;
  const uint64_t head = r->h.head.load(std::memory_order_acquire);
  uint64_t tail = r->h.tail.load(std::memory_order_relaxed);
  for (; tail != head; ++tail) out.push_back(r->events[tail & (capacity - 1)]);
  r->h.tail.store(head, std::memory_order_release);
  return out;
}

class RingTest : public ::testing::Test {
 protected:
  Arena* make(uint32_t capacity, uint32_t rings = 8) {
    name_ = testing::unique_name("ss-ring-test");
    ArenaConfig cfg;
    cfg.ring_capacity = capacity;
    cfg.ring_count = rings;
    std::string err;
    Arena* a = Arena::create(name_, cfg, &err);
    EXPECT_NE(a, nullptr) << err;
    Collector::join(a);
    return a;
  }
  void TearDown() override {
    Collector::leave();
    Arena::unlink(name_);
  }
  Ring* my_ring() { return t_state.ring; }
  std::string name_;
};

TEST_F(RingTest, NothingIsRecordedOutsideASession) {
  Collector::leave();
  ss_span_begin(1);
  EXPECT_EQ(ss_is_recording(), 0);
  EXPECT_EQ(ss_intern("x"), 0u);
}

TEST_F(RingTest, SingleThreadEventsArriveInOrderWithFields) {
  Arena* a = make(1024);
  const uint32_t name = ss_intern("step");
  ss_span_begin_args(name, 7, 8, 9);
  ss_span_end();
  ss_instant(name, -1, 2, 3);
  ss_counter(ss_counter_track("depth", "batches"), 2.5);
  Ring* r = my_ring();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->h.pid, getpid());
  auto ev = consume(r, 1024);
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[0].kind, EventKind::kSpanBegin);
  EXPECT_EQ(ev[0].name, name);
  EXPECT_EQ(ev[0].a0, 7);
  EXPECT_EQ(ev[0].a1, 8);
  EXPECT_EQ(ev[0].a2, 9);
  EXPECT_EQ(ev[1].kind, EventKind::kSpanEnd);
  EXPECT_LE(ev[0].ticks, ev[1].ticks);
  EXPECT_EQ(ev[2].kind, EventKind::kInstant);
  EXPECT_EQ(ev[2].a0, -1);
  EXPECT_EQ(ev[3].kind, EventKind::kCounter);
  double v;
  std::memcpy(&v, &ev[3].a0, sizeof v);
  EXPECT_DOUBLE_EQ(v, 2.5);
  EXPECT_STREQ(a->string(ev[3].name),
               "depth\x1f"
               "batches");
}

TEST_F(RingTest, WrapsAroundManyTimesWithoutLoss) {
  make(64);
  const uint32_t name = ss_intern("w");
  int64_t expected = 0;
  for (int round = 0; round < 100; ++round) {
    for (int i = 0; i < 50; ++i) ss_instant(name, round * 50 + i, 0, 0);
    Ring* r = my_ring();
    auto ev = consume(r, 64);
    ASSERT_EQ(ev.size(), 50u);
    for (const Event& e : ev) EXPECT_EQ(e.a0, expected++);
  }
  EXPECT_EQ(my_ring()->h.head.load(), 5000u);
  EXPECT_EQ(my_ring()->h.dropped.load(), 0u);
}

TEST_F(RingTest, FullRingDropsAndCounts) {
  make(64);
  const uint32_t name = ss_intern("d");
  for (int i = 0; i < 100; ++i) ss_instant(name, i, 0, 0);
  Ring* r = my_ring();
  EXPECT_EQ(r->h.dropped.load(), 36u);
  EXPECT_EQ(ss_dropped_events(), 36u);
  auto ev = consume(r, 64);
  ASSERT_EQ(ev.size(), 64u);
  EXPECT_EQ(ev.front().a0, 0);  // the oldest events are kept, the newest dropped
  EXPECT_EQ(ev.back().a0, 63);
  ss_instant(name, 1000, 0, 0);  // room again after the drain
  ev = consume(r, 64);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].a0, 1000);
}

TEST_F(RingTest, ManyThreadsWithAConcurrentConsumer) {
  constexpr int kThreads = 6, kPerThread = 200000;
  constexpr uint32_t kCap = 4096;
  Arena* a = make(kCap, 16);
  const uint32_t name = ss_intern("mt");
  std::atomic<bool> done{false};
  std::vector<std::vector<int64_t>> seen(16);  // per ring, a0 values in arrival order
  std::vector<uint64_t> tids(16);
  std::thread consumer([&] {
    while (true) {
      const bool last = done.load();
      for (uint32_t i = 0; i < 16; ++i) {
        Ring* r = a->ring(i);
        if (r->h.state.load(std::memory_order_acquire) == kRingFree) continue;
        for (const Event& e : consume(r, kCap)) seen[i].push_back(e.a0);
      }
      if (last) break;
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) ss_instant(name, int64_t{t} * kPerThread + i, t, 0);
    });
  }
  for (auto& p : producers) p.join();
  done.store(true);
  consumer.join();
  uint64_t received = 0, dropped = 0;
  for (uint32_t i = 0; i < 16; ++i) {
    Ring* r = a->ring(i);
    if (seen[i].empty()) continue;
    received += seen[i].size();
    dropped += r->h.dropped.load();
    // Per producer, events arrive in order (drops only leave gaps).
    for (size_t k = 1; k < seen[i].size(); ++k) ASSERT_LT(seen[i][k - 1], seen[i][k]);
    // Each ring carried exactly one thread's events.
    const int64_t owner = seen[i][0] / kPerThread;
    EXPECT_EQ(seen[i].back() / kPerThread, owner);
  }
  EXPECT_EQ(received + dropped, uint64_t{kThreads} * kPerThread);
  EXPECT_GT(received, 0u);
  // Threads that exited retired their rings.
  int retired = 0;
  for (uint32_t i = 0; i < 16; ++i) retired += a->ring(i)->h.state.load() == kRingRetired;
  EXPECT_EQ(retired, kThreads);
}

TEST_F(RingTest, ThreadsBeyondTheRingCountAreCountedAsDropped) {
  Arena* a = make(64, 1);
  ss_instant(ss_intern("main"), 0, 0, 0);  // this thread takes the only ring
  std::thread t([] {
    for (int i = 0; i < 10; ++i) ss_instant(1, i, 0, 0);
  });
  t.join();
  EXPECT_EQ(a->header()->dropped_no_ring.load(), 10u);
}

TEST_F(RingTest, ForkedChildGetsItsOwnRing) {
  Arena* a = make(256);
  const uint32_t name = ss_intern("f");
  ss_instant(name, 1, 0, 0);
  Ring* parent_ring = my_ring();
  pid_t pid = fork();
  if (pid == 0) {
    ss_instant(name, 2, 0, 0);
    _exit(t_state.ring != parent_ring && t_state.ring != nullptr ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(consume(parent_ring, 256).size(), 1u);
  int child_rings = 0;
  for (uint32_t i = 0; i < a->header()->config.ring_count; ++i) {
    Ring* r = a->ring(i);
    if (r->h.state.load() != kRingFree && r->h.pid == pid) {
      ++child_rings;
      auto ev = consume(r, 256);
      ASSERT_EQ(ev.size(), 1u);
      EXPECT_EQ(ev[0].a0, 2);
    }
  }
  EXPECT_EQ(child_rings, 1);
  ASSERT_NE(a->find_process(pid), nullptr);  // the child registered itself
  EXPECT_EQ(a->find_process(pid)->ppid, getpid());
}

}  // namespace
}  // namespace stallscope
