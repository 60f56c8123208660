// A Source: a dataset the reference loader reads natively, sample by sample, straight into the
// batch buffer. The pipeline (pipeline.h) asks a source for the layout of one sample (its fields)
// and then, from its worker threads, for sample i written at the place sample i has in the batch.
// Sources: in-memory arrays (array_source.h), memory-mapped .npy files (npy_source.h), JPEG images
// in an ImageFolder tree or in WebDataset tar shards (jpeg_source.h).
//
// Rules every source follows:
//  - read() is called from many threads at once, for different indices; it must not keep state
//    between calls that another thread can see, except caches it guards itself;
//  - read() writes exactly the bytes fields() promises, and nothing else;
//  - randomness (crops, flips) comes only from `rng`, which the pipeline seeds from (seed, epoch,
//    index): the same sample gets the same augmentation whichever thread reads it, so a run is
//    reproducible and a resumed run continues exactly;
//  - a failure is a Status whose message names the file (or array) and the sample index; no
//    exception leaves read().
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace stallscope::loader {

enum class DType : uint8_t { kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kFloat32, kFloat64, kBool };
size_t dtype_size(DType t);
const char* dtype_name(DType t);  // numpy's names: "uint8", "float32", ...

// One field of a sample (a tensor of a TensorDataset, an image, a label).
struct Field {
  std::string name;  // "0", "1" for unnamed fields; "image", "label"
  DType dtype = DType::kUInt8;
  std::vector<int64_t> shape;  // of one sample (the batch adds a leading dimension)
  size_t bytes() const;        // of one sample
};

// Where the time of one read() went, for the stage spans (dl.read, dl.decode, dl.augment).
struct StageTimes {
  uint64_t read_ns = 0, decode_ns = 0, augment_ns = 0;
};

// A small counter-based generator (splitmix64): cheap to seed per sample, the same sequence on
// every platform (std:: distributions are not).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n), n > 0 (Lemire's method without the rejection step's bias issue:
  // n is far below 2^32 here).
  uint64_t below(uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }

 private:
  uint64_t state_;
};

// The seed of sample `index` in `epoch` of a run seeded `seed`.
uint64_t sample_seed(uint64_t seed, int64_t epoch, int64_t index);

class Source {
 public:
  virtual ~Source() = default;
  virtual int64_t size() const = 0;
  virtual const std::vector<Field>& fields() const = 0;
  // Writes sample `index` (0 <= index < size()) into dst[f] for each field f, each holding
  // fields()[f].bytes() bytes. Thread-safe for distinct calls.
  virtual Status read(int64_t index, std::span<std::byte* const> dst, Rng& rng, StageTimes* times) const = 0;
  // What sample `index` is, for error messages: "train/cat/001.jpg", "x.npy row 17".
  virtual std::string describe(int64_t index) const = 0;
  // The source's kind and settings for the loader's dl.config document ("npy", "image_folder"...).
  virtual std::string kind() const = 0;
};

}  // namespace stallscope::loader
