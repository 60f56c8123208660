// The C API's event functions (include/stallscope/stallscope.h); session start/stop live in
// inject/preload.cc because they need the database writer.
#include <unistd.h>

#include <cstring>
#include <string>

#include "collector/collector.h"
#include "collector/gpu_hooks.h"
#include "collector/gpu_light.h"
#include "stallscope/stallscope.h"
#include "stallscope/version.h"

using namespace stallscope;

extern "C" {

uint32_t ss_intern(const char* text) {
  Arena* a = Collector::arena();
  if (a == nullptr || text == nullptr || g_generation.load(std::memory_order_relaxed) == 0) return 0;
  return a->intern(text);
}

uint32_t ss_counter_track(const char* name, const char* unit) {
  if (name == nullptr) return 0;
  std::string key(name);
  key.push_back('\x1f');  // storage splits the name from its unit here
  if (unit != nullptr) key.append(unit);
  return ss_intern(key.c_str());
}

void ss_span_begin(uint32_t name) { emit(EventKind::kSpanBegin, name, 0, 0, 0, 0); }

void ss_span_begin_args(uint32_t name, int64_t a0, int32_t a1, int32_t a2) {
  emit(EventKind::kSpanBegin, name, a0, a1, a2, kFlagArgs);
}

void ss_span_end(void) { emit(EventKind::kSpanEnd, 0, 0, 0, 0, 0); }

void ss_span_end_args(int64_t a0, int32_t a1, int32_t a2) { emit(EventKind::kSpanEnd, 0, a0, a1, a2, kFlagArgs); }

void ss_span_empty(uint32_t name, int64_t a0, int32_t a1, int32_t a2) {
  Event begin{};
  begin.ticks = now_ticks();
  begin.a0 = a0;
  begin.a1 = a1;
  begin.a2 = a2;
  begin.name = name;
  begin.kind = EventKind::kSpanBegin;
  begin.flags = kFlagArgs;
  Event end{};
  end.ticks = begin.ticks;
  end.kind = EventKind::kSpanEnd;
  emit_pair(begin, end);
}

void ss_instant(uint32_t name, int64_t a0, int32_t a1, int32_t a2) {
  emit(EventKind::kInstant, name, a0, a1, a2, kFlagArgs);
}

void ss_counter(uint32_t track, double value) {
  int64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  emit(EventKind::kCounter, track, bits, 0, 0, kFlagArg0);
}

void ss_counter_for(uint32_t track, double value, int32_t pid) {
  int64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  emit(EventKind::kCounter, track, bits, pid, 0, kFlagArg0 | kFlagArg1);
}

void ss_thread_name(const char* name) {
  const uint32_t id = ss_intern(name);
  if (id != 0) emit(EventKind::kThreadName, id, 0, 0, 0, 0);
}

int ss_is_recording(void) { return g_generation.load(std::memory_order_relaxed) != 0 ? 1 : 0; }

uint64_t ss_dropped_events(void) {
  Arena* a = Collector::arena();
  if (a == nullptr) return 0;
  uint64_t total = 0;
  const int pid = static_cast<int>(getpid());
  for (uint32_t i = 0; i < a->header()->config.ring_count; ++i) {
    Ring* r = a->ring(i);
    if (r->h.state.load(std::memory_order_acquire) != kRingFree && r->h.pid == pid) {
      total += r->h.dropped.load(std::memory_order_relaxed);
    }
  }
  return total + a->header()->dropped_no_ring.load(std::memory_order_relaxed);
}

const char* ss_version(void) { return STALLSCOPE_VERSION; }

int ss_gpu_capture_on(void) { return cupti_capture_on() ? 1 : 0; }

int ss_gpu_marks_wanted(void) { return gpu_marks_wanted() ? 1 : 0; }

void ss_gpu_mark(int kind) {
  if (kind == 1 || kind == 2) gpu_mark(static_cast<GpuMarkKind>(kind));
}

const char* ss_session_shm(void) {
  Arena* a = Collector::arena();
  if (a == nullptr || g_generation.load(std::memory_order_relaxed) == 0) return nullptr;
  return a->name().c_str();
}

}  // extern "C"
