// The CUPTI layer: GPU kernels, copies, memsets and synchronisations from CUPTI's activity API,
// and the host calls that block on the GPU (stream/device/event synchronize, synchronous copies)
// from its callback API. This file and cupti_decode.h are the only ones that include CUPTI headers.
//
// How it gets in: the CUDA driver loads the library named by CUDA_INJECTION64_PATH when the
// process initialises CUDA and calls its InitializeInjection(). The preload constructor points
// that variable here (unless the user chose another tool), so a process without CUDA never loads
// CUPTI at all. libcupti is dlopen'ed at that moment, so libstallscope.so has no link-time
// dependency on CUDA. Any failure prints one line and leaves the rest of the recording on.
//
// Time: CUPTI is given CLOCK_MONOTONIC (cuptiActivityRegisterTimestampCallback), so GPU records
// arrive on the clock the drainer converts host events to: a kernel and the next() wait before it
// line up.
//
// What: STALLSCOPE_GPU (`stallscope run --gpu`, gpu_choice.h) picks the record kinds and whether
// the callback API is used. One CUPTI client per process: while this layer runs, torch.profiler's
// CUDA activity records nothing (docs/decisions.md); --gpu off leaves CUPTI to it.
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "collector/clock.h"
#include "collector/collector.h"
#include "collector/cupti_decode.h"
#include "collector/gpu_choice.h"
#include "collector/gpu_hooks.h"
#include "common/vocabulary.h"
#include "stallscope/stallscope.h"

namespace stallscope {

namespace {

// The fields every GPU-work record has under the same names.
template <typename Record>
void common_fields(const Record* r, GpuActivity* out) {
  out->device = r->deviceId;
  out->context = r->contextId;
  out->stream = r->streamId;
  out->correlation = r->correlationId;
  out->start_ns = r->start;
  out->end_ns = r->end;
}

}  // namespace

bool cupti_decode(const CUpti_Activity* record, GpuActivity* out) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      out->kind = GpuActivityKind::kKernel;
      common_fields(k, out);
      out->name = k->name;
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      out->kind = GpuActivityKind::kMemcpy;
      common_fields(m, out);
      out->bytes = m->bytes;
      out->copy_kind = m->copyKind;
      out->src_kind = m->srcKind;
      out->dst_kind = m->dstKind;
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      out->kind = GpuActivityKind::kMemset;
      common_fields(m, out);
      out->bytes = m->bytes;
      out->dst_kind = static_cast<uint8_t>(m->memoryKind);
      return true;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      // No device id on a synchronisation record: it happens on the host.
      const auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
      out->kind = GpuActivityKind::kSync;
      out->context = s->contextId;
      out->stream = s->streamId == CUPTI_SYNCHRONIZATION_INVALID_VALUE ? 0 : s->streamId;
      out->correlation = s->correlationId;
      out->start_ns = s->start;
      out->end_ns = s->end;
      out->sync_type = static_cast<uint8_t>(s->type);
      return true;
    }
    default: return false;
  }
}

const char* blocking_call_name(CUpti_CallbackId cbid) {
  // The vocabulary's names are string literals: their data() ends in '\0'.
  auto name = [](vocab::Event e) { return vocab::name_of(e).data(); };
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000: return name(vocab::Event::kCudaStreamSynchronize);
    case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020: return name(vocab::Event::kCudaDeviceSynchronize);
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020: return name(vocab::Event::kCudaEventSynchronize);
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000: return name(vocab::Event::kCudaMemcpy);
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000: return name(vocab::Event::kCudaMemcpyAsync);
    default: return nullptr;
  }
}

namespace {

// Entry points resolved from libcupti at run time.
struct Cupti {
  CUptiResult (*activity_enable)(CUpti_ActivityKind);
  CUptiResult (*activity_register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
  CUptiResult (*activity_get_next_record)(uint8_t*, size_t, CUpti_Activity**);
  CUptiResult (*activity_flush_all)(uint32_t);
  CUptiResult (*activity_register_timestamp_callback)(CUpti_TimestampCallbackFunc);
  CUptiResult (*activity_get_num_dropped_records)(CUcontext, uint32_t, size_t*);
  CUptiResult (*subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*);
  CUptiResult (*enable_callback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
  CUptiResult (*get_result_string)(CUptiResult, const char**);
};

Cupti g_cupti;
std::atomic<bool> g_cupti_on{false};
std::atomic<uint64_t> g_cupti_dropped{0};
CUpti_SubscriberHandle g_subscriber = nullptr;
constexpr size_t kBufferBytes = 4u << 20;

const char* result_string(CUptiResult r) {
  const char* s = nullptr;
  if (g_cupti.get_result_string != nullptr && g_cupti.get_result_string(r, &s) == CUPTI_SUCCESS && s) return s;
  return "unknown CUPTI error";
}

void say_once(const std::string& msg) {
  static std::atomic<bool> said{false};
  if (!said.exchange(true)) std::fprintf(stderr, "stallscope: %s\n", msg.c_str());
}

// libcupti candidates: the user's choice, the loader's search path, the toolkit, and the copy a
// PyTorch wheel ships beside its CUDA runtime (site-packages/nvidia/cuda_cupti/lib).
std::string torch_bundled_cupti() {
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        const char* name = info->dlpi_name;
        if (name == nullptr) return 0;
        const char* at = std::strstr(name, "/nvidia/");
        if (at == nullptr) return 0;
        std::string base(name, static_cast<size_t>(at - name) + 8);  // ".../nvidia/"
        for (const char* v :
             {"cuda_cupti/lib/libcupti.so.13", "cuda_cupti/lib/libcupti.so.12", "cu13/lib/libcupti.so.13"}) {
          if (::access((base + v).c_str(), R_OK) == 0) {
            *static_cast<std::string*>(data) = base + v;
            return 1;
          }
        }
        return 0;
      },
      &found);
  return found;
}

void* open_cupti(std::string* tried) {
  std::string candidates[8];
  int n = 0;
  if (const char* env = std::getenv("STALLSCOPE_CUPTI"); env != nullptr && *env) candidates[n++] = env;
  candidates[n++] = "libcupti.so";
  candidates[n++] = "libcupti.so.13";
  candidates[n++] = "libcupti.so.12";
  candidates[n++] = torch_bundled_cupti();
  candidates[n++] = "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so";
  candidates[n++] = "/usr/local/cuda/lib64/libcupti.so";
  for (int i = 0; i < n; ++i) {
    if (candidates[i].empty()) continue;
    if (void* h = ::dlopen(candidates[i].c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    *tried += (tried->empty() ? "" : ", ") + candidates[i];
  }
  return nullptr;
}

uint64_t CUPTIAPI timestamp() { return monotonic_ns(); }

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (g_cupti.activity_get_next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
    GpuActivity a;
    if (cupti_decode(record, &a)) record_gpu_activity(a);
  }
  size_t dropped = 0;
  if (g_cupti.activity_get_num_dropped_records(context, stream, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    g_cupti_dropped.fetch_add(dropped);
  }
  std::free(buffer);
}

void CUPTIAPI api_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API) return;
  const char* name = blocking_call_name(cbid);
  if (name == nullptr) return;
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  if (info->callbackSite == CUPTI_API_ENTER) {
    emit(EventKind::kSpanBegin, intern_cached(name), info->correlationId, 0, 0, kFlagArg0);
  } else {
    emit(EventKind::kSpanEnd, 0, 0, 0, 0, 0);
  }
}

void flush_all_at_exit(int, void*) {
  if (g_cupti_on.load()) g_cupti.activity_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

// CUPTI hands completed buffers over only when they fill or on a flush: flush every 100 ms so
// that the live view sees GPU activity.
void flusher() {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (g_cupti_on.load()) g_cupti.activity_flush_all(0);
  }
}

template <typename F>
bool resolve(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(::dlsym(lib, name));
  return *out != nullptr;
}

int start_cupti() {
  if (g_generation.load() == 0) return 1;  // not recording: nothing to do, let CUDA go on
  const GpuChoice choice = gpu_choice_from_env();
  std::string tried;
  void* lib = open_cupti(&tried);
  if (lib == nullptr) {
    say_once("CUPTI (libcupti) not found (tried " + tried +
             "); GPU activity is not recorded. Set STALLSCOPE_CUPTI=/path/to/libcupti.so");
    return 1;
  }
  Cupti& c = g_cupti;
  if (!resolve(lib, "cuptiActivityEnable", &c.activity_enable) ||
      !resolve(lib, "cuptiActivityRegisterCallbacks", &c.activity_register_callbacks) ||
      !resolve(lib, "cuptiActivityGetNextRecord", &c.activity_get_next_record) ||
      !resolve(lib, "cuptiActivityFlushAll", &c.activity_flush_all) ||
      !resolve(lib, "cuptiActivityRegisterTimestampCallback", &c.activity_register_timestamp_callback) ||
      !resolve(lib, "cuptiActivityGetNumDroppedRecords", &c.activity_get_num_dropped_records) ||
      !resolve(lib, "cuptiSubscribe", &c.subscribe) || !resolve(lib, "cuptiEnableCallback", &c.enable_callback) ||
      !resolve(lib, "cuptiGetResultString", &c.get_result_string)) {
    say_once("this libcupti lacks functions stallscope needs; GPU activity is not recorded");
    return 1;
  }
  CUptiResult r = c.activity_register_timestamp_callback(timestamp);
  if (r != CUPTI_SUCCESS) {
    say_once(std::string("CUPTI refused the timestamp callback (") + result_string(r) +
             "); GPU activity is not recorded");
    return 1;
  }
  r = c.activity_register_callbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) {
    say_once(std::string("another tool holds CUPTI (") + result_string(r) +
             "); GPU activity is not recorded, everything else is");
    return 1;
  }
  for (auto [k, on] :
       {std::pair{CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, choice.kernel},
        std::pair{CUPTI_ACTIVITY_KIND_MEMCPY, choice.memcpy}, std::pair{CUPTI_ACTIVITY_KIND_MEMSET, choice.memset},
        std::pair{CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, choice.sync}}) {
    if (!on) continue;
    r = c.activity_enable(k);
    if (r != CUPTI_SUCCESS) say_once(std::string("CUPTI activity kind not enabled: ") + result_string(r));
  }
  g_cupti_on.store(true);
  // The blocking host calls, as spans on the calling thread (left out with --gpu without "calls").
  r = choice.calls ? c.subscribe(&g_subscriber, api_callback, nullptr) : CUPTI_SUCCESS;
  if (choice.calls && r == CUPTI_SUCCESS) {
    for (CUpti_CallbackId id :
         {CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
          CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000,
          CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020,
          CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000,
          CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000}) {
      c.enable_callback(1, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id);
    }
  } else if (choice.calls) {
    say_once(std::string("another tool holds the CUPTI callback API (") + result_string(r) +
             "); host synchronisations are not recorded, GPU activity is");
  }
  ::on_exit(flush_all_at_exit, nullptr);
  std::thread(flusher).detach();
  return 1;
}

}  // namespace

bool cuda_injection_available() { return true; }

bool cupti_capture_on() { return g_cupti_on.load(); }

}  // namespace stallscope

// Called by the CUDA driver during cuInit when CUDA_INJECTION64_PATH names this library.
extern "C" STALLSCOPE_API int InitializeInjection(void) {
  try {
    return stallscope::start_cupti();
  } catch (...) {
    return 1;
  }
}
