// The dashboard's model: an immutable Snapshot of one recording that the views draw from. The
// snapshot thread (snapshot_source.h) builds a new one after each read of the database and
// publishes it (a shared_ptr swapped under a small mutex); the render thread only ever reads the
// current one.
//
// [SECTION] Timeline items: Item, Marker, Row (sorted, non-overlapping: lower_bound by time)
// [SECTION] Lanes: GPU streams, main thread, pin-memory thread, workers, other threads
// [SECTION] Counters, headline bins
// [SECTION] Snapshot = Timeline (from the reader) + AnalysisView (from the analysis thread)
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/vocabulary.h"
#include "ui/append_log.h"

namespace stallscope::ui {

struct AnalysisView;  // analysis_view.h
struct Overview;      // overview.h

// ---------------------------------------------------------------------------------------------
// [SECTION] Timeline items
// ---------------------------------------------------------------------------------------------

// What an item is, for colour and for tooltips.
enum class Style : uint8_t {
  kOther = 0,
  kNext,          // dl.next: the loop waits for data
  kStep,          // derived: from one hand-off to the next next() call (the loop's own work)
  kFetch,         // dl.fetch
  kCollate,       // dl.collate
  kPin,           // dl.pin
  kCudaSync,      // cuda.* host calls that block on the GPU
  kNvtx,          // any other span (NVTX ranges, user spans)
  kKernel,        // gpu_activities kernel
  kCopyPinned,    // memcpy from/to pinned or device memory
  kCopyPageable,  // memcpy from/to pageable memory: synchronous, a transfer stall
  kMemset,
  kGpuSync,
  kStallData,  // stall intervals by cause (analysis)
  kStallTransfer,
  kStallSync,
  kStallHost,
  kQueueEmpty,  // ready == 0 while the loop iterates
  kCount
};
const char* style_name(Style s);

inline constexpr uint8_t kItemUnended = 1;  // the span never ended: drawn to the end of the recording

// One span (or GPU activity, or derived interval) in a row. Args keep the database's meaning.
struct Item {
  int64_t start_ns = 0, end_ns = 0;
  int64_t busy_before = 0;  // sum of (end - start) of the row's items before this one
  int64_t a0 = kNoArg;
  int32_t a1 = kNoArg32, a2 = kNoArg32;
  uint32_t name_id = 0;  // strings id (0: none)
  Style style = Style::kOther;
  uint8_t flags = 0;
  uint16_t reserved = 0;

  static constexpr int64_t kNoArg = INT64_MIN;
  static constexpr int32_t kNoArg32 = INT32_MIN;
};
static_assert(sizeof(Item) == 48);

// One instant (dl.sent, dl.put, dl.recv, epoch marks ...).
struct Marker {
  int64_t ts_ns = 0;
  int64_t a0 = Item::kNoArg;
  int32_t a1 = Item::kNoArg32, a2 = Item::kNoArg32;
  uint32_t name_id = 0;
  uint8_t kind = 0;  // MarkerKind
};
enum MarkerKind : uint8_t { kMarkOther = 0, kMarkSent, kMarkRecv, kMarkPut, kMarkEpoch, kMarkWorker };

inline int64_t item_end(const Item& it) { return it.end_ns; }
inline int64_t marker_ts(const Marker& m) { return m.ts_ns; }
using MarkerLog = SortedLog<Marker, marker_ts>;

// A row of items that never overlap, in time order: starts and ends are both sorted, so the first
// visible item is a lower_bound on the end (through a block index, see SortedLog), and the busy
// time of any index range is a difference of prefix sums (what merged, sub-pixel items are drawn
// with).
struct Row {
  SortedLog<Item, item_end> items;  // keyed by end
  int32_t depth = 0;                // the span depth this row shows (overflow rows repeat it)

  size_t size() const { return items.size(); }
  const Item& operator[](size_t i) const { return items[i]; }
  // First item (from `lo`) whose end is at or after `t`.
  size_t first_ending_at_or_after(int64_t t, size_t lo = 0) const { return items.lower_bound(t, lo); }
  // First item whose end is after `t` (an item ending exactly at t is not visible after it).
  size_t first_ending_after(int64_t t, size_t lo = 0) const {
    return t == INT64_MAX ? items.size() : items.lower_bound(t + 1, lo);
  }
  // First item (from `lo`) whose start is at or after `t`. Items before the first one ending at or
  // after t start before t; items do not overlap, so after that one every start is >= t.
  size_t first_starting_at_or_after(int64_t t, size_t lo = 0) const {
    const size_t i = items.lower_bound(t, lo);
    if (i >= items.size()) return items.size();
    return items[i].start_ns >= t ? i : i + 1;
  }
  // Total duration of the items [i0, i1).
  int64_t busy(size_t i0, size_t i1) const {
    if (i1 <= i0) return 0;
    const Item& last = items[i1 - 1];
    return last.busy_before + (last.end_ns - last.start_ns) - items[i0].busy_before;
  }
  // Appends keeping the invariants; false when `it` would overlap or go back in time.
  bool try_append(Item it) {
    if (!items.empty() && it.start_ns < items.back().end_ns) return false;
    it.busy_before = items.empty() ? 0 : items.back().busy_before + (items.back().end_ns - items.back().start_ns);
    items.push_back(it);
    return true;
  }
};

// ---------------------------------------------------------------------------------------------
// [SECTION] Lanes
// ---------------------------------------------------------------------------------------------

enum class LaneRole : uint8_t { kGpu = 0, kMain, kPin, kWorker, kOther };
const char* role_name(LaneRole r);

// Names of GpuDetail's copy and memory kinds (index 0: unknown).
const char* copy_kind_name(uint8_t i);  // "", HtoD, DtoH, DtoD, HtoH, PtoP
const char* mem_kind_name(uint8_t i);   // "", pageable, pinned, device, array, managed

struct GpuDetail {  // what a GPU item's tooltip shows beyond the item itself
  int64_t bytes = 0;
  int64_t correlation_id = 0;
  uint8_t copy_kind = 0, src_kind = 0, dst_kind = 0;  // indices into kCopyKinds / kMemKinds
};

// The rows of one thread (or one GPU stream). A lane shows one or more tracks on the same rows:
// a worker lane holds one track per process that ran as that worker (respawned each epoch).
struct Track {
  int64_t thread_id = 0;  // threads.id (0 for GPU streams)
  int64_t pid = 0, tid = 0;
  std::string thread_name;
  std::vector<Row> rows;        // display order: by depth, overflow rows after their depth
  std::vector<int32_t> visual;  // the lane row each of `rows` is drawn in
  Row steps;                    // main thread: derived steps, drawn in the row of dl.next
  int32_t steps_visual = 0;
  MarkerLog markers;
  int32_t marker_visual = 0;  // the lane row markers are drawn on
  AppendLog<GpuDetail> gpu;   // GPU streams: Item.a1 indexes this
};

struct Lane {
  LaneRole role = LaneRole::kOther;
  std::string name;                  // shown in the label column: "GPU 0 stream 7", "main thread", "worker 3"
  std::string detail;                // tooltip of the label: pids, thread ids, command
  int64_t pid = 0;                   // the process (the first one for a worker lane)
  int64_t loader = -1;               // worker lanes: loader id (-1 unknown)
  int32_t worker = -1;               // worker lanes: worker id W
  int64_t device = -1, stream = -1;  // GPU lanes
  std::vector<int64_t> pids;         // every process with a track in this lane
  std::vector<Track> tracks;
  int32_t row_count = 1;                    // visual rows
  std::vector<int32_t> row_depth;           // depth shown by each visual row
  int64_t items = 0;                        // items over all tracks and rows
  std::array<int64_t, 5> sort_key_tuple{};  // display order
  // Multi-rank jobs (a process that recorded dist.rank): the rank whose process, or whose
  // DataLoader worker, this lane shows (-1: none, or a single-rank recording); rank_lead marks the
  // first lane of each rank in display order, where the group is collapsed and expanded.
  int64_t rank = -1;
  bool rank_lead = false;
  // A long recording (Timeline::overview): the threads (threads.id) whose overview bars this lane
  // shows where no detail is held: its tracks' threads, and for a worker lane the workers of
  // earlier epochs that held its place (SnapshotBuilder::map_overview).
  std::vector<int64_t> overview_threads;
};

// ---------------------------------------------------------------------------------------------
// [SECTION] Counters, headline bins
// ---------------------------------------------------------------------------------------------

// A /proc counter of one process. Each value describes the interval since the previous sample
// (proc.cpu, proc.runq_wait) or the moment (proc.rss); both are drawn as holding over
// (previous sample, this sample]. `integral` is the running sum of value x dt, so the mean over
// any window is two lower_bounds.
struct CounterSample {
  int64_t ts_ns = 0;
  double value = 0;
  double integral = 0;  // sum over earlier samples of value * (ts - previous ts), in value x ns
};
inline int64_t sample_ts(const CounterSample& s) { return s.ts_ns; }
struct CounterSeries {
  SortedLog<CounterSample, sample_ts> samples;
  void append(int64_t ts, double v) {
    CounterSample s{ts, v, 0};
    if (!samples.empty()) {
      const CounterSample& p = samples.back();
      if (ts < p.ts_ns) return;  // out of order: dropped (the sampler writes in order)
      s.integral = p.integral + v * static_cast<double>(ts - p.ts_ns);
    }
    samples.push_back(s);
  }
  // Mean value over [t0, t1] weighted by time, and how much of the window samples covered.
  // `hint` (optional) is a sample index at or before t0 from a previous call, for left-to-right
  // scans; it is updated.
  bool mean(int64_t t0, int64_t t1, double* out, int64_t* covered = nullptr, size_t* hint = nullptr) const;
  double max_value = 0;
};
enum CounterMetric : int { kCpu = 0, kRunq, kRss, kCounterMetricCount };
// The metric that shows a vocabulary counter (-1: the dashboard does not draw it).
int counter_metric(vocab::Counter c);
struct ProcCounters {
  CounterSeries series[kCounterMetricCount];
};

// Headline figures in fixed bins of kBinNs, so that "now" and the sparklines are cheap to draw.
inline constexpr int64_t kBinNs = 100'000'000;  // 100 ms
struct Bin {
  int32_t handed = 0;    // batches handed to the loop (dl.next ends with a batch)
  int64_t stall_ns = 0;  // time in dl.next
  int64_t step_ns = 0;   // time in derived steps (the loop's own work)
  int64_t gpu_ns = 0;    // GPU busy (sum over activities, capped at the bin)
};

// ---------------------------------------------------------------------------------------------
// [SECTION] Snapshot
// ---------------------------------------------------------------------------------------------

// The part built by the reader thread from the database rows.
struct Timeline {
  std::map<std::string, std::string> meta;
  std::shared_ptr<const std::vector<std::string>> strings;  // by id; "" when unknown
  std::vector<Lane> lanes;                                  // in display order
  std::shared_ptr<const std::vector<Bin>> bins;
  std::map<int64_t, ProcCounters> counters;  // by pid
  int64_t end_ns = 0;                        // the latest time the data reaches
  int64_t first_ns = 0;                      // the earliest event
  int64_t rows_read = 0;                     // database rows read so far (all tables)
  int64_t spans = 0, instants = 0, counter_samples = 0, gpu_activities = 0;
  int64_t last_flush_ns = 0;
  bool gpu_mode = false;  // gpu_activities exist
  bool complete = false;  // meta complete = 1
  // A long recording (more rows than SourceOptions::detail_rows) holds the detail of one window
  // [detail_t0, detail_t1] only: its latest part at first, or the part the view asked for
  // (SnapshotSource::request_detail). The overview, from the summary tables, covers the whole run;
  // first_ns and end_ns are the whole run's. A recording read whole has no overview, and its
  // detail range is everything.
  std::shared_ptr<const Overview> overview;
  int64_t detail_t0 = INT64_MIN, detail_t1 = INT64_MAX;
  int64_t detail_rows = 0;  // SourceOptions::detail_rows: the most a window may hold (0: no limit)
  bool windowed() const { return overview != nullptr; }

  const std::string& str(uint32_t id) const;
};

enum class SourceState : uint8_t {
  kLoading = 0,  // the first read has not finished
  kLive,         // being written: followed
  kFinished,     // complete = 1: replay
  kCutOff,       // complete = 0 and the recorder is gone: what was flushed
  kError,        // could not be read: `error` says why
};
const char* state_name(SourceState s);

struct Snapshot {
  uint64_t generation = 0;
  std::string path;
  SourceState state = SourceState::kLoading;
  std::string error;                             // one line, when kError
  std::string link_error;                        // a remote recording's link is down: why (retrying)
  std::shared_ptr<const Timeline> timeline;      // null until the first read
  std::shared_ptr<const AnalysisView> analysis;  // null until the analysis ran once
  bool analysis_pending = false;                 // running, or the data changed since it last ran
  std::string analysis_error;                    // one line, when the analysis could not load the file
  double open_seconds = 0;                       // first read: open + build, every part
  double first_timeline_seconds = -1;            // open to the first timeline (-1: none yet)
  double load_fraction = 0;                      // share of the rows read at open (1: loaded)
  double analysis_seconds = 0;                   // last analysis pass
  int64_t file_bytes = -1;                       // the database and its write-ahead log (-1: unknown)
};

// The recording's growth per hour of what it covers (timeline first to last event), from
// `file_bytes`; nullopt under 10 s, where the start-up's share would skew it, and while loading.
std::optional<double> growth_per_hour(const Snapshot& s);

}  // namespace stallscope::ui
