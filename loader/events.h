// The loader's events: the same dl.* vocabulary as the torch DataLoader hooks (docs/events.md,
// "Reference loader"), written through libstallscope's C API when the process records. The
// loader never links the collector: bind() resolves the C API in the copy of libstallscope.so the
// process has loaded (the path the Python side knows, stallscope._native.lib_path); without one,
// every call is a no-op. Names are interned again at each epoch (a session may start or stop
// between epochs; ids belong to a session). The ids are atomics: worker threads read them while
// another thread may re-intern (an epoch that starts while the previous one's threads wind down).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace stallscope::loader {

class Events {
 public:
  // Resolves the C API in the already-loaded library at `library_path` (dlopen RTLD_NOLOAD).
  // False (and no-ops) when it is not loaded or lacks the functions.
  bool bind(const std::string& library_path);
  bool bound() const { return bound_.load(std::memory_order_acquire); }
  // Interns the names for the current session (call at each epoch start, from any thread).
  void intern();
  bool recording() const;

  // Training thread (the Python side writes dl.next, dl.config, dl.epoch_* itself).
  // Loader threads, per batch B of loader L, worker thread W:
  void sent(int64_t loader, int64_t batch, int32_t worker) const;  // dl.sent: B handed to W
  // dl.fetch span. The begin says whether a span was opened; only then is fetch_end() called (the
  // ids may change between the two when a session starts).
  bool fetch_begin(int64_t loader, int64_t batch, int32_t worker) const;
  void fetch_end() const;
  // dl.stages: where the fetch of B went, in microseconds: reading, decoding, augmenting.
  void stages(int64_t read_us, int64_t decode_us, int64_t augment_us) const;
  // dl.collate, empty (ss_span_empty: begun and ended with one timestamp), inside the dl.fetch span: how many samples B
  // holds (the last batch of an epoch may be short). The samples were written in place: there is no collate step.
  void collate(int64_t loader, int64_t batch, int64_t samples) const;
  void put(int64_t loader, int64_t batch, int32_t worker) const;        // dl.put: B assembled
  bool copy_begin(int64_t loader, int64_t batch, int64_t bytes) const;  // dl.copy span (H2D), as fetch
  void copy_end() const;
  void thread_name(const std::string& name) const;

 private:
  using SpanBeginArgs = void (*)(uint32_t, int64_t, int32_t, int32_t);
  using SpanEnd = void (*)();
  using SpanEmpty = void (*)(uint32_t, int64_t, int32_t, int32_t);
  using SpanEndArgs = void (*)(int64_t, int32_t, int32_t);
  using Instant = void (*)(uint32_t, int64_t, int32_t, int32_t);
  using Intern = uint32_t (*)(const char*);
  using ThreadName = void (*)(const char*);
  using IsRecording = int (*)();
  SpanBeginArgs span_begin_args_ = nullptr;
  SpanEnd span_end_ = nullptr;
  SpanEmpty span_empty_ = nullptr;
  SpanEndArgs span_end_args_ = nullptr;
  Instant instant_ = nullptr;
  Intern intern_ = nullptr;
  ThreadName thread_name_ = nullptr;
  IsRecording is_recording_ = nullptr;
  // Interned ids (0: not recording; the C API ignores events named 0).
  std::atomic<uint32_t> sent_{0}, fetch_{0}, stages_{0}, collate_{0}, put_{0}, copy_{0};
  std::atomic<bool> bound_{false};  // set last by bind(): the pointers above are then all set
};

}  // namespace stallscope::loader
