// Writes a session database: one transaction per flush, prepared statements bound per row.
// Used only by the drainer (storage/ingest.h); single-threaded.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>

#include "common/status.h"
#include "storage/rows.h"
#include "storage/sqlite.h"
#include "storage/summaries.h"

namespace stallscope {

class Writer {
 public:
  // Creates a new recording at `path` (mode 0600, WAL). Fails if the file exists.
  static Result<std::unique_ptr<Writer>> create(const std::string& path);
  // Deletes the recording at `path` with its -wal and -shm side files (those that exist), so that
  // create() can make a new one there: `--force`, and a recording given up on.
  static Status remove(const std::string& path);
  ~Writer();

  Status set_meta(std::string_view key, std::string_view value);
  Status begin();
  // Writes the summaries of the batch's rows (storage/summaries.h) and commits the open
  // transaction; returns the first error of the batch if any row failed.
  Status commit();

  // Row writers; errors are kept until commit().
  void add_string(uint32_t id, std::string_view value);
  int64_t add_process(const ProcessRow& row);  // returns the row id
  void update_process_end(int64_t id, std::optional<int64_t> end_ns, std::optional<int64_t> exit_code,
                          std::optional<int64_t> exit_signal);
  void update_process_cmdline(int64_t id, std::string_view cmdline);
  int64_t add_thread(const ThreadRow& row);
  void set_thread_name(int64_t id, std::string_view name);
  int64_t add_span(const SpanRow& row);
  void add_instant(const InstantRow& row);
  int64_t add_counter_track(const CounterTrackRow& row);
  void add_counter(const CounterRow& row);
  void add_flush(const FlushRow& row);
  void add_gpu_activity(const GpuActivityRow& row);

  // Full detail for the latest `keep_ns` of session time only (`--keep-detail`; 0: all of it).
  // Detail rows (spans, instants, counter values, GPU activities) drained more than keep_ns before
  // the latest flush are deleted inside commit(), in steps of kPurgeStepNs (a quarter of keep_ns
  // when that is shorter). The summaries, processes, threads, strings and tracks stay for the whole
  // run, and so do spans still open and the instants that describe a loader or a process rather
  // than a batch (kKeptInstants). Records meta keep_detail_ns, and detail_from_ns once rows are
  // deleted: the session time from which every event is there.
  static constexpr int64_t kPurgeStepNs = 10'000'000'000;
  static constexpr const char* kKeptInstants[] = {"dl.config",       "dl.worker_start",  "dl.worker_stop",
                                                  "dl.worker_ready", "stallscope.hooks", "dist.rank"};
  Status set_keep_detail(int64_t keep_ns);

  // Checkpoints the WAL into the main file; call once at the end of a session.
  Status finish();
  Db& db() { return *db_; }
  const Summaries& summaries() const { return *summaries_; }
  // Whether the row writers add their rows to the summaries (on by default). `merge` turns it off
  // for an input whose summary rows it carries over instead (Summaries::add_summary).
  void set_summarize(bool on) { summarize_ = on; }
  Summaries& summaries() { return *summaries_; }

 private:
  explicit Writer(std::unique_ptr<Db> db) : db_(std::move(db)) {}
  Status prepare_all();
  void keep(Status s);

  std::unique_ptr<Db> db_;
  std::unique_ptr<Stmt> meta_, string_, process_, process_end_, process_cmd_, thread_, thread_name_, span_, instant_,
      track_, counter_, flush_, gpu_;
  // Spans are written kSpanRows to a statement (a statement's start and end cost about as much as
  // a row: docs/decisions.md, "The drain writes spans 32 to a statement"); the rest of a batch one
  // by one, and outside a batch (begin() to commit()) each at once. Their ids are given here, in
  // order, so add_span() returns a row's id before the row is written; pending rows are written
  // before anything reads the table and before the batch commits.
  static constexpr size_t kSpanRows = 32;
  std::unique_ptr<Stmt> spans_;
  std::vector<SpanRow> pending_spans_;
  int64_t next_span_id_ = 1;
  bool in_batch_ = false;  // between begin() and commit(): outside, a span is written at once
  void write_spans();
  Status count_span_ids();  // next_span_id_ from the table: the largest id + 1
  Status batch_status_;
  std::unique_ptr<Summaries> summaries_;
  bool summarize_ = true;

  // --keep-detail: what each commit drained (its flush time and the largest id of each table
  // then), oldest first, and what was deleted so far.
  Status purge();
  struct Drained {
    int64_t first_ns = 0, flush_ns = 0;                   // the first and the latest drain it covers
    int64_t span = 0, instant = 0, counter = 0, gpu = 0;  // ids (rowid for counters)
  };
  int64_t keep_ns_ = 0;
  std::optional<int64_t> flush_ns_;  // the latest add_flush() of the open batch
  std::deque<Drained> drained_;
  Drained purged_;  // everything up to these ids is deleted (or was kept)
  std::unordered_set<uint32_t> kept_names_;
};

}  // namespace stallscope
