// CUPTI activity records -> GpuActivity; the callback ids of host calls that block on the GPU.
// Separate from cupti_source.cc so that tests can feed synthetic CUPTI records through the same
// decoding that real ones take.
#pragma once

#include <cupti.h>

#include "collector/gpu_activity.h"

namespace stallscope {

// Fills `out` from a kernel, memcpy, memset or synchronization record; false for other kinds.
bool cupti_decode(const CUpti_Activity* record, GpuActivity* out);

// The span name ("cuda.cudaStreamSynchronize", ...) of a runtime API call that blocks the host
// on the GPU, or nullptr for calls that are not recorded.
const char* blocking_call_name(CUpti_CallbackId cbid);

}  // namespace stallscope
