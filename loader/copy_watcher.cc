// Host slots held until their host-to-device copy completed; see copy_watcher.h.
#include "loader/copy_watcher.h"

#include <pthread.h>

#include <cstdio>

#include "loader/cuda_runtime.h"

namespace stallscope::loader {
namespace {

class CudaFences : public Fences {
 public:
  Status record(int device, uintptr_t stream, uintptr_t* fence) override {
    return CudaRuntime::get().record_event(device, stream, fence);
  }
  Status wait(uintptr_t fence) override { return CudaRuntime::get().synchronize_event(fence); }
  void destroy(uintptr_t fence) override { CudaRuntime::get().destroy_event(fence); }
};

}  // namespace

std::unique_ptr<Fences> cuda_fences() { return std::make_unique<CudaFences>(); }

CopyWatcher::CopyWatcher(std::unique_ptr<Fences> fences, const Events* events)
    : fences_(std::move(fences)), events_(events) {}

CopyWatcher::~CopyWatcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();  // after the last pending copy completed
}

Status CopyWatcher::watch(SlotRef slot, int device, uintptr_t stream, int64_t loader, int64_t batch, int64_t bytes) {
  Item item;
  Status s = fences_->record(device, stream, &item.fence);
  if (!s.ok()) return s;
  item.slot = std::move(slot);
  item.loader = loader;
  item.batch = batch;
  item.bytes = bytes;
  std::lock_guard<std::mutex> lock(mu_);
  if (!thread_.joinable()) {
    try {
      thread_ = std::thread(&CopyWatcher::run, this);
    } catch (const std::exception& e) {
      fences_->destroy(item.fence);
      return Status::Error(std::string("cannot start the copy watcher: ") + e.what());
    }
  }
  queue_.push_back(std::move(item));
  cv_.notify_one();
  return Status::Ok();
}

void CopyWatcher::run() {
  pthread_setname_np(pthread_self(), "ss-loader-copy");
  bool named = false;  // in the recording: once it records (maybe after this thread began)
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stop_, and every copy seen completed
    Item item = std::move(queue_.front());
    queue_.pop_front();
    ++in_hand_;
    lock.unlock();
    // The span opens when the watcher takes the copy: at its enqueue, or at the end of the copy
    // before it when copies queue up on the stream (they run one after the other there).
    if (!named && events_ != nullptr && events_->recording()) {
      events_->thread_name("ss-loader-copy");
      named = true;
    }
    const bool span = events_ != nullptr && events_->copy_begin(item.loader, item.batch, item.bytes);
    Status s = fences_->wait(item.fence);
    if (span) events_->copy_end();
    if (!s.ok()) {
      // The GPU reports an error (the context is lost): nothing will read the slot any more.
      std::fprintf(stderr, "stallscope: loader: waiting for the copy of batch %lld: %s\n",
                   static_cast<long long>(item.batch), s.message().c_str());
    }
    fences_->destroy(item.fence);
    item.slot.reset();  // back to the pool, now that the DMA is done with it
    lock.lock();
    --in_hand_;
    cv_.notify_all();
  }
}

void CopyWatcher::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return queue_.empty() && in_hand_ == 0; });
}

int64_t CopyWatcher::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(queue_.size()) + in_hand_;
}

}  // namespace stallscope::loader
