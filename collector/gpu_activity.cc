// GPU activities into the ring; see gpu_activity.h.
#include "collector/gpu_activity.h"

#include "collector/collector.h"

namespace stallscope {

const char* copy_kind_name(uint8_t k) {
  switch (k) {
    case kCopyHtoD: return "HtoD";
    case kCopyDtoH: return "DtoH";
    case kCopyDtoD: return "DtoD";
    case kCopyHtoH: return "HtoH";
    case kCopyPtoP: return "PtoP";
    case 3: return "HtoA";
    case 4: return "AtoH";
    case 5: return "AtoA";
    case 6: return "AtoD";
    case 7: return "DtoA";
    default: return "unknown";
  }
}

const char* memory_kind_name(uint8_t k) {
  switch (k) {
    case kMemPageable: return "pageable";
    case kMemPinned: return "pinned";
    case kMemDevice: return "device";
    case kMemArray: return "array";
    case kMemManaged: return "managed";
    case 6: return "device_static";
    case 7: return "managed_static";
    default: return "unknown";
  }
}

const char* sync_type_name(uint8_t t) {
  switch (t) {
    case 1: return "event_synchronize";
    case 2: return "stream_wait_event";
    case 3: return "stream_synchronize";
    case 4: return "context_synchronize";
    default: return "unknown";
  }
}

const char* gpu_activity_kind_name(GpuActivityKind k) {
  switch (k) {
    case GpuActivityKind::kKernel: return "kernel";
    case GpuActivityKind::kMemcpy: return "memcpy";
    case GpuActivityKind::kMemset: return "memset";
    case GpuActivityKind::kSync: return "sync";
    case GpuActivityKind::kMark: return "mark";
  }
  return "unknown";
}

void record_gpu_activity(const GpuActivity& a) {
  if (g_generation.load(std::memory_order_relaxed) == 0) return;
  uint32_t name = 0;
  if (a.kind == GpuActivityKind::kKernel) {
    name = intern_cached(a.name != nullptr ? a.name : "(kernel)");
  } else if (a.kind == GpuActivityKind::kMemcpy) {
    char buf[32] = "memcpy ";
    const char* k = copy_kind_name(a.copy_kind);
    for (int i = 0; k[i] && i < 20; ++i) buf[7 + i] = k[i];
    name = intern_cached(buf);
  } else if (a.kind == GpuActivityKind::kMemset) {
    name = intern_cached("memset");
  } else if (a.kind == GpuActivityKind::kMark) {
    name = intern_cached(a.name != nullptr ? a.name : "mark");
  } else {
    name = intern_cached(sync_type_name(a.sync_type));
  }
  const GpuEventPair p = pack_gpu_activity(a, name);
  emit_pair(p.first, p.second);
}

GpuEventPair pack_gpu_activity(const GpuActivity& a, uint32_t name_id) {
  GpuEventPair p{};
  p.first.ticks = a.start_ns;
  p.first.a0 = static_cast<int64_t>(a.end_ns);
  p.first.a1 = static_cast<int32_t>(a.stream);
  p.first.a2 = static_cast<int32_t>((a.device << 8) | static_cast<uint32_t>(a.kind));
  p.first.name = name_id;
  p.first.kind = EventKind::kGpuActivity;
  p.first.flags = kFlagTimeNs | kFlagArgs;
  p.second.ticks = a.correlation;
  p.second.a0 = static_cast<int64_t>(a.bytes);
  p.second.a1 = static_cast<int32_t>((uint32_t{a.copy_kind} << 16) | (uint32_t{a.src_kind} << 8) | a.dst_kind);
  p.second.a2 = static_cast<int32_t>(a.context);
  p.second.name = a.sync_type;
  p.second.kind = EventKind::kGpuActivityExt;
  p.second.flags = kFlagArgs;
  return p;
}

GpuActivity unpack_gpu_activity(const GpuEventPair& p, uint32_t* name_id) {
  GpuActivity a;
  a.kind = static_cast<GpuActivityKind>(p.first.a2 & 0xff);
  a.device = static_cast<uint32_t>(p.first.a2) >> 8;
  a.stream = static_cast<uint32_t>(p.first.a1);
  a.start_ns = p.first.ticks;
  a.end_ns = static_cast<uint64_t>(p.first.a0);
  a.correlation = static_cast<uint32_t>(p.second.ticks);
  a.bytes = static_cast<uint64_t>(p.second.a0);
  const uint32_t kinds = static_cast<uint32_t>(p.second.a1);
  a.copy_kind = static_cast<uint8_t>(kinds >> 16);
  a.src_kind = static_cast<uint8_t>(kinds >> 8);
  a.dst_kind = static_cast<uint8_t>(kinds);
  a.context = static_cast<uint32_t>(p.second.a2);
  a.sync_type = static_cast<uint8_t>(p.second.name);
  *name_id = p.first.name;
  return a;
}

}  // namespace stallscope
