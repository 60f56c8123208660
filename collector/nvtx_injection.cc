// NVTX injection: libstallscope.so is an NVTX v3 injection library. The NVTX code compiled into
// an application (torch.cuda.nvtx, NCCL, cuDNN, user code) loads the library named by
// NVTX_INJECTION64_PATH at its first NVTX call and calls InitializeInjectionNvtx2, which fills
// NVTX's function tables with the handlers below. The preload constructor points
// NVTX_INJECTION64_PATH at this library when it is unset, so LD_PRELOAD alone is enough.
//
// What is recorded (docs/events.md):
//   push/pop ranges  -> spans named by the message, arg0 = domain name id (0: default domain),
//                       arg1 = category
//   start/end ranges -> instants `nvtx.start` (arg0 = range id, arg1 = message id, arg2 = domain id)
//                       and `nvtx.end` (arg0 = range id); they may cross threads
//   marks            -> instants named by the message, arg0 = domain id, arg1 = category
//   nvtxNameOsThread -> the thread's name, when it names the calling thread
// This is the only file that includes NVTX headers.
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <cwchar>
#include <string>

#include "collector/collector.h"
#include "collector/gpu_hooks.h"
#include "common/vocabulary.h"
#include "stallscope/stallscope.h"

namespace stallscope {
namespace {

__thread int t_depth = 0;  // NVTX push/pop return the nesting level

std::string narrow(const wchar_t* w) {
  std::string out;
  if (w == nullptr) return out;
  for (; *w; ++w) out.push_back(*w < 0x80 ? static_cast<char>(*w) : '?');
  return out;
}

uint32_t handle_id(const void* handle) { return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(handle)); }

uint32_t message_id(const nvtxEventAttributes_t* a) {
  if (a == nullptr) return intern_cached("(nvtx)");
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return intern_cached(a->message.ascii);
    case NVTX_MESSAGE_TYPE_UNICODE: return intern_cached(narrow(a->message.unicode).c_str());
    case NVTX_MESSAGE_TYPE_REGISTERED: return handle_id(a->message.registered);
    default: return intern_cached("(nvtx)");
  }
}

int32_t category(const nvtxEventAttributes_t* a) { return a != nullptr ? static_cast<int32_t>(a->category) : 0; }

std::atomic<uint64_t> g_next_range{1};

// ---- handlers ---------------------------------------------------------------------------------

void NVTX_API mark_in(uint32_t domain, const nvtxEventAttributes_t* a) {
  emit(EventKind::kInstant, message_id(a), domain, category(a), 0, kFlagArg0 | kFlagArg1);
}
void NVTX_API mark_ex(const nvtxEventAttributes_t* a) { mark_in(0, a); }
void NVTX_API mark_a(const char* m) { emit(EventKind::kInstant, intern_cached(m), 0, 0, 0, kFlagArg0 | kFlagArg1); }
void NVTX_API mark_w(const wchar_t* m) { mark_a(narrow(m).c_str()); }

nvtxRangeId_t range_start_in(uint32_t domain, uint32_t msg) {
  const uint64_t id = g_next_range.fetch_add(1, std::memory_order_relaxed);
  emit(EventKind::kInstant, intern_cached(vocab::name_of(vocab::Event::kNvtxStart).data()), static_cast<int64_t>(id),
       static_cast<int32_t>(msg), static_cast<int32_t>(domain), kFlagArgs);
  return id;
}
nvtxRangeId_t NVTX_API range_start_ex(const nvtxEventAttributes_t* a) { return range_start_in(0, message_id(a)); }
nvtxRangeId_t NVTX_API range_start_a(const char* m) { return range_start_in(0, intern_cached(m)); }
nvtxRangeId_t NVTX_API range_start_w(const wchar_t* m) { return range_start_in(0, intern_cached(narrow(m).c_str())); }
void NVTX_API range_end(nvtxRangeId_t id) {
  emit(EventKind::kInstant, intern_cached(vocab::name_of(vocab::Event::kNvtxEnd).data()), static_cast<int64_t>(id), 0,
       0, kFlagArg0);
}

int push_in(uint32_t domain, uint32_t msg, int32_t cat) {
  emit(EventKind::kSpanBegin, msg, domain, cat, 0, kFlagArg0 | kFlagArg1);
  return t_depth++;
}
int NVTX_API push_ex(const nvtxEventAttributes_t* a) { return push_in(0, message_id(a), category(a)); }
int NVTX_API push_a(const char* m) { return push_in(0, intern_cached(m), 0); }
int NVTX_API push_w(const wchar_t* m) { return push_in(0, intern_cached(narrow(m).c_str()), 0); }
int NVTX_API pop() {
  if (t_depth <= 0) return -1;  // NVTX: an unmatched pop is an error, reported as negative
  emit(EventKind::kSpanEnd, 0, 0, 0, 0, 0);
  return --t_depth;
}

void NVTX_API name_category_a(uint32_t, const char*) {}
void NVTX_API name_category_w(uint32_t, const wchar_t*) {}
void NVTX_API name_os_thread_a(uint32_t tid, const char* name) {
  if (static_cast<long>(tid) == ::syscall(SYS_gettid)) ss_thread_name(name);
}
void NVTX_API name_os_thread_w(uint32_t tid, const wchar_t* name) { name_os_thread_a(tid, narrow(name).c_str()); }

// Domains and registered strings are handed out as string ids disguised as handles.
void NVTX_API d_mark_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) { mark_in(handle_id(d), a); }
nvtxRangeId_t NVTX_API d_range_start_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return range_start_in(handle_id(d), message_id(a));
}
void NVTX_API d_range_end(nvtxDomainHandle_t, nvtxRangeId_t id) { range_end(id); }
int NVTX_API d_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return push_in(handle_id(d), message_id(a), category(a));
}
int NVTX_API d_pop(nvtxDomainHandle_t) { return pop(); }
nvtxResourceHandle_t NVTX_API d_resource_create(nvtxDomainHandle_t, nvtxResourceAttributes_t*) { return nullptr; }
void NVTX_API d_resource_destroy(nvtxResourceHandle_t) {}
void NVTX_API d_name_category_a(nvtxDomainHandle_t, uint32_t, const char*) {}
void NVTX_API d_name_category_w(nvtxDomainHandle_t, uint32_t, const wchar_t*) {}
nvtxStringHandle_t NVTX_API d_register_string_a(nvtxDomainHandle_t, const char* s) {
  return reinterpret_cast<nvtxStringHandle_t>(static_cast<uintptr_t>(intern_cached(s)));
}
nvtxStringHandle_t NVTX_API d_register_string_w(nvtxDomainHandle_t d, const wchar_t* s) {
  return d_register_string_a(d, narrow(s).c_str());
}
nvtxDomainHandle_t NVTX_API d_create_a(const char* name) {
  return reinterpret_cast<nvtxDomainHandle_t>(static_cast<uintptr_t>(intern_cached(name)));
}
nvtxDomainHandle_t NVTX_API d_create_w(const wchar_t* name) { return d_create_a(narrow(name).c_str()); }
void NVTX_API d_destroy(nvtxDomainHandle_t) {}
void NVTX_API initialize(const void*) {}

template <typename F>
void install(NvtxFunctionTable table, unsigned size, unsigned slot, F fn) {
  if (slot < size && table[slot] != nullptr) *table[slot] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

}  // namespace

bool nvtx_injection_available() { return true; }

}  // namespace stallscope

extern "C" STALLSCOPE_API int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  using namespace stallscope;
  if (get_export_table == nullptr) return 0;
  const auto* cb = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (cb == nullptr || cb->struct_size < sizeof(NvtxExportTableCallbacks)) return 0;
  NvtxFunctionTable t = nullptr;
  unsigned n = 0;
  if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &n) && t != nullptr) {
    install(t, n, NVTX_CBID_CORE_MarkEx, mark_ex);
    install(t, n, NVTX_CBID_CORE_MarkA, mark_a);
    install(t, n, NVTX_CBID_CORE_MarkW, mark_w);
    install(t, n, NVTX_CBID_CORE_RangeStartEx, range_start_ex);
    install(t, n, NVTX_CBID_CORE_RangeStartA, range_start_a);
    install(t, n, NVTX_CBID_CORE_RangeStartW, range_start_w);
    install(t, n, NVTX_CBID_CORE_RangeEnd, range_end);
    install(t, n, NVTX_CBID_CORE_RangePushEx, push_ex);
    install(t, n, NVTX_CBID_CORE_RangePushA, push_a);
    install(t, n, NVTX_CBID_CORE_RangePushW, push_w);
    install(t, n, NVTX_CBID_CORE_RangePop, pop);
    install(t, n, NVTX_CBID_CORE_NameCategoryA, name_category_a);
    install(t, n, NVTX_CBID_CORE_NameCategoryW, name_category_w);
    install(t, n, NVTX_CBID_CORE_NameOsThreadA, name_os_thread_a);
    install(t, n, NVTX_CBID_CORE_NameOsThreadW, name_os_thread_w);
  } else {
    return 0;
  }
  if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n) && t != nullptr) {
    install(t, n, NVTX_CBID_CORE2_DomainMarkEx, d_mark_ex);
    install(t, n, NVTX_CBID_CORE2_DomainRangeStartEx, d_range_start_ex);
    install(t, n, NVTX_CBID_CORE2_DomainRangeEnd, d_range_end);
    install(t, n, NVTX_CBID_CORE2_DomainRangePushEx, d_push_ex);
    install(t, n, NVTX_CBID_CORE2_DomainRangePop, d_pop);
    install(t, n, NVTX_CBID_CORE2_DomainResourceCreate, d_resource_create);
    install(t, n, NVTX_CBID_CORE2_DomainResourceDestroy, d_resource_destroy);
    install(t, n, NVTX_CBID_CORE2_DomainNameCategoryA, d_name_category_a);
    install(t, n, NVTX_CBID_CORE2_DomainNameCategoryW, d_name_category_w);
    install(t, n, NVTX_CBID_CORE2_DomainRegisterStringA, d_register_string_a);
    install(t, n, NVTX_CBID_CORE2_DomainRegisterStringW, d_register_string_w);
    install(t, n, NVTX_CBID_CORE2_DomainCreateA, d_create_a);
    install(t, n, NVTX_CBID_CORE2_DomainCreateW, d_create_w);
    install(t, n, NVTX_CBID_CORE2_DomainDestroy, d_destroy);
    install(t, n, NVTX_CBID_CORE2_Initialize, initialize);
  }
  return 1;
}
