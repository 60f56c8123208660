// Holds each batch's host slot until its host-to-device copy has completed on the GPU, and
// records that copy as a dl.copy span. The copy itself is enqueued by the caller (PyTorch's
// copy_ on the loader's stream, non_blocking: it returns at once and the DMA reads the page-locked
// slot later); watch() then records an event on that stream and hands the event and a reference
// to the slot to the watcher thread, which waits for the event and only then drops the reference.
// Without this, the slot could go back to the pool and be overwritten by the next batch while
// the DMA still reads it.
//
// The events are behind Fences, so a test can complete them by hand; the real ones are CUDA
// events (CudaRuntime). The watcher thread starts at the first watch() and lives as long as the
// watcher (the loader); the destructor waits for every pending copy — memory must not be freed
// under a DMA — and joins it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "common/status.h"
#include "loader/buffer_pool.h"
#include "loader/events.h"

namespace stallscope::loader {

// What the watcher needs of the GPU: an event marking the work enqueued so far on a stream, a
// blocking wait for it, and its disposal.
class Fences {
 public:
  virtual ~Fences() = default;
  virtual Status record(int device, uintptr_t stream, uintptr_t* fence) = 0;
  virtual Status wait(uintptr_t fence) = 0;
  virtual void destroy(uintptr_t fence) = 0;
};
// CUDA events through CudaRuntime.
std::unique_ptr<Fences> cuda_fences();

class CopyWatcher {
 public:
  CopyWatcher(std::unique_ptr<Fences> fences, const Events* events);
  ~CopyWatcher();

  // The copy of batch `batch` (of loader `loader`, `bytes` long) from `slot` was enqueued on
  // `stream` of `device`: keep the slot until it completed. An error (no CUDA, a bad stream) means
  // the caller must wait itself.
  Status watch(SlotRef slot, int device, uintptr_t stream, int64_t loader, int64_t batch, int64_t bytes);
  // Waits until every watched copy completed.
  void wait_idle();
  int64_t pending() const;  // copies not yet seen completed

 private:
  struct Item {
    uintptr_t fence = 0;
    SlotRef slot;
    int64_t loader = -1, batch = -1, bytes = 0;
  };
  void run();

  std::unique_ptr<Fences> fences_;
  const Events* events_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  int64_t in_hand_ = 0;  // taken off the queue, being waited for
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace stallscope::loader
