// The copy watcher with fences completed by hand: a batch's host slot stays out of the pool
// until its copy's fence completed, in any order of completion, and the watcher's destructor
// waits for pending copies.
#include "loader/copy_watcher.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

namespace stallscope::loader {
namespace {

// Fences that complete when the test says so.
class HandFences : public Fences {
 public:
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::map<uintptr_t, bool> done;
    uintptr_t next = 1;
    int destroyed = 0;
    uintptr_t last_stream = 0;
  };
  explicit HandFences(std::shared_ptr<Shared> s) : s_(std::move(s)) {}
  Status record(int, uintptr_t stream, uintptr_t* fence) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    *fence = s_->next++;
    s_->done[*fence] = false;
    s_->last_stream = stream;
    return Status::Ok();
  }
  Status wait(uintptr_t fence) override {
    std::unique_lock<std::mutex> lock(s_->mu);
    s_->cv.wait(lock, [&] { return s_->done[fence]; });
    return Status::Ok();
  }
  void destroy(uintptr_t) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    ++s_->destroyed;
  }

 private:
  std::shared_ptr<Shared> s_;
};

void complete(HandFences::Shared& s, uintptr_t fence) {
  std::lock_guard<std::mutex> lock(s.mu);
  s.done[fence] = true;
  s.cv.notify_all();
}

bool eventually(const std::function<bool()>& f) {
  for (int i = 0; i < 300; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return f();
}

std::shared_ptr<BufferPool> pool_of(int64_t slots) {
  PoolOptions o;
  o.field_bytes = {64};
  o.slots = slots;
  return BufferPool::create(o).value();
}

TEST(CopyWatcherTest, HoldsTheSlotUntilTheCopyCompleted) {
  auto shared = std::make_shared<HandFences::Shared>();
  auto pool = pool_of(3);
  CopyWatcher w(std::make_unique<HandFences>(shared), nullptr);
  for (int b = 0; b < 3; ++b) {
    SlotRef s;
    ASSERT_TRUE(pool->acquire(&s).ok());
    ASSERT_TRUE(w.watch(s, 0, 0xABC, 0, b, 64).ok());
    // The caller (the Python side) drops its own reference at once.
  }
  EXPECT_EQ(shared->last_stream, 0xABCu);
  EXPECT_EQ(pool->free_slots(), 0);
  EXPECT_EQ(w.pending(), 3);
  complete(*shared, 1);
  EXPECT_TRUE(eventually([&] { return pool->free_slots() == 1; }));
  complete(*shared, 3);  // completions out of order: the watcher waits for the fences in order
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(pool->free_slots(), 1);
  complete(*shared, 2);
  EXPECT_TRUE(eventually([&] { return pool->free_slots() == 3; }));
  w.wait_idle();
  EXPECT_EQ(w.pending(), 0);
  EXPECT_EQ(shared->destroyed, 3);
}

TEST(CopyWatcherTest, TheDestructorWaitsForPendingCopies) {
  auto shared = std::make_shared<HandFences::Shared>();
  auto pool = pool_of(1);
  std::thread completer;
  {
    CopyWatcher w(std::make_unique<HandFences>(shared), nullptr);
    SlotRef s;
    ASSERT_TRUE(pool->acquire(&s).ok());
    ASSERT_TRUE(w.watch(s, 0, 1, 0, 0, 64).ok());
    s.reset();
    completer = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      complete(*shared, 1);
    });
  }  // blocks until the fence completed
  EXPECT_EQ(pool->free_slots(), 1);
  completer.join();
}

TEST(CopyWatcherTest, WithoutCudaWatchFailsAndKeepsNothing) {
  auto pool = pool_of(1);
  CopyWatcher w(cuda_fences(), nullptr);
  SlotRef s;
  ASSERT_TRUE(pool->acquire(&s).ok());
  const Status st = w.watch(s, 0, 0, 0, 0, 64);
  if (st.ok()) GTEST_SKIP() << "CUDA is here";
  s.reset();
  EXPECT_EQ(pool->free_slots(), 1);
}

}  // namespace
}  // namespace stallscope::loader
