// The CUDA runtime through dlopen; see cuda_runtime.h. Return codes are cudaError_t values
// (0: cudaSuccess); the flag values are those of cuda_runtime_api.h, stable since CUDA 4.
#include "loader/cuda_runtime.h"

#include <dlfcn.h>

#include <cstdlib>
#include <type_traits>
#include <vector>

namespace stallscope::loader {
namespace {

constexpr unsigned kHostAllocPortable = 0x01;
constexpr unsigned kEventDisableTiming = 0x02;

// Newest first: a process holds at most one of them in practice.
const char* const kSonames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"};

}  // namespace

const CudaRuntime& CudaRuntime::get() {
  static const CudaRuntime runtime;
  return runtime;
}

CudaRuntime::CudaRuntime() {
  void* handle = nullptr;
  for (const char* name : kSonames) {
    handle = dlopen(name, RTLD_NOW | RTLD_NOLOAD);
    if (handle != nullptr) {
      path_ = name;
      break;
    }
  }
  if (handle == nullptr) {
    std::vector<std::string> names;
    if (const char* env = std::getenv("STALLSCOPE_CUDART"); env != nullptr && *env != '\0') names.push_back(env);
    for (const char* name : kSonames) names.push_back(name);
    for (const std::string& name : names) {
      handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle != nullptr) {
        path_ = name;
        break;
      }
    }
  }
  if (handle == nullptr) {
    error_ = "the CUDA runtime (libcudart.so) cannot be loaded";
    return;
  }
  bool all = true;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
    if (fn == nullptr) all = false;
  };
  sym(host_alloc_, "cudaHostAlloc");
  sym(free_host_, "cudaFreeHost");
  sym(get_device_count_, "cudaGetDeviceCount");
  sym(get_device_, "cudaGetDevice");
  sym(set_device_, "cudaSetDevice");
  sym(event_create_, "cudaEventCreateWithFlags");
  sym(event_record_, "cudaEventRecord");
  sym(event_synchronize_, "cudaEventSynchronize");
  sym(event_destroy_, "cudaEventDestroy");
  sym(get_error_string_, "cudaGetErrorString");
  if (!all) {
    error_ = path_ + " lacks functions the loader needs";
    return;
  }
  int count = 0;
  const int rc = get_device_count_(&count);
  if (rc != 0 || count < 1) {
    error_ =
        std::string("no CUDA device (cudaGetDeviceCount: ") + (rc != 0 ? get_error_string_(rc) : "0 devices") + ")";
  }
}

Status CudaRuntime::check(int code, const char* what) const {
  if (code == 0) return Status::Ok();
  return Status::Error(std::string(what) + ": " + (get_error_string_ ? get_error_string_(code) : "CUDA error"));
}

Status CudaRuntime::host_alloc(size_t bytes, void** out) const {
  *out = nullptr;
  if (!available()) return Status::Error(error_);
  return check(host_alloc_(out, bytes, kHostAllocPortable), "cudaHostAlloc");
}

void CudaRuntime::free_host(void* p) const {
  // At process exit the runtime may already be shut down; the memory goes with the process then.
  if (p != nullptr && free_host_ != nullptr) (void)free_host_(p);
}

Status CudaRuntime::record_event(int device, uintptr_t stream, uintptr_t* event) const {
  *event = 0;
  if (!available()) return Status::Error(error_);
  int previous = -1;
  Status s = check(get_device_(&previous), "cudaGetDevice");
  if (!s.ok()) return s;
  if (previous != device) {
    s = check(set_device_(device), "cudaSetDevice");
    if (!s.ok()) return s;
  }
  void* ev = nullptr;
  s = check(event_create_(&ev, kEventDisableTiming), "cudaEventCreateWithFlags");
  if (s.ok()) {
    s = check(event_record_(ev, reinterpret_cast<void*>(stream)), "cudaEventRecord");
    if (!s.ok()) (void)event_destroy_(ev);  // the record's error is the one to report
  }
  if (previous != device) (void)set_device_(previous);  // put the caller's device back; s says what failed
  if (s.ok()) *event = reinterpret_cast<uintptr_t>(ev);
  return s;
}

Status CudaRuntime::synchronize_event(uintptr_t event) const {
  if (!available()) return Status::Error(error_);
  return check(event_synchronize_(reinterpret_cast<void*>(event)), "cudaEventSynchronize");
}

void CudaRuntime::destroy_event(uintptr_t event) const {
  if (event != 0 && event_destroy_ != nullptr) (void)event_destroy_(reinterpret_cast<void*>(event));
}

}  // namespace stallscope::loader
