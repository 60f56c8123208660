// A stand-in for the CUDA driver (built as libcuda.so.1) with the few functions light GPU mode
// uses (collector/gpu_light.h), so that a test runs the whole light-mode path without a GPU: the
// hooks' marks, the reader thread, the recording and the report. It simulates one GPU with one
// queue: fake_gpu_queue(us) queues that much work on the default stream; an event recorded there
// is reached when the work queued before it is done, one on another stream at once (plus 5 us).
// Built a second time with FAKE_CUDA_WITHOUT_EVENT_QUERY: a driver that lacks a function light
// mode needs.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>

namespace {

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct Event {
  uint64_t reached = 0;
  bool recorded = false;
};

std::mutex g_mu;
uint64_t g_busy_until = 0;
int g_ctx = 0;
constexpr uint64_t kLatencyNs = 5'000;

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int cuCtxGetCurrent(void** ctx) {
  *ctx = &g_ctx;
  return 0;
}
__attribute__((visibility("default"))) int cuCtxSetCurrent(void*) { return 0; }
__attribute__((visibility("default"))) int cuEventCreate(void** e, unsigned) {
  *e = new Event;
  return 0;
}
__attribute__((visibility("default"))) int cuStreamCreate(void** s, unsigned) {
  *s = new int(1);
  return 0;
}
__attribute__((visibility("default"))) int cuEventRecord(void* e, void* stream) {
  std::lock_guard<std::mutex> lock(g_mu);
  const uint64_t t = now_ns();
  auto* ev = static_cast<Event*>(e);
  ev->reached = (stream == nullptr ? std::max(t, g_busy_until) : t) + kLatencyNs;
  ev->recorded = true;
  return 0;
}
#ifndef FAKE_CUDA_WITHOUT_EVENT_QUERY
__attribute__((visibility("default"))) int cuEventQuery(void* e) {
  std::lock_guard<std::mutex> lock(g_mu);
  const auto* ev = static_cast<Event*>(e);
  if (!ev->recorded) return 0;
  return ev->reached <= now_ns() ? 0 : 600;  // CUDA_ERROR_NOT_READY
}
#endif
__attribute__((visibility("default"))) int cuEventSynchronize(void* e) {
  uint64_t reached = 0;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    reached = static_cast<Event*>(e)->reached;
  }
  while (now_ns() < reached) std::this_thread::sleep_for(std::chrono::microseconds(20));
  return 0;
}
__attribute__((visibility("default"))) int cuEventElapsedTime_v2(float* ms, void* a, void* b) {
  std::lock_guard<std::mutex> lock(g_mu);
  const auto* x = static_cast<Event*>(a);
  const auto* y = static_cast<Event*>(b);
  *ms = static_cast<float>((static_cast<double>(y->reached) - static_cast<double>(x->reached)) / 1e6);
  return 0;
}
// The test's kernel: `us` microseconds of work queued on the default stream.
__attribute__((visibility("default"))) void fake_gpu_queue(uint64_t us) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_busy_until = std::max(now_ns(), g_busy_until) + us * 1000;
}
}
