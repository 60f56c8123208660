// The reference loader: a Source, the Sampler's epochs, a BufferPool and one Pipeline per epoch,
// behind the calls a DataLoader-like iterator makes (the Python binding is a thin layer over
// this). Epochs: begin_epoch() starts the threads of the next epoch (stopping one still running,
// as a new iter() over a torch DataLoader does), next() hands its batches in order, handed()
// tells the sampler which batch the training loop has received (what state() saves), stop() ends
// the epoch early. Each epoch gets a token; calls with the token of an epoch that was replaced or
// stopped see the end of that epoch, never the batches of another.
//
// Threads: the consumer calls come from the training thread; stop() may come from any thread
// (an iterator's finaliser, an exit handler).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/status.h"
#include "loader/buffer_pool.h"
#include "loader/copy_watcher.h"
#include "loader/events.h"
#include "loader/pipeline.h"
#include "loader/sampler.h"
#include "loader/source.h"

namespace stallscope::loader {

struct LoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;
  uint64_t seed = 0;
  bool drop_last = false;
  int64_t rank = 0;
  int64_t world_size = 1;
  int threads = 0;   // 0: default_threads()
  int prefetch = 0;  // 0: default_prefetch(threads)
  bool pin_memory = false;
  int64_t loader_id = -1;  // L in the events
};

// The loader's default thread count: the usable cores (affinity, cgroup quota) less one for the
// training step, at least 1 (docs/decisions.md).
int default_threads();
// Batches in flight by default: two per thread, as torch's prefetch_factor=2 per worker.
int default_prefetch(int threads);

class Loader {
 public:
  static Result<std::unique_ptr<Loader>> create(std::shared_ptr<const Source> source, const LoaderOptions& options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Events go through the libstallscope.so at `path` once bound (any time; takes effect at the
  // next epoch). False when that library is not loaded in the process.
  bool bind_events(const std::string& library_path);

  // L in the events from the next epoch on (the Python side allocates it when it first records).
  void set_loader_id(int64_t id);

  const Source& source() const { return *source_; }
  const LoaderOptions& options() const { return o_; }  // threads and prefetch resolved
  int64_t dataset_len() const { return source_->size(); }
  int64_t batches_per_epoch() const;
  const BufferPool& pool() const { return *pool_; }

  void set_epoch(int64_t epoch);
  struct EpochStart {
    int64_t epoch = 0;
    int64_t first_batch = 0;  // > 0 when continuing a loaded state
    int64_t token = 0;
  };
  // Stops the epoch in progress, if any, and starts the threads of the next.
  Result<EpochStart> begin_epoch();
  // The next batch of epoch `token` (see Pipeline::next); kEnd when that epoch is not the current one.
  Pipeline::Next next(int64_t token, std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // The training loop has received `batches` batches of epoch `token` (batch indices below it).
  void handed(int64_t token, int64_t batches);
  // Stops epoch `token` (any epoch: -1), joining its threads. Idempotent.
  void stop(int64_t token = -1);

  SamplerState state() const;
  Status load_state(const SamplerState& state);

  // With a device: batch `batch`'s copy from `slot` was enqueued on `stream` of `device`; the slot
  // is held until that copy completed, and the copy is recorded as dl.copy (copy_watcher.h).
  Status watch_copy(const SlotRef& slot, int device, uintptr_t stream, int64_t batch, int64_t bytes);
  // Copies not yet seen completed.
  int64_t copies_pending() const;
  // Tests: fences completed by hand in place of CUDA events (before the first watch_copy).
  void set_fences(std::unique_ptr<Fences> fences);

 private:
  Loader(std::shared_ptr<const Source> source, const LoaderOptions& o, Sampler sampler,
         std::shared_ptr<BufferPool> pool);

  const std::shared_ptr<const Source> source_;
  LoaderOptions o_;
  Events events_;
  const std::shared_ptr<BufferPool> pool_;
  mutable std::mutex watcher_mu_;
  std::unique_ptr<Fences> fences_;        // until the watcher starts
  std::unique_ptr<CopyWatcher> watcher_;  // created at the first watch_copy; before events_ goes

  mutable std::mutex mu_;  // guards what follows; never held while waiting for a batch or joining
  Sampler sampler_;
  std::shared_ptr<Pipeline> pipeline_;
  int64_t token_ = 0;
};

}  // namespace stallscope::loader
