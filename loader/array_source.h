// A Source over arrays in memory (what a TensorDataset holds, NumPy arrays): one array per field,
// C-contiguous, the leading dimension indexing samples, all of the same length. Sample i of a
// field is one memcpy of its row into the batch buffer. The arrays belong to the caller, who
// keeps them alive (and unchanged) while the source is used; the Python binding holds them.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "loader/source.h"

namespace stallscope::loader {

struct ArrayField {
  std::string name;  // for messages: "0", "1", ... or the caller's names
  DType dtype = DType::kUInt8;
  std::vector<int64_t> shape;  // the whole array's: [samples, ...]
  const std::byte* data = nullptr;
};

class ArraySource : public Source {
 public:
  // Refuses arrays without a leading dimension, of different lengths, or with no data.
  static Result<std::unique_ptr<ArraySource>> create(std::vector<ArrayField> arrays);

  int64_t size() const override { return size_; }
  const std::vector<Field>& fields() const override { return fields_; }
  Status read(int64_t index, std::span<std::byte* const> dst, Rng& rng, StageTimes* times) const override;
  std::string describe(int64_t index) const override;
  std::string kind() const override { return "arrays"; }

 private:
  ArraySource() = default;
  int64_t size_ = 0;
  std::vector<Field> fields_;
  std::vector<const std::byte*> data_;
  std::vector<size_t> row_bytes_;
};

}  // namespace stallscope::loader
