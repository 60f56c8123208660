// GPU-side capture in a build without the CUDA toolkit: nothing is available.
#include "collector/gpu_hooks.h"

namespace stallscope {

bool nvtx_injection_available() { return false; }
bool cuda_injection_available() { return false; }
bool cupti_capture_on() { return false; }

}  // namespace stallscope
