// The reader of a recording on this machine: its SQLite file, opened read-only (storage/reader.h
// says what each query returns). Reader::open makes one for a file name.
#pragma once

#include <memory>
#include <string>

#include "storage/reader.h"

namespace stallscope {

class SqliteReader final : public Reader {
 public:
  // Opens `path` read-only with Reader::open's checks (it must be a file, not a URI).
  static Result<std::unique_ptr<Reader>> open_file(const std::string& path);
  ~SqliteReader() override;

  const std::string& path() const override;
  void prefer_large_scans() override;
  bool begin_read() override;
  void end_read() override;

  Result<std::map<std::string, std::string>> meta() override;
  Result<std::map<uint32_t, std::string>> strings() override;
  Result<int64_t> string_count() override;
  Result<std::vector<ProcessRow>> processes() override;
  Result<std::vector<ThreadRow>> threads() override;
  Result<std::vector<CounterTrackRow>> counter_tracks() override;
  Result<std::vector<FlushRow>> flushes() override;
  Result<std::optional<FlushRow>> last_flush() override;
  Result<int64_t> count(const std::string& table) override;
  Result<std::vector<SpanRow>> spans(int64_t t0, int64_t t1) override;
  Result<std::vector<SpanRow>> all_spans() override;
  Result<std::vector<InstantRow>> instants() override;
  Result<std::vector<CounterRow>> counters(int64_t track_id) override;
  Result<std::vector<GpuActivityRow>> gpu_activities() override;
  Result<std::vector<SpanRow>> spans_named(const std::vector<uint32_t>& name_ids) override;
  Result<std::vector<InstantRow>> instants_named(const std::vector<uint32_t>& name_ids) override;
  Result<std::vector<SpanRow>> first_spans_per_thread(const std::vector<uint32_t>& name_ids) override;
  Result<std::vector<SpanRow>> spans_named_in(const std::vector<uint32_t>& name_ids, int64_t t0, int64_t t1) override;
  Result<std::vector<InstantRow>> instants_named_in(const std::vector<uint32_t>& name_ids, int64_t t0,
                                                    int64_t t1) override;
  Result<std::vector<CounterRow>> counters_of(const std::vector<int64_t>& track_ids) override;
  Result<std::vector<CounterRow>> counters_of_from(const std::vector<int64_t>& track_ids, int64_t t0,
                                                   int64_t t1) override;
  Result<std::vector<GpuActivityRow>> gpu_activities_from(int64_t t0, int64_t t1) override;
  Result<std::optional<int64_t>> time_of_last_rows(int64_t rows) override;
  Result<bool> has_summaries() override;
  Status build_temporary_summaries(const std::function<void(int64_t done, int64_t total)>& progress) override;
  Result<std::vector<SpanSummaryRow>> span_summaries(int64_t level_ns, const std::vector<uint32_t>& name_ids) override;
  Result<std::vector<InstantSummaryRow>> instant_summaries(int64_t level_ns,
                                                           const std::vector<uint32_t>& name_ids) override;
  Result<std::optional<std::vector<HandoffSummaryRow>>> handoff_summaries(int64_t level_ns) override;
  Result<std::optional<std::vector<QueueSummaryRow>>> queue_summaries(int64_t level_ns) override;
  Result<std::optional<std::vector<QueueSummaryRow>>> queue_summaries(int64_t level_ns, int64_t first_bucket,
                                                                      int64_t last_bucket) override;
  Result<std::vector<InstantSummaryRow>> instant_summaries(int64_t level_ns, const std::vector<uint32_t>& name_ids,
                                                           int64_t first_bucket, int64_t last_bucket) override;
  Status for_each_summary_row(const SummaryVisitor& to) override;
  Result<std::optional<int64_t>> first_span_bucket(int64_t level_ns, uint32_t name_id, std::optional<int64_t> grp,
                                                   bool last = false) override;
  Result<std::optional<int64_t>> edge_instant_bucket(int64_t level_ns, uint32_t name_id, bool last) override;
  Result<int64_t> end_ns() override;
  Result<int64_t> end_ns_of_flushes_and_processes() override;
  Result<TableHeads> ids_before(int64_t t0) override;
  Result<TableHeads> ids_through(int64_t t1) override;
  Result<std::vector<std::pair<int64_t, int64_t>>> span_id_ranges(int64_t t0, int64_t t1) override;
  Result<std::vector<SpanTotal>> span_totals(int64_t level_ns) override;
  Result<std::vector<CounterTotal>> counter_totals(int64_t level_ns) override;
  Result<std::vector<GpuTotal>> gpu_totals(int64_t level_ns) override;
  Result<std::vector<std::pair<int64_t, int64_t>>> rows_per_bucket(int64_t level_ns) override;
  Result<std::map<std::string, uint32_t>> string_ids(const std::vector<std::string>& values) override;
  Result<TableHeads> heads() override;
  Result<TableHeads> next_ids(const TableHeads& after) override;
  Status for_each_string(int64_t after_id, const std::function<void(uint32_t, std::string)>& row) override;
  Status for_each_span(int64_t after, int64_t upto, const std::function<void(const SpanRow&)>& row) override;
  Status for_each_instant(int64_t after, int64_t upto, const std::function<void(const InstantRow&)>& row) override;
  Status for_each_counter(int64_t after_rowid, int64_t upto_rowid,
                          const std::function<void(const CounterRow&)>& row) override;
  Status for_each_gpu_activity(int64_t after, int64_t upto,
                               const std::function<void(const GpuActivityRow&)>& row) override;
  Status for_each_flush(int64_t after_id, const std::function<void(int64_t id, int64_t ts_ns)>& row) override;

 protected:
  Db* sqlite_db() override { return db_.get(); }

 private:
  explicit SqliteReader(std::unique_ptr<Db> db);
  Result<int64_t> instant_id_from(int64_t ts);
  Result<std::optional<int64_t>> edge_bucket(const char* table, int64_t level_ns, uint32_t name_id,
                                             std::optional<int64_t> grp, bool last);
  Result<int64_t> id_from(const char* table, const char* id_col, const char* ts_col, int64_t ts);
  Result<std::vector<SpanRow>> span_query(const std::string& where, int64_t a, int64_t b);
  std::unique_ptr<Db> db_;
};

}  // namespace stallscope
