// A GPU activity (kernel, copy, memset, synchronisation) as the collector records it, whatever
// produced it: the CUPTI layer decodes its activity records into this struct, tests build it
// directly. Timestamps are CLOCK_MONOTONIC nanoseconds (CUPTI is given our clock).
#pragma once

#include <cstdint>

#include "collector/event.h"

namespace stallscope {

// kMark: light mode's event at a next() bound (gpu_light.h): start = recorded on the host, end =
// reached by the GPU; name "next_begin" or "next_end".
enum class GpuActivityKind : uint8_t { kKernel = 1, kMemcpy = 2, kMemset = 3, kSync = 4, kMark = 5 };

// Memory kinds and copy kinds use CUPTI's numbering (CUpti_ActivityMemoryKind,
// CUpti_ActivityMemcpyKind) so that nothing is lost in translation; names in storage.
enum : uint8_t { kMemUnknown = 0, kMemPageable = 1, kMemPinned = 2, kMemDevice = 3, kMemArray = 4, kMemManaged = 5 };
enum : uint8_t { kCopyUnknown = 0, kCopyHtoD = 1, kCopyDtoH = 2, kCopyDtoD = 8, kCopyHtoH = 10, kCopyPtoP = 11 };

struct GpuActivity {
  GpuActivityKind kind = GpuActivityKind::kKernel;
  uint32_t device = 0;
  uint32_t context = 0;
  uint32_t stream = 0;
  uint32_t correlation = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  const char* name = nullptr;  // kernel name (mangled), or null
  uint64_t bytes = 0;          // memcpy / memset
  uint8_t copy_kind = 0;
  uint8_t src_kind = 0;
  uint8_t dst_kind = 0;
  uint8_t sync_type = 0;  // CUpti_ActivitySynchronizationType
};

// Writes `a` into the calling thread's ring (two slots, published together).
void record_gpu_activity(const GpuActivity& a);

// The two ring slots of an activity (EventKind::kGpuActivity, then kGpuActivityExt; event.h), packed
// by the collector and unpacked by the drainer: their layout is written here and nowhere else.
// `name_id` is the interned kernel name, copy kind or sync type.
struct GpuEventPair {
  Event first, second;
};
GpuEventPair pack_gpu_activity(const GpuActivity& a, uint32_t name_id);
// The inverse: every field but `name` (the pointer), with the interned name in *name_id.
GpuActivity unpack_gpu_activity(const GpuEventPair& p, uint32_t* name_id);

// Display names, shared by the drainer and readers.
const char* copy_kind_name(uint8_t copy_kind);
const char* memory_kind_name(uint8_t memory_kind);
const char* sync_type_name(uint8_t sync_type);
const char* gpu_activity_kind_name(GpuActivityKind kind);

}  // namespace stallscope
