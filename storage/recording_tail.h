// RecordingTail: reads a session database incrementally, for the dashboard and `top`. Each poll()
// sees one consistent state of the recording (every committed flush; WAL lets the recorder go on),
// reads the rows added since the previous poll (by id: spans, instants, counters and GPU activities
// are append-only) and streams them to a RowSink. Small tables (meta, processes, threads, counter
// tracks) are read whole each time. One thread uses a tail at a time.
//
// Two sources, one interface: a recording on this machine (storage/local_tail.h) or on another one
// (remote/, a URI such as ssh://host/path/run.db: the node runs the local tail and streams the
// sink's calls back, one round trip per poll).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "common/status.h"
#include "storage/reader.h"
#include "storage/rows.h"

namespace stallscope {

// Receives the rows of a poll. on_counter may be called from a second thread while the other
// callbacks run (large reads split the counters table off): it must touch only counter state.
// Rows of different tables may arrive in any order relative to each other.
class RowSink {
 public:
  virtual ~RowSink() = default;
  virtual void on_meta(const std::map<std::string, std::string>& meta) = 0;
  virtual void on_string(uint32_t id, std::string value) = 0;
  virtual void on_processes(const std::vector<ProcessRow>& all) = 0;
  virtual void on_threads(const std::vector<ThreadRow>& all) = 0;
  virtual void on_counter_tracks(const std::vector<CounterTrackRow>& all) = 0;
  // Whether the samples of a counter track are wanted at all (the others are not read).
  virtual bool wants_counter_track(const CounterTrackRow&) const { return true; }
  virtual void on_instant(const InstantRow& r) = 0;
  virtual void on_span(const SpanRow& r) = 0;
  virtual void on_counter(const CounterRow& r) = 0;
  virtual void on_gpu(const GpuActivityRow& r) = 0;
  virtual void on_flush(int64_t ts_ns) = 0;
};

struct PollStats {
  int64_t rows = 0;  // rows of the append-only tables read by this poll
  int64_t spans = 0, instants = 0, counters = 0, gpu = 0;
  int64_t pending = 0;  // rows already committed but left for the next poll (max_rows)
};

// Where a tail is: what its polls have read up to and the window they keep to. A tail on another
// machine is resumed from it after the link was lost, so that no row arrives twice.
struct TailCursor {
  TableHeads last;
  int64_t last_flush = 0, last_string = 0, strings_seen = 0;
  int64_t from_ns = INT64_MIN, to_ns = INT64_MAX;
};

class RecordingTail {
 public:
  // Opens `path` read-only (Reader::open's checks and one-line errors); a URI goes to the opener
  // set for its scheme, as Reader::open's.
  static Result<std::unique_ptr<RecordingTail>> open(const std::string& path);
  using UriOpener = std::function<Result<std::unique_ptr<RecordingTail>>(const std::string& uri)>;
  static void set_uri_opener(const std::string& scheme, UriOpener opener);
  virtual ~RecordingTail() = default;

  // Reads what was committed since the last poll into `sink`. With max_rows > 0, a poll reads
  // about that many rows (the same share of each table, so about the same span of time) and says
  // how many it left (PollStats::pending): a large recording arrives in parts.
  virtual Result<PollStats> poll(RowSink& sink, int64_t max_rows = 0) = 0;
  virtual const std::string& path() const = 0;
  // Bounded reads of a long recording (the dashboard holds the detail of a window, not of the whole
  // run). start_from(t0), before the first poll: polls read only what reaches t0 or later.
  virtual Status start_from(int64_t t0) = 0;
  // One read of the window [t0, t1] (spans overlapping it, the other rows in it) and the small
  // tables, into `sink`; polls are not moved by it. The last flush is passed to on_flush.
  virtual Result<PollStats> read_window(RowSink& sink, int64_t t0, int64_t t1) = 0;
  // As of the last poll: the recording's bytes on disk with its write-ahead log (-1: unknown), and
  // whether the process that drains it still runs (on the machine that holds it).
  virtual int64_t file_bytes() = 0;
  virtual bool recorder_alive(const std::map<std::string, std::string>& meta) = 0;
};

}  // namespace stallscope
