// The in-process collector: which arena this process records into, the per-thread ring lookup,
// and the hot path. emit() reserves a slot in the calling thread's ring, writes the event and
// publishes it with one release store: no syscall, lock or allocation. A thread's first event
// takes the slow path once (claims a ring in the arena).
#pragma once

#include <atomic>
#include <cstdint>

#include "collector/arena.h"
#include "collector/clock.h"
#include "collector/event.h"

namespace stallscope {

struct ThreadState {
  Ring* ring;                  // this thread's ring in the current session, or nullptr
  uint32_t generation;         // session generation the ring belongs to
  uint32_t failed_generation;  // generation in which no ring could be claimed
};

extern __thread ThreadState t_state __attribute__((tls_model("initial-exec")));
// 0 while not recording; a new value for every session joined in this process.
extern std::atomic<uint32_t> g_generation;

Ring* thread_ring_slow();

// Reserves `n` consecutive slots in the calling thread's ring: returns the ring and its head, or
// nullptr when not recording, no ring is free, or the ring is full (the drop is counted).
// Publishing is the caller's: write the slots, then store head + n with release.
inline Ring* reserve(uint64_t n, uint64_t* head) {
  const uint32_t gen = g_generation.load(std::memory_order_relaxed);
  Ring* r = t_state.ring;
  if (__builtin_expect(r == nullptr || t_state.generation != gen, 0)) {
    if (gen == 0) return nullptr;  // not recording: no call at all
    r = thread_ring_slow();
    if (r == nullptr) return nullptr;
  }
  // The ring's own mask: a ring of an earlier session (other capacity) can never be overrun.
  const uint64_t mask = r->h.mask;
  const uint64_t h = r->h.head.load(std::memory_order_relaxed);
  if (__builtin_expect(h + n - 1 - r->h.tail_cache > mask, 0)) {
    r->h.tail_cache = r->h.tail.load(std::memory_order_acquire);
    if (h + n - 1 - r->h.tail_cache > mask) {
      r->h.dropped.store(r->h.dropped.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
      return nullptr;
    }
  }
  *head = h;
  return r;
}

inline void emit(EventKind kind, uint32_t name, int64_t a0, int32_t a1, int32_t a2, uint8_t flags) {
  uint64_t h;
  Ring* r = reserve(1, &h);
  if (r == nullptr) return;
  Event& e = r->events[h & r->h.mask];
  e.ticks = now_ticks();
  e.a0 = a0;
  e.a1 = a1;
  e.a2 = a2;
  e.name = name;
  e.kind = kind;
  e.flags = flags;
  e.reserved = 0;
  r->h.head.store(h + 1, std::memory_order_release);
}

// Writes two events that belong together (a GPU activity's two slots) and publishes them with
// one store, so the drainer never sees one without the other. Timestamps are the caller's.
inline void emit_pair(const Event& first, const Event& second) {
  uint64_t h;
  Ring* r = reserve(2, &h);
  if (r == nullptr) return;
  r->events[h & r->h.mask] = first;
  r->events[(h + 1) & r->h.mask] = second;
  r->h.head.store(h + 2, std::memory_order_release);
}

// Interns `text` through a per-thread cache (a hash and a compare instead of the arena lock);
// for callers that see the same strings again and again (NVTX messages, kernel names).
uint32_t intern_cached(const char* text);

// Process-level lifecycle. All return false with *error set on failure; none throws.
class Collector {
 public:
  // Joins the session whose arena is `arena` (created here or attached); registers this process.
  static bool join(Arena* arena);
  // Stops recording in this process (later events are ignored). The arena stays mapped.
  static void leave();
  static Arena* arena();
  // Registers this process in the arena (called by join and after fork in the child).
  static void register_this_process();
  // Marks this process as exited with `code` (from on_exit).
  static void mark_exit(int code);
};

}  // namespace stallscope
