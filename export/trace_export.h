// Exports a recording to the formats other tools read, as a stream: one pass over each table of
// the session database (storage/reader.h, id order), each row handed to a TraceSink as it is read,
// so memory does not grow with the number of events. What the rows do not say by themselves comes
// from the analysis's DataLoader model (analysis/dataloader.h), built once before the pass: which
// process is the training loop and which are its workers (tracks are named like the dashboard's
// lanes), when the loop waited for data, the queue depth, and each batch's path from being sent to
// a worker to being handed to the loop. That model is built per time window over a large
// recording, so its memory follows the batches of one window (ExportOptions).
//
// The sinks, one per format (the Kineto pattern: formats behind one interface):
//   export/perfetto_json.h  the Chrome/Perfetto JSON trace format (ui.perfetto.dev, chrome://tracing)
//   export/csv.h            spans, instants, counters, GPU activities as CSV files with a header
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/dataloader.h"
#include "common/status.h"
#include "storage/reader.h"
#include "storage/rows.h"

namespace stallscope::exporting {

// A process or thread as the export names it: "training", "worker 0", "main thread", "pin memory".
struct TrackName {
  std::string name;
  int sort_index = 0;  // the dashboard's lane order: GPU streams, training, pin memory, workers, others
};

// A point of a series the analysis derives (not a row of the recording), on the training process.
struct DerivedSample {
  int series = 0;  // index into ExportContext::series: "stalled (waiting for data)", ...
  int64_t ts_ns = 0;
  int64_t value = 0;
};

// One batch's path through the pipeline: sent to a worker, fetched there, handed to the loop.
struct BatchFlow {
  int64_t id = 0;  // 1, 2, ... unique in the export
  int64_t loader = 0, epoch = 0, batch = 0;
  // Where each point is: (pid, tid, ts_ns). `sent` is set only when a span of the training thread
  // holds it (a flow binds to the span around its point); `fetch` is the worker's dl.fetch.
  struct Point {
    int64_t pid = 0, tid = 0, ts_ns = 0;
  };
  std::optional<Point> sent;
  Point fetch, handed;
};

// What the whole export knows before the rows stream: names, the derived series, the flows.
struct ExportContext {
  std::map<std::string, std::string> meta;
  std::vector<ProcessRow> processes;
  std::vector<ThreadRow> threads;
  std::map<uint32_t, std::string> strings;
  std::map<int64_t, CounterTrackRow> tracks;   // by id
  std::map<int64_t, TrackName> process_names;  // by pid
  std::map<int64_t, TrackName> thread_names;   // by threads.id
  std::map<int64_t, int64_t> thread_pid;       // threads.id -> pid
  std::map<int64_t, int64_t> thread_tid;       // threads.id -> tid
  std::map<int64_t, bool> is_worker;           // pid -> a DataLoader worker process
  int64_t end_ns = 0;                          // where spans that never ended stop
  int64_t train_pid = 0;
  std::vector<std::string> series;  // names of the derived series
};

class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual Status begin(const ExportContext& ctx) = 0;
  virtual void span(const SpanRow& row) = 0;
  virtual void instant(const InstantRow& row) = 0;
  virtual void counter(const CounterRow& row) = 0;
  virtual void gpu_activity(const GpuActivityRow& row) = 0;
  virtual void derived(const DerivedSample& s) = 0;
  virtual void flow(const BatchFlow& f) = 0;
  // Flushes and closes; the first write error since begin(), if any.
  virtual Status end() = 0;
};

// How many of each the export wrote (what a test compares with the database's tables).
struct ExportCounts {
  int64_t spans = 0, instants = 0, counters = 0, gpu_activities = 0, derived = 0, flows = 0;
};

struct ExportOptions {
  // The per-batch DataLoader model (queue depth, flows, the stall series) is built for windows of
  // window_ns, each read with margin_ns of rows on either side (a batch's life, sent to handed,
  // is taken to be shorter than the margin), once the recording holds more than
  // whole_below_instants instants; a smaller one is modelled whole. docs/decisions.md.
  int64_t window_ns = 300'000'000'000;
  int64_t margin_ns = 60'000'000'000;
  int64_t whole_below_instants = 1'000'000;
  // Only [range->first, range->second] of session time (`stallscope export --range`): the spans
  // that overlap it, the other rows in it, the model's series and the flows of the batches handed
  // in it. Its rows are found through the flush index and a bisection on id (Reader::ids_before,
  // span_id_ranges), and what names the tracks (loader settings, epochs, workers) through the
  // instant summaries, so a range of a day-long recording costs what the range holds.
  std::optional<std::pair<int64_t, int64_t>> range;
};

// Streams the recording behind `reader` (finished or still being written: what is committed when
// the export starts) to `sink`.
Result<ExportCounts> export_recording(Reader& reader, TraceSink& sink, const ExportOptions& options = {});

}  // namespace stallscope::exporting
