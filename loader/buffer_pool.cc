// Batch buffer pool; see buffer_pool.h.
#include "loader/buffer_pool.h"

#include <cstdlib>
#include <utility>

#include "loader/cuda_runtime.h"

namespace stallscope::loader {
namespace {
constexpr size_t kAlign = 64;
size_t round_up(size_t n) { return n == 0 ? kAlign : (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

SlotRef::SlotRef(Slot* s) : slot_(s) {}

SlotRef::SlotRef(const SlotRef& o) : slot_(o.slot_) {
  if (slot_ != nullptr) slot_->refs_.fetch_add(1, std::memory_order_relaxed);
}

void SlotRef::reset() {
  Slot* s = std::exchange(slot_, nullptr);
  if (s == nullptr || s->refs_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // The last reference: back to the pool. The pool may go with `keep` (its owner has gone).
  std::shared_ptr<BufferPool> keep = std::move(s->pool_);
  keep->release(s);
}

Result<std::shared_ptr<BufferPool>> BufferPool::create(const PoolOptions& options) {
  std::shared_ptr<BufferPool> pool(new BufferPool(options));
  if (options.pin) {
    const CudaRuntime& cuda = CudaRuntime::get();
    pool->pinned_ = cuda.available();
    if (!pool->pinned_) pool->note_ = "pinned memory unavailable (" + cuda.error() + "); batches use plain memory";
  }
  for (int64_t i = 0; i < options.slots; ++i) {
    Status s = pool->add_slot();
    if (!s.ok()) return s;
  }
  pool->initial_ = static_cast<int64_t>(pool->all_.size());
  return pool;
}

BufferPool::~BufferPool() {
  for (const std::unique_ptr<Slot>& s : all_) {
    for (std::byte* b : s->buffers_) deallocate(b);
  }
}

void* BufferPool::allocate(size_t bytes, Status* status) {
  if (pinned_) {
    void* p = nullptr;
    *status = CudaRuntime::get().host_alloc(round_up(bytes), &p);
    return status->ok() ? p : nullptr;
  }
  void* p = std::aligned_alloc(kAlign, round_up(bytes));
  if (p == nullptr) *status = Status::Error("out of memory for a batch buffer of " + std::to_string(bytes) + " bytes");
  return p;
}

void BufferPool::deallocate(void* p) {
  if (pinned_) {
    CudaRuntime::get().free_host(p);
  } else {
    std::free(p);
  }
}

Status BufferPool::add_slot() {
  // Allocated outside the lock: cudaHostAlloc takes milliseconds, and releases must not wait.
  auto slot = std::make_unique<Slot>();
  Status status;
  for (size_t bytes : o_.field_bytes) {
    void* p = allocate(bytes, &status);
    if (p == nullptr) {
      for (std::byte* b : slot->buffers_) deallocate(b);
      return status;
    }
    slot->buffers_.push_back(static_cast<std::byte*>(p));
  }
  std::lock_guard<std::mutex> lock(mu_);
  allocations_ += static_cast<int64_t>(o_.field_bytes.size());
  slot->id_ = static_cast<int64_t>(all_.size());
  free_.push_back(slot.get());
  all_.push_back(std::move(slot));
  return Status::Ok();
}

Status BufferPool::acquire(SlotRef* out) {
  out->reset();
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        Slot* s = free_.back();
        free_.pop_back();
        s->refs_.store(1, std::memory_order_relaxed);
        s->pool_ = shared_from_this();
        *out = SlotRef(s);
        return Status::Ok();
      }
    }
    // Every slot is out: the training loop holds more batches than the pool was sized for.
    Status s = add_slot();
    if (!s.ok()) return s;
    std::lock_guard<std::mutex> lock(mu_);
    ++grown_;
  }
}

void BufferPool::release(Slot* s) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(s);
}

int64_t BufferPool::slots() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(all_.size());
}

int64_t BufferPool::free_slots() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(free_.size());
}

int64_t BufferPool::grown() const {
  std::lock_guard<std::mutex> lock(mu_);
  return grown_;
}

int64_t BufferPool::allocations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return allocations_;
}

size_t BufferPool::bytes() const {
  size_t per_slot = 0;
  for (size_t b : o_.field_bytes) per_slot += round_up(b);
  std::lock_guard<std::mutex> lock(mu_);
  return per_slot * all_.size();
}

}  // namespace stallscope::loader
