// libFuzzer target: the reference loader's .npy header parser (loader/npy_source.h) on any bytes.
// A header it accepts must describe an array that fits the shape it gives.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "loader/npy_source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto h = stallscope::loader::parse_npy_header(std::string_view(reinterpret_cast<const char*>(data), size));
  if (h.ok()) {
    if (h->data_offset > size) std::abort();  // the header claims bytes it did not read
    for (int64_t d : h->shape) {
      if (d < 0) std::abort();
    }
  }
  return 0;
}
