// The CUDA runtime, loaded at run time: the loader never links CUDA, so one build serves machines
// with and without a GPU. Only this file pair names CUDA functions. It prefers the copy of
// libcudart the process already has (PyTorch's), found by its soname with RTLD_NOLOAD, so that
// streams, events and the current device are those PyTorch uses; else it loads one
// ($STALLSCOPE_CUDART, then the usual sonames). Handles are passed as integers (a cudaStream_t or
// cudaEvent_t is a pointer; PyTorch hands them out as ints).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace stallscope::loader {

class CudaRuntime {
 public:
  // The process's runtime, loaded on first use (thread-safe). Check available().
  static const CudaRuntime& get();

  // Loaded, with every function below, and at least one device.
  bool available() const { return error_.empty(); }
  // Why not: "libcudart.so not found", "no CUDA device (cudaGetDeviceCount: ...)".
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }

  // Page-locked host memory, portable across contexts (cudaHostAlloc, cudaHostAllocPortable).
  Status host_alloc(size_t bytes, void** out) const;
  void free_host(void* p) const;

  // An event without timing on `device`, recorded on `stream` (created here, on the calling
  // thread; the thread's current device is put back afterwards).
  Status record_event(int device, uintptr_t stream, uintptr_t* event) const;
  // Blocks the calling thread until `event` completed.
  Status synchronize_event(uintptr_t event) const;
  void destroy_event(uintptr_t event) const;

 private:
  CudaRuntime();
  Status check(int code, const char* what) const;

  std::string error_, path_;
  using HostAlloc = int (*)(void**, size_t, unsigned);
  using FreeHost = int (*)(void*);
  using GetDeviceCount = int (*)(int*);
  using GetDevice = int (*)(int*);
  using SetDevice = int (*)(int);
  using EventCreateWithFlags = int (*)(void**, unsigned);
  using EventRecord = int (*)(void*, void*);
  using EventSynchronize = int (*)(void*);
  using EventDestroy = int (*)(void*);
  using GetErrorString = const char* (*)(int);
  HostAlloc host_alloc_ = nullptr;
  FreeHost free_host_ = nullptr;
  GetDeviceCount get_device_count_ = nullptr;
  GetDevice get_device_ = nullptr;
  SetDevice set_device_ = nullptr;
  EventCreateWithFlags event_create_ = nullptr;
  EventRecord event_record_ = nullptr;
  EventSynchronize event_synchronize_ = nullptr;
  EventDestroy event_destroy_ = nullptr;
  GetErrorString get_error_string_ = nullptr;
};

}  // namespace stallscope::loader
