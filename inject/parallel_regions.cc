// torch's parallel regions, timed from inside libstallscope.so: the library defines libgomp's
// `GOMP_parallel@GOMP_4.0` (inject/libstallscope.map), which every `#pragma omp parallel` of a
// GCC-built library calls (torch's at::parallel_for, MKL's GNU threading layer), and hands each
// call to libgomp's own with the region's body wrapped. What it keeps is three process totals:
// the outermost regions entered, their wall time on the threads that entered them, and the time
// their teams spent inside the bodies, all threads summed. The hooks read them around each
// training step (ss_parallel_totals); the what-if model tells the step's parallel part from its
// serial part with them, which the CPU clocks cannot (libgomp's threads spin between regions;
// docs/decisions.md, "torch's parallel regions measured in the step").
//
// The region runs as libgomp would run it: the same team size and flags, the body called by each
// thread of the team with the region's data. Nested regions (inside a body) go to libgomp untimed. When
// libgomp's function cannot be found, the body runs once on the calling thread: a team of one,
// which every OpenMP program must accept (this only happens if the process has no libgomp, so no
// one could have called here).
#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "collector/clock.h"
#if defined(__x86_64__)
#include <x86intrin.h>
#endif
#include "stallscope/stallscope.h"

namespace {

using Body = void (*)(void*);
using ParallelFn = void (*)(Body, void*, unsigned, unsigned);

std::atomic<ParallelFn> g_real{nullptr};

// Each thread adds to totals of its own, so that a region's threads do not take one cache line
// from each other at its end: a slot of a fixed table, claimed without a lock (fork-safe), read
// and summed by ss_parallel_totals. Threads beyond the table share its last slot, with atomic adds.
struct alignas(64) Totals {
  std::atomic<uint64_t> regions{0}, region_ns{0}, body_ns{0};  // the times in ticks()
};
constexpr int kSlots = 512;
Totals g_slots[kSlots];
std::atomic<int> g_claimed{0};
// initial-exec, as the collector's own: libstallscope.so is preloaded, never dlopen'ed late.
#define SS_TLS thread_local __attribute__((tls_model("initial-exec")))
SS_TLS Totals* t_totals = nullptr;
SS_TLS bool t_shared = false;  // this thread's slot is the shared last one
SS_TLS int t_depth = 0;        // > 0 inside a region's body (or a region) on this thread

// The regions' clock: the TSC where it is invariant (a few nanoseconds a read, against tens for
// clock_gettime on a virtual machine), else CLOCK_MONOTONIC; the totals are kept in its ticks and
// turned into nanoseconds when read, against an anchor taken at the first region (not at load:
// every process under stallscope loads the library, few enter a region).
struct Clock {
  bool tsc = false;
  uint64_t anchor_ticks = 0, anchor_ns = 0;
};
uint64_t raw_ticks(bool tsc) {
#if defined(__x86_64__)
  if (tsc) return __rdtsc();
#endif
  (void)tsc;
  return stallscope::monotonic_ns();
}
const Clock& region_clock() {
  static const Clock c = [] {
    Clock k;
    k.tsc = stallscope::tsc_is_reliable();
    k.anchor_ticks = raw_ticks(k.tsc);
    k.anchor_ns = stallscope::monotonic_ns();
    return k;
  }();
  return c;
}
uint64_t ticks() { return raw_ticks(region_clock().tsc); }

// Nanoseconds per tick: 1 without the TSC; with it, its rate since the anchor, frozen once 100 ms
// have passed so that later totals convert alike (the hooks subtract them). Before, it is measured
// afresh at every read (over 10 µs at least: a few tenths of a percent).
std::atomic<double> g_frozen_per_tick{0};
double ns_per_tick() {
  const Clock& c = region_clock();
  if (!c.tsc) return 1.0;
  const double frozen = g_frozen_per_tick.load(std::memory_order_relaxed);
  if (frozen > 0) return frozen;
  const uint64_t ns = stallscope::monotonic_ns(), tk = raw_ticks(true);
  if (ns < c.anchor_ns + 10'000 || tk <= c.anchor_ticks) return 1.0;  // totals of a few µs at most
  const double rate = static_cast<double>(ns - c.anchor_ns) / static_cast<double>(tk - c.anchor_ticks);
  if (ns >= c.anchor_ns + 100'000'000) g_frozen_per_tick.store(rate, std::memory_order_relaxed);
  return rate;
}

Totals& mine() {
  if (t_totals == nullptr) {
    const int i = g_claimed.fetch_add(1, std::memory_order_relaxed);
    t_shared = i >= kSlots - 1;
    t_totals = &g_slots[t_shared ? kSlots - 1 : i];
  }
  return *t_totals;
}

void add(std::atomic<uint64_t>& v, uint64_t d) {
  if (t_shared) {
    v.fetch_add(d, std::memory_order_relaxed);
  } else {  // only this thread writes it
    v.store(v.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
  }
}

// Loaded objects whose name holds "gomp": torch's wheels load their own libgomp
// (libgomp-<hash>.so.1) in a local scope that RTLD_NEXT may not see. Only the names are taken
// inside dl_iterate_phdr (which holds the loader's lock); they are opened after it returns.
int gomp_objects(dl_phdr_info* info, size_t, void* out) {
  const char* name = info->dlpi_name;
  if (name != nullptr && std::strstr(name, "gomp") != nullptr)
    static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

// libgomp's GOMP_parallel@GOMP_4.0 in an object other than this library, or nullptr.
void* find_in_objects() {
  std::vector<std::string> names;
  dl_iterate_phdr(gomp_objects, &names);
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&gomp_objects), &self) == 0) return nullptr;
  for (const std::string& name : names) {
    void* h = dlopen(name.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (h == nullptr) continue;
    void* f = dlvsym(h, "GOMP_parallel", "GOMP_4.0");
    Dl_info there{};
    const bool other = f != nullptr && dladdr(f, &there) != 0 && there.dli_fbase != self.dli_fbase;
    dlclose(h);  // the object stays loaded: RTLD_NOLOAD found it so
    if (other) return f;
  }
  return nullptr;
}

// Looked up once: a lookup that found nothing is not repeated on every region.
ParallelFn real_parallel() {
  static std::atomic<bool> looked{false};
  ParallelFn f = g_real.load(std::memory_order_acquire);
  if (f != nullptr) return f;
  if (looked.load(std::memory_order_acquire)) return g_real.load(std::memory_order_acquire);
  void* p = dlvsym(RTLD_NEXT, "GOMP_parallel", "GOMP_4.0");
  if (p == nullptr) p = find_in_objects();
  f = reinterpret_cast<ParallelFn>(p);
  if (f != nullptr) region_clock();  // its anchor taken now, before the first region is timed
  if (f != nullptr) g_real.store(f, std::memory_order_release);
  looked.store(true, std::memory_order_release);
  return f;
}

struct Region {
  Body fn;
  void* data;
};

void timed_body(void* p) {
  const auto* r = static_cast<const Region*>(p);
  ++t_depth;
  const uint64_t t0 = ticks();
  r->fn(r->data);
  add(mine().body_ns, ticks() - t0);
  --t_depth;
}

}  // namespace

extern "C" {

// libgomp's entry for `#pragma omp parallel` (GCC 4.9 and later).
__attribute__((visibility("default"))) void GOMP_parallel(Body fn, void* data, unsigned num_threads, unsigned flags) {
  const ParallelFn real = real_parallel();
  if (real == nullptr) {
    fn(data);
    return;
  }
  if (t_depth > 0) {
    real(fn, data, num_threads, flags);
    return;
  }
  Region r{fn, data};
  ++t_depth;
  const uint64_t t0 = ticks();
  real(timed_body, &r, num_threads, flags);
  Totals& t = mine();
  add(t.region_ns, ticks() - t0);
  add(t.regions, 1);
  --t_depth;
}

void ss_parallel_totals(uint64_t out[3]) {
  if (out == nullptr) return;
  out[0] = out[1] = out[2] = 0;
  if (g_real.load(std::memory_order_acquire) == nullptr) return;  // no region yet
  uint64_t t[3] = {0, 0, 0};
  const int n = std::min(g_claimed.load(std::memory_order_relaxed), kSlots);
  for (int i = 0; i < n; ++i) {
    t[0] += g_slots[i].regions.load(std::memory_order_relaxed);
    t[1] += g_slots[i].region_ns.load(std::memory_order_relaxed);
    t[2] += g_slots[i].body_ns.load(std::memory_order_relaxed);
  }
  const double per_tick = ns_per_tick();
  out[0] = t[0];
  out[1] = static_cast<uint64_t>(static_cast<double>(t[1]) * per_tick);
  out[2] = static_cast<uint64_t>(static_cast<double>(t[2]) * per_tick);
}

}  // extern "C"
