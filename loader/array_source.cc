// In-memory arrays gathered by index; see array_source.h.
#include "loader/array_source.h"

#include <cstring>

namespace stallscope::loader {

Result<std::unique_ptr<ArraySource>> ArraySource::create(std::vector<ArrayField> arrays) {
  if (arrays.empty()) return Status::Error("no arrays");
  std::unique_ptr<ArraySource> src(new ArraySource());
  for (size_t i = 0; i < arrays.size(); ++i) {
    ArrayField& a = arrays[i];
    const std::string name = a.name.empty() ? "array " + std::to_string(i) : "array " + a.name;
    if (a.shape.empty()) return Status::Error(name + " has no leading dimension to index samples by (a 0-d array)");
    for (int64_t d : a.shape) {
      if (d < 0) return Status::Error(name + " has a negative dimension");
    }
    if (i == 0) {
      src->size_ = a.shape[0];
    } else if (a.shape[0] != src->size_) {
      return Status::Error("arrays of different lengths: array " + arrays[0].name + " has " +
                           std::to_string(src->size_) + " samples, " + name + " has " + std::to_string(a.shape[0]));
    }
    Field f;
    f.name = a.name.empty() ? std::to_string(i) : a.name;
    f.dtype = a.dtype;
    f.shape.assign(a.shape.begin() + 1, a.shape.end());
    if (a.data == nullptr && a.shape[0] > 0 && f.bytes() > 0) return Status::Error(name + " has no data");
    src->row_bytes_.push_back(f.bytes());
    src->fields_.push_back(std::move(f));
    src->data_.push_back(a.data);
  }
  return src;
}

Status ArraySource::read(int64_t index, std::span<std::byte* const> dst, Rng&, StageTimes*) const {
  if (index < 0 || index >= size_) {
    return Status::Error("array index " + std::to_string(index) + " out of range (" + std::to_string(size_) + ")");
  }
  for (size_t f = 0; f < data_.size(); ++f) {
    const size_t n = row_bytes_[f];
    if (n == 0) continue;  // a field of empty rows: no data pointer to copy from
    std::memcpy(dst[f], data_[f] + static_cast<size_t>(index) * n, n);
  }
  return Status::Ok();
}

std::string ArraySource::describe(int64_t index) const { return "arrays row " + std::to_string(index); }

}  // namespace stallscope::loader
