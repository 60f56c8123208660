// What GPU-side capture a session asks for: `stallscope run --gpu SPEC`, passed to the program
// as STALLSCOPE_GPU. SPEC is "off", "all", "light", or a comma list of kernel, memcpy, memset,
// sync, calls. "light" uses no CUPTI: CUDA events at the bounds of next() (gpu_light.h).
#pragma once

#include <string>
#include <string_view>

namespace stallscope {

struct GpuChoice {
  bool kernel = true;  // CUPTI kernel records
  bool memcpy = true;  // copies: bytes, direction, pinned or pageable
  bool memset = true;
  bool sync = true;    // CUPTI synchronization records (host waits on the GPU)
  bool calls = true;   // the callback API: blocking runtime calls as host spans
  bool light = false;  // light mode: no CUPTI, CUDA events at next() (gpu_light.h)
  // No CUPTI: CUDA_INJECTION64_PATH is left alone (true for "off" and "light").
  bool off() const { return !kernel && !memcpy && !memset && !sync && !calls; }
};

inline constexpr const char* kGpuChoiceHelp = "off, all, light, or a comma list of kernel, memcpy, memset, sync, calls";

// Parses SPEC (empty: all). False, with the offending word in *bad, for a word it does not know
// or an empty list item; *out then holds the words it did know.
bool parse_gpu_choice(std::string_view spec, GpuChoice* out, std::string* bad);

// The choice in STALLSCOPE_GPU as the process started (unset: all), read at the first call; an
// unparsable value gives what it could parse.
GpuChoice gpu_choice_from_env();

}  // namespace stallscope
