// STALLSCOPE_GPU parsing; see gpu_choice.h.
#include "collector/gpu_choice.h"

#include <cstring>

extern char** environ;

namespace stallscope {

bool parse_gpu_choice(std::string_view spec, GpuChoice* out, std::string* bad) {
  *out = GpuChoice{};
  if (spec.empty() || spec == "all") return true;
  GpuChoice c{false, false, false, false, false};  // "off", or the items named
  if (spec == "off" || spec == "light") {
    c.light = spec == "light";
    *out = c;
    return true;
  }
  bool ok = true;
  size_t at = 0;
  for (;;) {
    const size_t comma = spec.find(',', at);
    const std::string_view word =
        spec.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
    if (word == "kernel") {
      c.kernel = true;
    } else if (word == "memcpy") {
      c.memcpy = true;
    } else if (word == "memset") {
      c.memset = true;
    } else if (word == "sync") {
      c.sync = true;
    } else if (word == "calls") {
      c.calls = true;
    } else if (ok) {
      ok = false;
      if (bad != nullptr) *bad = std::string(word);
    }
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  *out = c;
  return ok;
}

// Read from `environ` itself, once: a shell preloaded with the collector (bash, a pyenv shim)
// has its own getenv and setenv, and once our constructor has called its setenv, its getenv no
// longer sees the variables it was started with.
GpuChoice gpu_choice_from_env() {
  static const GpuChoice choice = [] {
    GpuChoice c;
    constexpr char kName[] = "STALLSCOPE_GPU=";
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      if (std::strncmp(*e, kName, sizeof kName - 1) == 0) parse_gpu_choice(*e + sizeof kName - 1, &c, nullptr);
    }
    return c;
  }();
  return choice;
}

}  // namespace stallscope
