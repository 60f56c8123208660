// The vocabulary: every name that the capture side writes and the reading side looks for, written
// once. Event names (dl.*, stallscope.hooks, nvtx.*, cuda.*), counter tracks (proc.*) and their
// units, stall causes, recommendation ids, severities, report modes, loader kinds and how a session
// was recorded.
// docs/events.md documents the events and counters; python/stallscope/_vocab.py is the Python
// side; tests/unit/vocabulary_test.cc fails when either uses a name that is not here, or when an
// event or counter here is missing from the docs.
//
// Names are compared as strings only here: the rest of the code turns a recording's string ids
// into Event/Counter values once (NameTable) and switches on those.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace stallscope::vocab {

// ---------------------------------------------------------------------------------------------
// [SECTION] Events (spans and instants)
// ---------------------------------------------------------------------------------------------

enum class Event : uint8_t {
  kNone = 0,  // a name outside the vocabulary: NVTX messages, user spans
  // DataLoader hooks: training process
  kDlConfig,
  kDlEpochBegin,
  kDlEpochEnd,
  kDlNext,
  kDlSent,
  kDlRecv,
  kDlWorkerStart,
  kDlWorkerStop,
  kDlFetch,    // main process (num_workers=0) or worker
  kDlCollate,  // idem
  kDlStep,     // an optimizer step, and the loader whose batch it trained on
  kDlPin,      // pin-memory thread
  // DataLoader hooks: worker processes
  kDlWorkerReady,
  kDlPut,           // also the reference loader's threads, in the training process
  kDlCpu,           // CPU time around dl.next (training process) and dl.fetch (workers)
  kDlBatch,         // a batch's tensors and bytes, once per loader (training process, no workers)
  kDlParallel,      // torch's OpenMP parallel regions in the step before a marked dl.next (training process)
  kDlParallelNext,  // torch's OpenMP parallel regions inside a marked dl.next (training process)
  // reference loader's threads (training process)
  kDlStages,
  kDlCopy,
  // hook health
  kHooks,
  // NVTX ranges that may end on another thread
  kNvtxStart,
  kNvtxEnd,
  // host calls that block on the GPU (CUPTI callbacks)
  kCudaStreamSynchronize,
  kCudaDeviceSynchronize,
  kCudaEventSynchronize,
  kCudaMemcpy,
  kCudaMemcpyAsync,
  // torch.distributed (training processes)
  kDistRank,
  kDistCollective,
  kDistIssue,
  kDistDone,
  kCount  // not an event
};

enum class Shape : uint8_t { kSpan, kInstant };

// What one argument (arg0, arg1, arg2) of an event carries; L, E, B, W, G as docs/events.md
// names them.
enum class Arg : uint8_t {
  kNone = 0,     // nothing (the C API writes 0)
  kLoader,       // L
  kEpoch,        // E
  kBatch,        // B (dl.next: the batch handed, -1 at StopIteration)
  kWorker,       // W (-1: the main process)
  kGeneration,   // G
  kPid,          // a process id
  kSamples,      // samples in a batch
  kCount,        // num_workers (dl.epoch_begin), batches yielded (dl.epoch_end)
  kText,         // a string id: a JSON document, a message
  kDomain,       // NVTX domain (string id; 0: the default domain)
  kCategory,     // NVTX category
  kRangeId,      // NVTX range id
  kCorrelation,  // CUPTI correlation id: links a host call to its GPU activity
  kMicros,       // a duration in microseconds
  kBytes,        // a size in bytes
  kRank,         // a torch.distributed rank
  kSeq           // a collective's number in its process (0, 1, ...): the same on every rank
};
using Args = std::array<Arg, 3>;
inline constexpr Args kNoArgs = {Arg::kNone, Arg::kNone, Arg::kNone};

struct EventDef {
  Event id;
  std::string_view name;
  Shape shape;
  Args args;         // arg0, arg1, arg2
  Args worker_args;  // in a DataLoader worker process, where the layout differs (else kNoArgs)
};

// In enum order (a static_assert in vocabulary.cc keeps it so). The tables of docs/events.md.
inline constexpr EventDef kEvents[] = {
    // clang-format off
    {Event::kNone, "", Shape::kInstant, kNoArgs, kNoArgs},
    {Event::kDlConfig, "dl.config", Shape::kInstant, {Arg::kLoader, Arg::kText, Arg::kNone}, kNoArgs},
    {Event::kDlEpochBegin, "dl.epoch_begin", Shape::kInstant, {Arg::kLoader, Arg::kEpoch, Arg::kCount}, kNoArgs},
    {Event::kDlEpochEnd, "dl.epoch_end", Shape::kInstant, {Arg::kLoader, Arg::kEpoch, Arg::kCount}, kNoArgs},
    {Event::kDlNext, "dl.next", Shape::kSpan, {Arg::kLoader, Arg::kBatch, Arg::kEpoch}, kNoArgs},
    {Event::kDlSent, "dl.sent", Shape::kInstant, {Arg::kLoader, Arg::kBatch, Arg::kWorker}, kNoArgs},
    {Event::kDlRecv, "dl.recv", Shape::kInstant, {Arg::kLoader, Arg::kBatch, Arg::kWorker}, kNoArgs},
    {Event::kDlWorkerStart, "dl.worker_start", Shape::kInstant, {Arg::kLoader, Arg::kWorker, Arg::kPid}, kNoArgs},
    {Event::kDlWorkerStop, "dl.worker_stop", Shape::kInstant, {Arg::kLoader, Arg::kWorker, Arg::kPid}, kNoArgs},
    {Event::kDlFetch, "dl.fetch", Shape::kSpan, {Arg::kLoader, Arg::kBatch, Arg::kWorker},
                                                {Arg::kBatch, Arg::kWorker, Arg::kGeneration}},
    {Event::kDlCollate, "dl.collate", Shape::kSpan, {Arg::kLoader, Arg::kBatch, Arg::kSamples},
                                                    {Arg::kBatch, Arg::kSamples, Arg::kGeneration}},
    {Event::kDlStep, "dl.step", Shape::kInstant, {Arg::kLoader, Arg::kEpoch, Arg::kNone}, kNoArgs},
    {Event::kDlPin, "dl.pin", Shape::kSpan, {Arg::kLoader, Arg::kBatch, Arg::kNone}, kNoArgs},
    {Event::kDlWorkerReady, "dl.worker_ready", Shape::kInstant, kNoArgs, {Arg::kWorker, Arg::kGeneration, Arg::kNone}},
    {Event::kDlPut, "dl.put", Shape::kInstant, {Arg::kLoader, Arg::kBatch, Arg::kWorker}, {Arg::kBatch, Arg::kWorker, Arg::kGeneration}},
    {Event::kDlCpu, "dl.cpu", Shape::kInstant, {Arg::kMicros, Arg::kMicros, Arg::kMicros}, {Arg::kBatch, Arg::kMicros, Arg::kMicros}},
    {Event::kDlBatch, "dl.batch", Shape::kInstant, {Arg::kLoader, Arg::kCount, Arg::kBytes}, {Arg::kCount, Arg::kBytes, Arg::kNone}},
    {Event::kDlParallel, "dl.parallel", Shape::kInstant, {Arg::kMicros, Arg::kMicros, Arg::kCount}, kNoArgs},
    {Event::kDlParallelNext, "dl.parallel_next", Shape::kInstant, {Arg::kMicros, Arg::kMicros, Arg::kCount}, kNoArgs},
    {Event::kDlStages, "dl.stages", Shape::kInstant, {Arg::kMicros, Arg::kMicros, Arg::kMicros}, kNoArgs},
    {Event::kDlCopy, "dl.copy", Shape::kSpan, {Arg::kBytes, Arg::kLoader, Arg::kBatch}, kNoArgs},
    {Event::kHooks, "stallscope.hooks", Shape::kInstant, {Arg::kText, Arg::kNone, Arg::kNone}, kNoArgs},
    {Event::kNvtxStart, "nvtx.start", Shape::kInstant, {Arg::kRangeId, Arg::kText, Arg::kDomain}, kNoArgs},
    {Event::kNvtxEnd, "nvtx.end", Shape::kInstant, {Arg::kRangeId, Arg::kNone, Arg::kNone}, kNoArgs},
    {Event::kCudaStreamSynchronize, "cuda.cudaStreamSynchronize", Shape::kSpan, {Arg::kCorrelation, Arg::kNone, Arg::kNone}, kNoArgs},
    {Event::kCudaDeviceSynchronize, "cuda.cudaDeviceSynchronize", Shape::kSpan, {Arg::kCorrelation, Arg::kNone, Arg::kNone}, kNoArgs},
    {Event::kCudaEventSynchronize, "cuda.cudaEventSynchronize", Shape::kSpan, {Arg::kCorrelation, Arg::kNone, Arg::kNone}, kNoArgs},
    {Event::kCudaMemcpy, "cuda.cudaMemcpy", Shape::kSpan, {Arg::kCorrelation, Arg::kNone, Arg::kNone}, kNoArgs},
    {Event::kCudaMemcpyAsync, "cuda.cudaMemcpyAsync", Shape::kSpan, {Arg::kCorrelation, Arg::kNone, Arg::kNone}, kNoArgs},
    {Event::kDistRank, "dist.rank", Shape::kInstant, {Arg::kRank, Arg::kText, Arg::kCount}, kNoArgs},
    {Event::kDistCollective, "dist.collective", Shape::kSpan, {Arg::kBytes, Arg::kSeq, Arg::kText}, kNoArgs},
    {Event::kDistIssue, "dist.issue", Shape::kInstant, {Arg::kBytes, Arg::kSeq, Arg::kText}, kNoArgs},
    {Event::kDistDone, "dist.done", Shape::kInstant, {Arg::kNone, Arg::kSeq, Arg::kNone}, kNoArgs},
    // clang-format on
};

// The arguments of `e` as a process of that kind writes them: a worker's layout where the event
// has one, else the main process's (and for events only workers write, theirs).
const Args& args_of(Event e, bool in_worker);
// What an argument is called where it is written out by name (exports): "loader", "batch", "us"...;
// "" for kNone.
std::string_view arg_name(Arg a);

// The event called `name`; kNone for a name outside the vocabulary.
Event event_of(std::string_view name);
// Its name ("" for kNone).
std::string_view name_of(Event e);
// The events of the DataLoader hooks (dl.* and stallscope.hooks).
bool is_dataloader(Event e);
// The host calls that block on the GPU (cuda.*).
bool is_cuda_call(Event e);

// ---------------------------------------------------------------------------------------------
// [SECTION] Counter tracks (the /proc sampler)
// ---------------------------------------------------------------------------------------------

enum class Counter : uint8_t {
  kNone = 0,
  kCpu,
  kRunqWait,
  kCtxswVoluntary,
  kCtxswInvoluntary,
  kRss,
  kPss,
  kPrivateDirty,
  kReadBytes,
  kSysCpu,
  kMinorFaults,
  kCount
};

struct CounterDef {
  Counter id;
  std::string_view name;
  std::string_view unit;
};

inline constexpr CounterDef kCounters[] = {
    {Counter::kNone, "", ""},
    {Counter::kCpu, "proc.cpu", "cores"},
    {Counter::kRunqWait, "proc.runq_wait", "ratio"},
    {Counter::kCtxswVoluntary, "proc.ctxsw_voluntary", "1/s"},
    {Counter::kCtxswInvoluntary, "proc.ctxsw_involuntary", "1/s"},
    {Counter::kRss, "proc.rss", "bytes"},
    {Counter::kPss, "proc.pss", "bytes"},
    {Counter::kPrivateDirty, "proc.private_dirty", "bytes"},
    {Counter::kReadBytes, "proc.read_bytes", "bytes/s"},
    {Counter::kSysCpu, "proc.sys_cpu", "cores"},
    {Counter::kMinorFaults, "proc.minor_faults", "1/s"},
};

Counter counter_of(std::string_view name);
std::string_view name_of(Counter c);
std::string_view unit_of(Counter c);

// ---------------------------------------------------------------------------------------------
// [SECTION] A recording's string ids -> events and counters
// ---------------------------------------------------------------------------------------------

// Built once per recording from its strings table (string id -> text), then asked per row.
class NameTable {
 public:
  // Records what `text`, string `id` of the recording, names. Later ids may come at any time (a
  // live recording grows).
  void add(uint32_t id, std::string_view text);
  Event event(uint32_t id) const {
    if (id < events_.size()) return events_[id];
    if (sparse_.empty()) return Event::kNone;
    auto it = sparse_.find(id);
    return it == sparse_.end() ? Event::kNone : it->second;
  }

 private:
  // Ids a recorder hands out are dense from 1 (the arena holds far fewer than kDenseIds strings);
  // a damaged file's larger ids go to the map instead of growing the vector to gigabytes.
  static constexpr uint32_t kDenseIds = 1u << 22;
  std::vector<Event> events_;  // by string id, below kDenseIds
  std::unordered_map<uint32_t, Event> sparse_;
};

// ---------------------------------------------------------------------------------------------
// [SECTION] Analysis words: stall causes, recommendations, severities, modes
// ---------------------------------------------------------------------------------------------

// What the training loop was doing while the GPU (GPU mode) or the loop (CPU mode) stalled.
inline constexpr const char* kCauseDataWait = "data_wait";
inline constexpr const char* kCauseH2d = "h2d_transfer";
inline constexpr const char* kCauseSync = "sync";
inline constexpr const char* kCauseHostOther = "host_other";
// The training loop inside DataLoader.__iter__ of its training loader: starting the workers.
inline constexpr const char* kCauseLoaderStart = "loader_start";
inline constexpr const char* kCauses[] = {kCauseDataWait, kCauseH2d, kCauseSync, kCauseHostOther, kCauseLoaderStart};

// Recommendation ids (docs/report.md, "Recommendations").
inline constexpr const char* kRecIncreaseNumWorkers = "increase_num_workers";
inline constexpr const char* kRecReduceNumWorkers = "reduce_num_workers";
inline constexpr const char* kRecSlowDatasetGetitem = "slow_dataset_getitem";
inline constexpr const char* kRecIncreasePrefetchFactor = "increase_prefetch_factor";
inline constexpr const char* kRecEnablePersistentWorkers = "enable_persistent_workers";
inline constexpr const char* kRecEnablePinMemory = "enable_pin_memory";
inline constexpr const char* kRecWorkerMemoryGrowth = "worker_memory_growth";
inline constexpr const char* kRecPageableH2d = "pageable_h2d";
inline constexpr const char* kRecHostSync = "host_sync";
inline constexpr const char* kRecMoveTransformsToGpu = "move_transforms_to_gpu";
inline constexpr const char* kRecLimitTorchThreads = "limit_torch_threads";
inline constexpr const char* kRecAllocatorPageFaults = "allocator_page_faults";
inline constexpr const char* kRecommendationIds[] = {kRecIncreaseNumWorkers,
                                                     kRecReduceNumWorkers,
                                                     kRecSlowDatasetGetitem,
                                                     kRecIncreasePrefetchFactor,
                                                     kRecEnablePersistentWorkers,
                                                     kRecEnablePinMemory,
                                                     kRecWorkerMemoryGrowth,
                                                     kRecPageableH2d,
                                                     kRecHostSync,
                                                     kRecMoveTransformsToGpu,
                                                     kRecLimitTorchThreads,
                                                     kRecAllocatorPageFaults};

// Severities, most urgent first.
inline constexpr const char* kSeverityHigh = "high";
inline constexpr const char* kSeverityMedium = "medium";
inline constexpr const char* kSeverityLow = "low";
// 0 for high, 1 for medium, 2 for anything else.
int severity_rank(std::string_view severity);

// The report's mode: what a stall is measured against.
inline constexpr const char* kModeCpu = "cpu";
inline constexpr const char* kModeGpu = "gpu";
inline constexpr const char* kModeGpuLight = "gpu_light";  // --gpu light: marks at next(), no kernels

// Which loader ran (`kind` in a dl.config document) and which one `stallscope run --loader` asked
// for (the recording's meta `loader`): torch's DataLoader as the script made it, torch's with the
// settings stallscope chose, or stallscope.ReferenceLoader in its place.
inline constexpr const char* kLoaderTorch = "torch";
inline constexpr const char* kLoaderTuned = "tuned";
inline constexpr const char* kLoaderReference = "reference";
inline constexpr const char* kLoaderKinds[] = {kLoaderTorch, kLoaderTuned, kLoaderReference};

// How a session was recorded (the recording's meta `mode`).
inline constexpr const char* kRecordedByLauncher = "launcher";
inline constexpr const char* kRecordedInProcess = "in-process";
inline constexpr const char* kRecordedByAttach = "attach";

}  // namespace stallscope::vocab
