// The small definitions behind source.h: dtype sizes and names, a field's size, and the seed of
// one sample (what makes augmentation reproducible whichever thread reads the sample).
#include "loader/source.h"

namespace stallscope::loader {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kBool: return 1;
    case DType::kInt16:
    case DType::kFloat16: return 2;
    case DType::kInt32:
    case DType::kFloat32: return 4;
    case DType::kInt64:
    case DType::kFloat64: return 8;
  }
  return 1;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kFloat16: return "float16";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kBool: return "bool";
  }
  return "?";
}

size_t Field::bytes() const {
  size_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

namespace {
// splitmix64's finaliser: a bijection on 64 bits whose output bits each depend on every input bit.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace

// Each input goes through the finaliser with its own odd constant added, so (seed, epoch, index)
// triples that differ in one place only still give unrelated seeds. tests/python re-computes this
// in plain Python: change both together.
uint64_t sample_seed(uint64_t seed, int64_t epoch, int64_t index) {
  uint64_t h = mix(seed + 0x9E3779B97F4A7C15ull);
  h = mix(h ^ (static_cast<uint64_t>(epoch) + 0x632BE59BD9B4E019ull));
  h = mix(h ^ (static_cast<uint64_t>(index) + 0x8CB92BA72F3D8DD7ull));
  return h;
}

}  // namespace stallscope::loader
