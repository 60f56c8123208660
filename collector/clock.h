// The collector's clock. The hot path reads raw ticks (the TSC on x86-64 when the kernel reports
// an invariant TSC, CLOCK_MONOTONIC nanoseconds otherwise); the drainer converts ticks to
// CLOCK_MONOTONIC nanoseconds with anchors taken at every flush (see storage/ingest.h), so every
// process of a session shares one time base.
#pragma once

#include <cstdint>
#include <ctime>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace stallscope {

// Set once, before any event is written, by Arena::create/attach.
extern bool g_clock_uses_tsc;

inline uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t now_ticks() {
#if defined(__x86_64__)
  if (__builtin_expect(g_clock_uses_tsc, 1)) return __rdtsc();
#endif
  return monotonic_ns();
}

// True when this machine's TSC is invariant and usable as a cross-process clock.
bool tsc_is_reliable();

// A (ticks, ns) pair read back to back, the tighter of a few tries.
struct ClockAnchor {
  uint64_t ticks;
  uint64_t ns;
};
ClockAnchor take_anchor();

}  // namespace stallscope
