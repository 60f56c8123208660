// What this build can capture on the GPU side. Builds with the CUDA toolkit compile
// nvtx_injection.cc (and the CUPTI layer); builds without it compile gpu_hooks_none.cc instead,
// so the rest of the code asks instead of using #ifdef.
#pragma once

namespace stallscope {

// True when libstallscope.so can act as an NVTX injection library (InitializeInjectionNvtx2).
bool nvtx_injection_available();
// True when libstallscope.so can be the CUDA injection library (InitializeInjection, CUPTI).
bool cuda_injection_available();
// True once stallscope's CUPTI capture runs in this process (it then holds CUPTI, which one client
// per process may use).
bool cupti_capture_on();

}  // namespace stallscope
