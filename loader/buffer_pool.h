// The batch buffers: a pool of slots, each holding one buffer per field big enough for a full
// batch, which the worker threads write samples into in place and the training loop receives
// without a copy (DLPack). A slot goes back to the pool when the last reference to it drops —
// the batch's tensors are freed, or its host-to-device copy completed — whichever thread that
// happens on. Memory is 64-byte aligned; page-locked through the CUDA runtime when pinning is
// asked for and CUDA is there (cudaHostAlloc is slow, ~ms per MB: hence a pool), plain aligned
// memory otherwise (note() says why, once).
//
// The pool starts with `slots` slots; the loader sizes it for the batches in flight plus those a
// training loop normally holds. A loop that keeps more batches alive (a list of them) makes the
// pool grow instead of stalling: grown() counts those slots. In steady state nothing is allocated.
// The pool outlives its owner while slots are out: each acquired slot keeps it alive.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"

namespace stallscope::loader {

class BufferPool;

// One batch's buffers.
class Slot {
 public:
  std::byte* field(size_t f) const { return buffers_[f]; }
  size_t fields() const { return buffers_.size(); }
  int64_t id() const { return id_; }  // 0, 1, ... in allocation order

 private:
  friend class BufferPool;
  friend class SlotRef;
  std::vector<std::byte*> buffers_;
  int64_t id_ = 0;
  std::atomic<int64_t> refs_{0};
  std::shared_ptr<BufferPool> pool_;  // set while acquired: the pool lives while a slot is out
};

// A counted reference to an acquired slot (copying it adds a reference; no allocation).
class SlotRef {
 public:
  SlotRef() = default;
  SlotRef(const SlotRef& o);
  SlotRef(SlotRef&& o) noexcept : slot_(o.slot_) { o.slot_ = nullptr; }
  SlotRef& operator=(SlotRef o) noexcept {
    std::swap(slot_, o.slot_);
    return *this;
  }
  ~SlotRef() { reset(); }
  void reset();
  explicit operator bool() const { return slot_ != nullptr; }
  Slot* operator->() const { return slot_; }
  Slot& operator*() const { return *slot_; }

 private:
  friend class BufferPool;
  explicit SlotRef(Slot* s);
  Slot* slot_ = nullptr;
};

struct PoolOptions {
  std::vector<size_t> field_bytes;  // per slot: a full batch of each field
  int64_t slots = 2;                // allocated at creation
  bool pin = false;                 // page-locked through CUDA if it loads
};

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  // Allocates the first slots. Fails only when memory cannot be had.
  static Result<std::shared_ptr<BufferPool>> create(const PoolOptions& options);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A free slot, or a new one when every slot is out (counted in grown()).
  Status acquire(SlotRef* out);

  bool pinned() const { return pinned_; }
  // Why memory is not page-locked although pinning was asked for ("" otherwise).
  const std::string& note() const { return note_; }
  int64_t slots() const;        // allocated so far
  int64_t free_slots() const;   // in the pool now
  int64_t grown() const;        // allocated beyond the first ones
  int64_t allocations() const;  // buffers allocated so far (slots x fields)
  size_t bytes() const;         // held by all slots

 private:
  friend class SlotRef;
  explicit BufferPool(const PoolOptions& o) : o_(o) {}
  Status add_slot();  // mu_ held
  void release(Slot* s);
  void* allocate(size_t bytes, Status* status);
  void deallocate(void* p);

  PoolOptions o_;
  bool pinned_ = false;
  std::string note_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Slot>> all_;
  std::vector<Slot*> free_;
  int64_t initial_ = 0, grown_ = 0, allocations_ = 0;
};

}  // namespace stallscope::loader
