// The batch buffer pool: alignment, reuse, growth when every slot is out, slots released from
// other threads, and plain memory (with a note) when pinning is asked for without CUDA.
#include "loader/buffer_pool.h"

#include <gtest/gtest.h>

#include <thread>

namespace stallscope::loader {
namespace {

std::shared_ptr<BufferPool> make(int64_t slots, bool pin = false) {
  PoolOptions o;
  o.field_bytes = {100, 3, 0};
  o.slots = slots;
  o.pin = pin;
  Result<std::shared_ptr<BufferPool>> p = BufferPool::create(o);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.value();
}

TEST(BufferPoolTest, SlotsAreAlignedAndReused) {
  auto pool = make(2);
  EXPECT_EQ(pool->allocations(), 6);
  std::byte* seen = nullptr;
  for (int i = 0; i < 50; ++i) {
    SlotRef s;
    ASSERT_TRUE(pool->acquire(&s).ok());
    for (size_t f = 0; f < s->fields(); ++f) EXPECT_EQ(reinterpret_cast<uintptr_t>(s->field(f)) % 64, 0u);
    if (seen == nullptr) seen = s->field(0);
    EXPECT_EQ(s->field(0), seen) << "the slot released last is taken first";
  }
  EXPECT_EQ(pool->allocations(), 6);
  EXPECT_EQ(pool->grown(), 0);
}

TEST(BufferPoolTest, GrowsWhenEverySlotIsOut) {
  auto pool = make(2);
  std::vector<SlotRef> held(5);
  for (SlotRef& s : held) ASSERT_TRUE(pool->acquire(&s).ok());
  EXPECT_EQ(pool->slots(), 5);
  EXPECT_EQ(pool->grown(), 3);
  EXPECT_EQ(pool->free_slots(), 0);
  held.clear();
  EXPECT_EQ(pool->free_slots(), 5);
}

TEST(BufferPoolTest, ASlotReturnsWhenItsLastReferenceDrops) {
  auto pool = make(1);
  SlotRef a;
  ASSERT_TRUE(pool->acquire(&a).ok());
  SlotRef b = a, c = a;
  a.reset();
  b.reset();
  EXPECT_EQ(pool->free_slots(), 0);
  std::thread t([c = std::move(c)]() mutable { c.reset(); });  // released on another thread
  t.join();
  EXPECT_EQ(pool->free_slots(), 1);
}

TEST(BufferPoolTest, APoolOutlivesItsOwnerWhileSlotsAreOut) {
  SlotRef kept;
  {
    auto pool = make(1);
    ASSERT_TRUE(pool->acquire(&kept).ok());
  }
  kept->field(0)[99] = std::byte{1};  // ASan: still allocated
  kept.reset();                       // frees the pool and its memory
}

TEST(BufferPoolTest, ManyThreadsAcquireAndRelease) {
  auto pool = make(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&pool, t] {
      for (int i = 0; i < 2000; ++i) {
        SlotRef s;
        ASSERT_TRUE(pool->acquire(&s).ok());
        s->field(0)[0] = static_cast<std::byte>(t);
        SlotRef copy = s;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(pool->free_slots(), pool->slots());
  EXPECT_LE(pool->slots(), 8);
}

TEST(BufferPoolTest, PinningWithoutCudaFallsBackToPlainMemoryAndSaysWhy) {
  auto pool = make(1, true);
  if (pool->pinned()) GTEST_SKIP() << "CUDA is here: the memory is page-locked";
  EXPECT_NE(pool->note().find("pinned memory unavailable"), std::string::npos) << pool->note();
  SlotRef s;
  EXPECT_TRUE(pool->acquire(&s).ok());
}

}  // namespace
}  // namespace stallscope::loader
