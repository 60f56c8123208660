// A Source over .npy files, one per field (an array of images and one of labels), memory-mapped:
// a file larger than RAM works, the kernel pages rows in as they are read and drops them under
// pressure; nothing reads a file whole. Sample i of a field is row i of its file, one memcpy from
// the mapping into the batch buffer.
//
// Accepted: format versions 1.0, 2.0 and 3.0; C order; little-endian or single-byte dtypes bool,
// int8/16/32/64, uint8, float16/32/64; at least one dimension; all files of the same length.
// Anything else — a malformed header, Fortran order, big-endian, an unknown or unsupported dtype,
// fewer data bytes than the shape needs — is refused at open with a one-line message naming the
// file. A file truncated after it was opened is outside this check: reading its missing rows
// raises SIGBUS, as with numpy.memmap.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "loader/source.h"

namespace stallscope::loader {

// A parsed .npy header.
struct NpyHeader {
  int major = 1, minor = 0;
  DType dtype = DType::kUInt8;
  std::vector<int64_t> shape;
  size_t data_offset = 0;  // where the array's bytes begin
};
// Parses the first bytes of a .npy file (at least the whole header). The message says what is
// wrong, without the file's name.
Result<NpyHeader> parse_npy_header(std::string_view bytes);

class NpySource : public Source {
 public:
  // Opens and maps every file. The kernel's read-around is left on even for shuffled reading:
  // on a cold 400 MB file it made shuffled rows of 3 kB 5-8x faster than MADV_RANDOM
  // (docs/decisions.md).
  static Result<std::unique_ptr<NpySource>> open(const std::vector<std::string>& paths);
  ~NpySource() override;

  int64_t size() const override { return size_; }
  const std::vector<Field>& fields() const override { return fields_; }
  Status read(int64_t index, std::span<std::byte* const> dst, Rng& rng, StageTimes* times) const override;
  std::string describe(int64_t index) const override;
  std::string kind() const override { return "npy"; }

 private:
  NpySource() = default;
  struct Mapped {
    std::string path;
    void* base = nullptr;
    size_t length = 0;
    const std::byte* data = nullptr;
    size_t row_bytes = 0;
  };
  int64_t size_ = 0;
  std::vector<Field> fields_;
  std::vector<Mapped> files_;
};

}  // namespace stallscope::loader
