// The RecordingTail of a recording on this machine: every query is storage's Reader's. When many
// counter samples are new (opening a large recording), they are read on a second connection in
// parallel.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "storage/recording_tail.h"

namespace stallscope {

class LocalTail final : public RecordingTail {
 public:
  // Opens `path` read-only (Reader::open's checks and one-line errors).
  static Result<std::unique_ptr<RecordingTail>> open_file(const std::string& path);
  static Result<std::unique_ptr<LocalTail>> open_local(const std::string& path);

  // Reads what was committed since the last poll into `sink`. When many counter samples are new
  // (opening a large recording), they are read on a second connection in parallel. With max_rows
  // > 0, a poll reads about that many rows (the same share of each table, so about the same span
  // of time) and says how many it left (PollStats::pending): a large recording arrives in parts.
  Result<PollStats> poll(RowSink& sink, int64_t max_rows = 0) override;
  const std::string& path() const override { return path_; }
  int64_t file_bytes() override;
  TailCursor cursor() const { return {last_, last_flush_, last_string_, strings_seen_, from_ns_, to_ns_}; }
  void resume(const TailCursor& c) {
    last_ = c.last;
    last_flush_ = c.last_flush;
    last_string_ = c.last_string;
    strings_seen_ = c.strings_seen;
    from_ns_ = c.from_ns;
    to_ns_ = c.to_ns;
  }
  bool recorder_alive(const std::map<std::string, std::string>& meta) override;

  // Bounded reads of a long recording (the dashboard holds the detail of a window, not of the whole
  // run). start_from(t0), before the first poll: polls read only what reaches t0 or later (spans
  // that end there, instants, counter values and GPU activities from there on), starting from the
  // ids the flush index and a bisection on id give (Reader::ids_before).
  Status start_from(int64_t t0) override;
  // One read of the window [t0, t1] (spans overlapping it, the other rows in it) and the small
  // tables, into `sink`; polls are not moved by it. The last flush is passed to on_flush.
  Result<PollStats> read_window(RowSink& sink, int64_t t0, int64_t t1) override;

 private:
  LocalTail(std::unique_ptr<Reader> r, std::string path) : reader_(std::move(r)), path_(std::move(path)) {}
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

}  // namespace stallscope
