// Reads a session database, finished or still being written (WAL lets a reader see every
// committed flush while the drainer goes on). Used by the CLI, the analysis library and the UI.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "storage/rows.h"
#include "storage/sqlite.h"
#include "common/status.h"

namespace stallscope {

class Reader {
 public:
  // Opens `path` read-only and checks that it is a recording this build reads; the error is one
  // line fit for a user.
  static Result<std::unique_ptr<Reader>> open(const std::string& path);

  Result<std::map<std::string, std::string>> meta();
  Result<std::map<uint32_t, std::string>> strings();
  Result<std::vector<ProcessRow>> processes();
  Result<std::vector<ThreadRow>> threads();
  // Spans that overlap [t0, t1] (ns since session start), ordered by start. Unended spans count as
  // reaching to the end of the recording.
  Result<std::vector<SpanRow>> spans(int64_t t0, int64_t t1);
  Result<std::vector<SpanRow>> all_spans();
  Result<std::vector<InstantRow>> instants();
  Result<std::vector<CounterTrackRow>> counter_tracks();
  Result<std::vector<CounterRow>> counters(int64_t track_id);
  Result<std::vector<FlushRow>> flushes();
  Result<std::vector<GpuActivityRow>> gpu_activities();
  Result<int64_t> count(const std::string& table);

  Db& db() { return *db_; }

 private:
  explicit Reader(std::unique_ptr<Db> db) : db_(std::move(db)) {}
  Result<std::vector<SpanRow>> span_query(const std::string& where, int64_t a, int64_t b);
  std::unique_ptr<Db> db_;
};

}  // namespace stallscope
