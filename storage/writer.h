// Writes a session database: one transaction per flush, prepared statements bound per row.
// Used only by the drainer (storage/ingest.h); single-threaded.
#pragma once

#include <memory>
#include <string>
#include <string_view>

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

  // Checkpoints the WAL into the main file; call once at the end of a session.
  Status finish();
  Db& db() { return *db_; }
  const Summaries& summaries() const { return *summaries_; }

 private:
  explicit Writer(std::unique_ptr<Db> db) : db_(std::move(db)) {}
  Status prepare_all();
  void keep(Status s);

  std::unique_ptr<Db> db_;
  std::unique_ptr<Stmt> meta_, string_, process_, process_end_, process_cmd_, thread_, thread_name_, span_, instant_,
      track_, counter_, flush_, gpu_;
  Status batch_status_;
  std::unique_ptr<Summaries> summaries_;
};

}  // namespace stallscope
