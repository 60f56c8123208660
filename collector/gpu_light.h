// Light GPU mode (`stallscope run --gpu light`): no CUPTI at all. At the bounds of each next()
// call of the training thread, the DataLoader hooks call ss_gpu_mark(); it records a CUDA event on
// the legacy default stream (the one PyTorch's work goes to unless the program picks another). A
// thread of ours reads, off the training thread, when the GPU reached each event: all the work
// queued before it on that stream was then done. Each mark is recorded as a GPU activity of kind
// "mark": start = the host instant the event was recorded, end = the instant the GPU reached it,
// both CLOCK_MONOTONIC. From them the analysis derives, per next() call, how long the GPU sat idle
// while the loop waited for its batch (analysis/gpu.h).
//
// GPU time is put on the host's clock by anchors: the reader records an event on a stream of its
// own, which has no work queued, and waits for it; the GPU reached it between the host instants
// before and after, and the middle is taken (the error is half that gap, a few microseconds; the
// tightest of a few tries is kept, so that a thread descheduled during one costs nothing). A
// mark's instant is its elapsed time from the latest anchor recorded before it. Anchors are
// renewed every second, so that the two clocks cannot drift apart and cuEventElapsedTime's float
// keeps sub-microsecond precision.
//
// The CUDA driver is used only where the process has already loaded it (dlopen RTLD_NOLOAD) and
// the calling thread has a current context: a process that does not use CUDA pays nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "collector/gpu_activity.h"

namespace stallscope {

enum class GpuMarkKind : uint8_t { kNextBegin = 1, kNextEnd = 2 };
const char* gpu_mark_name(GpuMarkKind k);

// The few driver functions light mode uses, resolved from libcuda at run time; tests fill them
// with a simulated GPU. CUDA's handles are opaque pointers, its results ints (0: success, 600:
// not ready).
struct CudaDriver {
  int (*ctx_get_current)(void** ctx) = nullptr;
  int (*ctx_set_current)(void* ctx) = nullptr;
  int (*event_create)(void** event, unsigned flags) = nullptr;
  int (*event_record)(void* event, void* stream) = nullptr;
  int (*event_query)(void* event) = nullptr;
  int (*event_synchronize)(void* event) = nullptr;
  int (*event_elapsed_ms)(float* ms, void* start, void* end) = nullptr;
  int (*stream_create)(void** stream, unsigned flags) = nullptr;
  // True with the functions set when the process has loaded libcuda.so.1. False with `why` empty
  // when it has not (yet), with `why` said when the loaded one lacks a function.
  static bool from_loaded_library(CudaDriver* out, std::string* why);
};

inline constexpr int kCudaSuccess = 0;
inline constexpr int kCudaNotReady = 600;

// The marks of one process. mark() runs on the training thread; poll() and anchor() on the
// reader's. Thread-safe between those two roles.
class GpuMarks {
 public:
  // `clock` gives CLOCK_MONOTONIC nanoseconds (replaceable in tests).
  GpuMarks(const CudaDriver& driver, std::function<uint64_t()> clock, int pool_size = 256);
  GpuMarks(const GpuMarks&) = delete;
  GpuMarks& operator=(const GpuMarks&) = delete;

  // Training thread. Binds to the thread's current context at the first call that finds one (and
  // creates the event pool); records a mark. False when none was recorded: no context yet, a
  // context other than the one bound, no free event, or the driver refused (then marks stop).
  bool mark(GpuMarkKind kind);

  // Reader thread. Binds to the context (once), then records an anchor. False if it could not.
  bool anchor();
  // Reader thread. Resolves the marks the GPU has reached, oldest first, stopping at the first
  // not reached; hands each to `out`; returns how many.
  int poll(const std::function<void(const GpuActivity&)>& out);

  bool bound() const { return bound_.load(std::memory_order_acquire); }
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  uint64_t recorded() const { return recorded_.load(std::memory_order_relaxed); }
  uint64_t skipped() const { return skipped_.load(std::memory_order_relaxed); }        // no free event, other context
  uint64_t unresolved() const { return unresolved_.load(std::memory_order_relaxed); }  // no anchor before it
  size_t pending() const;
  const std::string& why_failed() const { return why_; }  // once failed(): set once, never changed

 private:
  struct Pending {
    void* event;
    GpuMarkKind kind;
    uint64_t host_ns;
  };
  struct Anchor {
    void* event = nullptr;
    uint64_t host_ns = 0;   // when the GPU reached it, on the host's clock
    uint64_t after_ns = 0;  // the host instant after it was reached: marks recorded later can use it
  };
  void fail(const std::string& why);

  CudaDriver d_;
  std::function<uint64_t()> clock_;
  const int pool_size_;
  void* ctx_ = nullptr;
  std::atomic<bool> bound_{false};
  std::atomic<bool> failed_{false};
  std::string why_;
  mutable std::mutex mu_;         // free_ and pending_
  std::vector<void*> free_;       // events not in flight
  std::vector<Pending> pending_;  // in the order recorded
  // Reader thread only.
  bool reader_bound_ = false;
  void* stream_ = nullptr;
  static constexpr int kAnchors = 4;
  static constexpr int kAnchorTries = 4;
  static constexpr uint64_t kAnchorTightNs = 20'000;  // a round trip this short ends the tries
  Anchor anchors_[kAnchors];
  void* spare_ = nullptr;  // the event an anchor's next try is recorded to
  int anchor_next_ = 0;
  std::atomic<uint64_t> recorded_{0}, skipped_{0}, unresolved_{0};
};

// The process's light-mode marks, started by the preload constructor when STALLSCOPE_GPU=light:
// ss_gpu_mark() goes here; the reader thread starts at the first mark that binds. Stopped (the
// reader resolves what the GPU has reached and exits) by gpu_marks_stop() at process exit.
bool gpu_marks_wanted();
void gpu_mark(GpuMarkKind kind);
void gpu_marks_stop();

}  // namespace stallscope
