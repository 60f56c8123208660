// Test sources and thread counting; see test_sources.h.
#include "tests/loader/test_sources.h"

#include <dirent.h>

#include <chrono>
#include <cstring>
#include <thread>

namespace stallscope::loader::testing {

Status TestSource::read(int64_t index, std::span<std::byte* const> dst, Rng& rng, StageTimes* times) const {
  const int now = running.fetch_add(1) + 1;
  int seen = max_running.load();
  while (now > seen && !max_running.compare_exchange_weak(seen, now)) {
  }
  reads.fetch_add(1);
  if (delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us * (1 + (index * 7) % 5) / 5));
  running.fetch_sub(1);
  if (index == fail_at) {
    if (throw_at_fail) throw std::runtime_error("test.bin record " + std::to_string(index) + ": thrown");
    return Status::Error("test.bin record " + std::to_string(index) + ": bad record");
  }
  std::memcpy(dst[0], &index, sizeof index);
  const uint64_t noise = rng.next();
  std::memcpy(dst[1], &noise, sizeof noise);
  auto* row = reinterpret_cast<float*>(dst[2]);
  for (int64_t i = 0; i < fields_[2].shape[0]; ++i) row[i] = static_cast<float>(index) + 0.5f;
  if (times != nullptr) times->decode_ns += 1000;  // 1 us "decoding" per sample: shows in dl.stages
  return Status::Ok();
}

int thread_count() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}

bool threads_back_to(int n) {
  for (int i = 0; i < 200; ++i) {
    if (thread_count() <= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return thread_count() <= n;
}

}  // namespace stallscope::loader::testing
