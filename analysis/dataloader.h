// DataLoader reconstruction: turns the `dl.*` events of a Session (docs/events.md) into loaders,
// epochs, the training loop's next() calls, per-batch lives (sent -> fetch -> put -> recv ->
// handed), worker processes and the queue-depth step functions. Pure function of the Session.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/session.h"
#include "common/json.h"

namespace stallscope::analysis {

// The loader's configuration from its `dl.config` document.
struct LoaderConfig {
  Json doc;  // the document as recorded; null when none was recorded or it did not parse
  std::optional<int64_t> batch_size, num_workers, prefetch_factor, dataset_len, batches_per_epoch;
  std::optional<bool> pin_memory, pin_memory_effective, persistent_workers, in_order, drop_last;
  // start_method: how the workers started (none without workers); worker_start_method: how they
  // would (also recorded for loaders without workers; none in older recordings).
  std::optional<std::string> start_method, worker_start_method, dataset_type, dataset_class, created_at, torch_version;
  // Where batch_size was read ("loader", "batch_sampler"); the framework function that made the
  // loader (Lightning's val_dataloader, HF Trainer's get_train_dataloader...) and the role it
  // implies ("train", "eval"). docs/events.md, "Configuration document".
  std::optional<std::string> batch_size_from, made_by, role_hint;
  // Which loader ran: "torch" (a torch DataLoader; the default when the document does not say),
  // "tuned" (torch's, with settings stallscope chose) or "reference" (stallscope.ReferenceLoader,
  // whose workers are threads of the training process).
  std::string kind = vocab::kLoaderTorch;
};

// One `dl.next` span on the training thread.
struct NextCall {
  int64_t start_ns = 0, end_ns = 0;
  bool ended = true;  // false: still waiting when the recording stopped
  int64_t loader = 0, epoch = 0;
  int64_t batch = -1;  // the batch handed; -1: StopIteration (or unknown)
  bool handed() const { return ended && batch >= 0; }
};

struct EpochInfo {
  int64_t epoch = 0;
  std::optional<int64_t> begin_ns, end_ns;  // dl.epoch_begin / dl.epoch_end
  std::optional<int64_t> num_workers;       // epoch_begin arg2
  std::optional<int64_t> batches_yielded;   // epoch_end arg2
  std::optional<int64_t> first_next_ns;     // start of the epoch's first next() call
  std::optional<int64_t> first_handed_ns;   // end of the epoch's first next() that handed a batch
  std::optional<int64_t> last_next_end_ns;  // end of the epoch's last next() call
  int64_t handed = 0;
  int64_t next_calls = 0;
  int workers_started = 0;  // dl.worker_start instants in this epoch
};

// One batch of one loader and epoch, joined from every event that names it.
struct BatchInfo {
  int64_t loader = 0, epoch = 0, batch = 0;
  std::optional<int64_t> sent_ns, put_ns, recv_ns, handed_ns, fetch_start_ns, fetch_end_ns;
  int32_t worker = -2;  // -1: fetched by the main process; -2: unknown
  int64_t worker_pid = 0;
  int64_t worker_thread = 0;          // threads.id of a loader thread (reference loader); 0 otherwise
  std::optional<int64_t> samples;     // from dl.collate
  std::optional<int64_t> collate_ns;  // the dl.collate span's length, in a worker process
};

// One worker: a process (one `dl.worker_start`), or a loader thread of the training process (the
// reference loader's; thread_id != 0).
struct WorkerInfo {
  int64_t pid = 0;
  int64_t thread_id = 0;  // threads.id of a loader thread; 0 for a worker process
  int64_t loader = 0;
  int32_t worker_id = 0;
  int64_t start_epoch = 0;
  int64_t start_ns = 0;                        // the dl.worker_start instant
  std::optional<int64_t> ready_ns;             // its first dl.worker_ready: the worker loop runs
  std::optional<int64_t> stop_ns;              // dl.worker_stop
  int64_t life_begin_ns = 0, life_end_ns = 0;  // the process's life (processes row) or the above
  std::optional<int64_t> birth_ns;             // its processes row's start (a worker process only)
  std::vector<size_t> fetches;                 // indices into DataLoaderModel::fetches
};

// One `dl.fetch` span: in a worker, or in the main process with num_workers=0.
struct FetchInfo {
  int64_t start_ns = 0, end_ns = 0;
  int64_t loader = 0, epoch = 0, batch = 0;
  int32_t worker = -1;
  int worker_index = -1;  // into DataLoaderModel::workers; -1: main process
  std::optional<int64_t> samples;
  std::optional<int64_t> collate_ns;  // in a worker process: its dl.collate span's length
};

struct LoaderInfo {
  int64_t id = 0;
  bool has_config = false;
  LoaderConfig config;
  std::map<int64_t, EpochInfo> epochs;
  int64_t handed = 0;                                     // next() calls that handed a batch
  int64_t steps = 0;                                      // dl.step instants naming this loader
  std::vector<size_t> batches;                            // indices into DataLoaderModel::batches
  std::vector<size_t> workers;                            // indices into DataLoaderModel::workers
  std::vector<std::pair<int64_t, int64_t>> epoch_starts;  // (dl.epoch_begin ts, epoch), by time
  // Reference loader: where its threads' fetch time went (dl.stages), summed over its batches.
  struct Stages {
    int64_t batches = 0;
    double read_s = 0, decode_s = 0, augment_s = 0;
  } stages;
  // What one batch of it holds (dl.batch, written without workers): tensors and their bytes.
  std::optional<int64_t> batch_tensors, batch_bytes;
  // num_workers from the config, else from the first epoch_begin; nullopt if neither was recorded.
  std::optional<int64_t> num_workers() const;
};

// A piecewise-constant function of time: `value` holds from `ts_ns` until the next point.
struct StepPoint {
  int64_t ts_ns = 0;
  int64_t value = 0;
};
using StepFunction = std::vector<StepPoint>;

struct DataLoaderModel {
  bool seen = false;  // any dl.* event at all
  int64_t train_pid = 0, train_process_id = 0, train_thread_id = 0;
  std::vector<LoaderInfo> loaders;   // by id, of the training process
  std::vector<NextCall> next_calls;  // on the training thread, by start
  std::vector<BatchInfo> batches;
  std::vector<WorkerInfo> workers;  // by start
  std::vector<FetchInfo> fetches;   // by start
  std::vector<std::string> notes;   // what could not be reconstructed, in words
  int64_t steps = 0;                // dl.step instants of the training process (optimizer steps)

  const LoaderInfo* loader(int64_t id) const;
  const BatchInfo* batch(int64_t loader, int64_t epoch, int64_t batch) const;
  // The epoch of `loader` running at `ts_ns`: the latest dl.epoch_begin at or before it (0 if none).
  int64_t epoch_at(int64_t loader, int64_t ts_ns) const;

  struct BatchKey {
    int64_t loader, epoch, batch;
    bool operator==(const BatchKey&) const = default;
  };
  struct BatchKeyHash {
    size_t operator()(const BatchKey& k) const;
  };
  std::unordered_map<BatchKey, size_t, BatchKeyHash> batch_index;
};

DataLoaderModel build_dataloader_model(const Session& s);

// Where `loader` was starting, per epoch (epoch, begin, end), by epoch: from dl.epoch_begin to the
// epoch's first next() (DataLoader.__iter__, where workers are started), and on into that first
// next() until the earliest worker started in the epoch is ready (dl.worker_ready: a spawned
// worker imports torch there) or the first batch is handed, whichever comes first. Epochs without
// a begin or a next() call have none.
struct LoaderStart {
  int64_t epoch = 0, begin_ns = 0, end_ns = 0;
};
std::vector<LoaderStart> loader_starts(const DataLoaderModel& m, const LoaderInfo& loader);

// The LoaderConfig of a `dl.config` document.
LoaderConfig parse_loader_config(const Json& doc);

// A loader's name for people: the framework function that made it, the dataset's class and where
// the user's code made it ("val_dataloader TensorDataset (train.py:41)"); "loader L" when the
// configuration says none of these.
std::string loader_name(const LoaderConfig& c, int64_t id);

// Queue depth of one loader as exact step functions of its batch events: in flight (sent, not
// put) and ready (put, not handed). A batch still counted when its epoch closes (the iterator was
// abandoned, or the recording stopped) leaves the count at the close: the epoch's dl.epoch_end,
// else the next epoch's begin, else `end_ns`.
struct QueueDepth {
  StepFunction in_flight, ready;
};
QueueDepth queue_depth(const DataLoaderModel& m, const LoaderInfo& loader, int64_t end_ns);

}  // namespace stallscope::analysis
