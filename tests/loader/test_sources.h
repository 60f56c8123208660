// Sources and helpers the loader's tests share: a source whose reads are slow and of varying
// length, that fails at a chosen index, and that records how many reads ran at once; the number
// of threads of this process.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "loader/source.h"

namespace stallscope::loader::testing {

// Sample i: field "index" (int64) = i, field "noise" (uint64) = the first draw of its Rng, field
// "row" (float32 x width) = i + 0.5.
class TestSource : public Source {
 public:
  explicit TestSource(int64_t n, int64_t width = 3) : n_(n) {
    fields_ = {Field{"index", DType::kInt64, {}}, Field{"noise", DType::kInt64, {}},
               Field{"row", DType::kFloat32, {width}}};
  }
  int64_t size() const override { return n_; }
  const std::vector<Field>& fields() const override { return fields_; }
  Status read(int64_t index, std::span<std::byte* const> dst, Rng& rng, StageTimes* times) const override;
  std::string describe(int64_t index) const override { return "test.bin record " + std::to_string(index); }
  std::string kind() const override { return "test"; }

  int64_t fail_at = -1;        // this index fails: "test.bin record I: bad record"
  int64_t delay_us = 0;        // each read sleeps delay_us * (1 + (i * 7) % 5) / 5
  bool throw_at_fail = false;  // throw instead of returning the error
  mutable std::atomic<int> running{0}, max_running{0};
  mutable std::atomic<int64_t> reads{0};

 private:
  int64_t n_;
  std::vector<Field> fields_;
};

// Entries of /proc/self/task.
int thread_count();
// Waits up to 2 s for the thread count to come down to `n` (a joined thread's task entry
// disappears a moment after join returns).
bool threads_back_to(int n);

}  // namespace stallscope::loader::testing
