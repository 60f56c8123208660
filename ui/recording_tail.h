// RecordingTail: reads a session database incrementally for the dashboard. Each poll() opens one
// read transaction (a consistent view of every committed flush, WAL lets the recorder go on),
// reads the rows added since the previous poll (by id: spans, instants, counters and GPU
// activities are append-only) and streams them to a RowSink. Small tables (meta, processes,
// threads, counter tracks) are read whole each time. Only the snapshot thread uses it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "common/status.h"
#include "storage/reader.h"
#include "storage/rows.h"

namespace stallscope::ui {

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

class RecordingTail {
 public:
  // Opens `path` read-only (Reader::open's checks and one-line errors).
  static Result<std::unique_ptr<RecordingTail>> open(const std::string& path);

  // Reads what was committed since the last poll into `sink`. When many counter samples are new
  // (opening a large recording), they are read on a second connection in parallel. With max_rows
  // > 0, a poll reads about that many rows (the same share of each table, so about the same span
  // of time) and says how many it left (PollStats::pending): a large recording arrives in parts.
  Result<PollStats> poll(RowSink& sink, int64_t max_rows = 0);
  const std::string& path() const { return path_; }

  // Bounded reads of a long recording (the dashboard holds the detail of a window, not of the whole
  // run). start_from(t0), before the first poll: polls read only what reaches t0 or later (spans
  // that end there, instants, counter values and GPU activities from there on), starting from the
  // ids the flush index and a bisection on id give (Reader::ids_before).
  Status start_from(int64_t t0);
  // One read of the window [t0, t1] (spans overlapping it, the other rows in it) and the small
  // tables, into `sink`; polls are not moved by it. The last flush is passed to on_flush.
  Result<PollStats> read_window(RowSink& sink, int64_t t0, int64_t t1);

 private:
  RecordingTail(std::unique_ptr<Reader> r, std::string path) : reader_(std::move(r)), path_(std::move(path)) {}
  Status poll_locked(RowSink& sink, PollStats* st, int64_t max_rows);
  // The small tables, read whole: meta, new strings, processes, threads, counter tracks.
  Status read_small_tables(RowSink& sink);
  // What this poll reads of each append-only table: up to `heads`, cut to about max_rows but
  // reaching at least each table's next row.
  Result<TableHeads> plan(const TableHeads& heads, int64_t max_rows);
  // Counters with rowid in (from, to] from `reader`, the wanted tracks only.
  Status read_counters(Reader& reader, RowSink& sink, int64_t from, int64_t to, int64_t* count);
  // Spans, instants and counters up to `upto` (then last_ moves there): the instants and counters
  // on the second connection, in parallel with the spans, when there are many (`parallel`).
  Status read_rows(RowSink& sink, const TableHeads& upto, bool parallel, PollStats* st);

  bool wanted_track(int64_t id) const {
    return id >= 0 && static_cast<size_t>(id) < wanted_tracks_.size() && wanted_tracks_[static_cast<size_t>(id)];
  }
  // The time window rows must reach to be passed on (start_from, read_window).
  bool in_window(int64_t start, int64_t end) const { return end >= from_ns_ && start <= to_ns_; }
  bool in_window(const SpanRow& r) const {
    return in_window(r.start_ns, r.dur_ns ? end_of(r.start_ns, *r.dur_ns) : INT64_MAX);
  }
  bool in_window(int64_t ts) const { return ts >= from_ns_ && ts <= to_ns_; }
  static int64_t end_of(int64_t start, int64_t dur) {  // saturated: a damaged row's may overflow
    int64_t end;
    return __builtin_add_overflow(start, dur, &end) ? (dur < 0 ? INT64_MIN : INT64_MAX) : end;
  }
  int64_t from_ns_ = INT64_MIN, to_ns_ = INT64_MAX;
  std::vector<bool> wanted_tracks_;  // by counter track id
  bool any_track_wanted_ = false;

  std::unique_ptr<Reader> reader_;
  std::unique_ptr<Reader> side_;  // the second connection (large reads), opened when first needed
  std::string path_;
  TableHeads last_;  // what earlier polls read up to
  int64_t last_flush_ = 0;
  int64_t last_string_ = 0, strings_seen_ = 0;
};

}  // namespace stallscope::ui
