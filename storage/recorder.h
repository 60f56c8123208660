// A recording in progress: the session database writer, the drainer and the thread that drains
// every ~100 ms. The `stallscope run` launcher and an in-process session (ss_session_start) both
// use it. If the database fails (disk full, file removed), recording stops with one message on
// stderr and the training goes on; the collector then drops and counts events.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "collector/arena.h"
#include "common/status.h"
#include "storage/ingest.h"
#include "storage/writer.h"

namespace stallscope {

class Recorder {
 public:
  static inline constexpr int kDefaultIntervalMs = 100;
  static inline constexpr int kSampleIntervalMs = 100;  // /proc sampler, 10 Hz
  static inline constexpr int kFillCheckMs = 10;        // between drains: is a ring a quarter full?

  // Creates the database at `path` and starts draining `arena` every `interval_ms`.
  static Result<std::unique_ptr<Recorder>> start(Arena* arena, const std::string& path,
                                                 const std::map<std::string, std::string>& meta,
                                                 int interval_ms = kDefaultIntervalMs);
  ~Recorder();

  void set_exit_status(int pid, std::optional<int> exit_code, std::optional<int> exit_signal);
  // Stops the drain thread, drains one last time and closes the database. Idempotent.
  Status stop();
  // Asks the drain thread for an immediate drain (async-signal-safe).
  void wake();
  // Final drain from a context that must not join threads (a signal handler's helper): asks the
  // drain thread to finish and waits up to `timeout_ms` for it. Async-signal-safe.
  bool finish_from_signal(int timeout_ms);

  IngestStats stats() const;
  const std::string& path() const { return path_; }
  bool failed() const { return failed_.load(); }
  pid_t thread_tid() const { return thread_tid_.load(); }

 private:
  Recorder() = default;
  void loop();
  void sample_loop();
  void spill_loop();
  void fail(const Status& s);

  Arena* arena_ = nullptr;
  std::string path_;
  int interval_ms_ = kDefaultIntervalMs;
  std::unique_ptr<Writer> writer_;
  std::unique_ptr<Ingest> ingest_;
  std::thread thread_;
  std::thread sampler_;
  // While a drain runs, this thread gives the rings' space back every kFillCheckMs (Ingest::spill):
  // a drain held up by the disk let the rings fill and drop events (a 100-ms sync: 33,000 of 240,000).
  // It sleeps between drains.
  std::thread spiller_;
  std::mutex spill_mu_;
  std::condition_variable spill_cv_;
  bool draining_ = false;            // guarded by spill_mu_
  bool spill_stop_ = false;          // guarded by spill_mu_
  std::vector<ProcSample> samples_;  // guarded by g_exit_mu in recorder.cc
  int wake_pipe_[2] = {-1, -1};
  std::atomic<bool> stopping_{false};
  // The sampler sleeps on this between samples; stop() wakes it (a thread woken 10 times per
  // sample to look at stopping_ took cores from the training 90 times a second for nothing).
  std::mutex sampler_mu_;
  std::condition_variable sampler_cv_;
  std::atomic<bool> finished_{false};
  std::atomic<bool> failed_{false};
  std::atomic<bool> stopped_{false};
  std::atomic<pid_t> thread_tid_{0};
  std::map<int, std::pair<std::optional<int>, std::optional<int>>> exits_;
  mutable std::atomic<uint64_t> spans_{0}, events_{0}, dropped_{0};
  Status final_status_;
};

}  // namespace stallscope
