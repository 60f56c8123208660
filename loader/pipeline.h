// One epoch of batches, assembled by N worker threads into pool slots and handed in order.
//
// A worker claims the next batch B (in order; at most `prefetch` batches ahead of the one the
// training loop takes next), takes a slot, and writes each sample of B in place with
// Source::read, seeding its Rng from (seed, epoch, index); then B waits in the ready ring until
// next() takes it. One thread assembles all of B, so its dl.fetch span covers the whole batch.
//
// Errors: the first failing sample fails its batch; no batch after it is claimed, batches before
// it are still handed, and next() returns the error when the training loop reaches that batch
// (the message names the sample index, what the source says, and the batch). Then the threads
// stop. stop() (and the destructor) stops and joins every thread from any state: epoch over,
// loop left early, error; a batch being assembled is abandoned between two samples.
//
// Events (when bound and recording), on the worker thread, per batch: dl.sent (claimed), dl.fetch
// span, dl.stages just before the span's end (inside it), dl.put (ready). Threads are named
// ss-loader-W (W = 0 .. threads-1) for the recording and the OS.
#pragma once

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "common/status.h"
#include "loader/buffer_pool.h"
#include "loader/events.h"
#include "loader/sampler.h"
#include "loader/source.h"

namespace stallscope::loader {

struct PipelineOptions {
  int threads = 1;
  int prefetch = 2;  // batches being assembled or ready, ahead of the training loop
  uint64_t seed = 0;
  int64_t loader_id = -1;          // L in the events
  const Events* events = nullptr;  // may be null; must outlive the pipeline
};

// A batch ready for the training loop: field f's `samples` rows at slot->field(f).
struct Batch {
  int64_t index = -1;   // B within the epoch
  int32_t worker = -1;  // W that assembled it
  int64_t samples = 0;  // batch_size, or fewer for the last batch
  SlotRef slot;
};

class Pipeline {
 public:
  enum class Got { kBatch, kEnd, kError, kTimeout };
  struct Next {
    Got got = Got::kEnd;
    Batch batch;   // kBatch
    Status error;  // kError
  };

  // Starts the threads on plan's batches from plan.first_batch on.
  static Result<std::unique_ptr<Pipeline>> start(std::shared_ptr<const Source> source, std::shared_ptr<BufferPool> pool,
                                                 std::shared_ptr<const EpochPlan> plan, const PipelineOptions& options);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // The next batch in order; blocks until it is ready (or `timeout` passed: kTimeout). kEnd after
  // the last batch, after an error was returned, and once stopped.
  Next next(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // Stops and joins every thread; batches not taken go back to the pool. Idempotent, any thread.
  void stop();

  int64_t epoch() const { return plan_->epoch; }

 private:
  Pipeline(std::shared_ptr<const Source> source, std::shared_ptr<BufferPool> pool,
           std::shared_ptr<const EpochPlan> plan, const PipelineOptions& options);
  void work(int worker);
  Status assemble(int worker, int64_t b, Batch* out, std::vector<std::byte*>* dst);
  Status sample_error(int64_t b, int64_t index, const Status& s) const;

  const std::shared_ptr<const Source> source_;
  const std::shared_ptr<BufferPool> pool_;
  const std::shared_ptr<const EpochPlan> plan_;
  const PipelineOptions o_;
  std::vector<size_t> field_bytes_;

  std::mutex mu_;
  std::condition_variable work_cv_;      // workers: a claim became possible, or stop
  std::condition_variable consumer_cv_;  // next(): a batch is ready, an error, or the threads ended
  int64_t claim_ = 0;                    // next batch to claim
  int64_t handed_ = 0;                   // next batch next() hands
  int64_t end_ = 0;                      // one past the last batch
  std::vector<Batch> ready_;             // ring of `prefetch` batches, by index % prefetch
  bool stop_ = false, failed_ = false, done_ = false;
  int64_t error_batch_ = INT64_MAX;
  Status error_;
  std::atomic<bool> stopping_{false};  // read between samples: abandon a batch being assembled

  std::mutex join_mu_;  // stop() from two threads joins once
  std::vector<std::thread> threads_;
};

}  // namespace stallscope::loader
