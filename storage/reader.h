// Reads a session database, finished or still being written (WAL lets a reader see every
// committed flush while the drainer goes on). Every query the other rooms need is a method here:
// whole small tables, time windows, the rows of a set of names (the analysis), and id ranges of
// the append-only tables streamed to a callback (the dashboard's incremental reads). No other
// room sees SQL (scripts/check_layering.py keeps storage/sqlite.h private to storage/).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "storage/rows.h"

namespace stallscope {

class Db;

// The largest id of each append-only table (rowid for counters): what a read transaction sees.
struct TableHeads {
  int64_t spans = 0, instants = 0, counters = 0, gpu_activities = 0;
};

class Reader {
 public:
  // Opens `path` read-only and checks that it is a recording this build reads; the error is one
  // line fit for a user. A path that names a remote recording (a URI: ssh://host/path,
  // tcp://host:port/path) goes to the opener set for its scheme (remote/remote_reader.h sets
  // them); without one it is refused in one line.
  static Result<std::unique_ptr<Reader>> open(const std::string& path);
  // Whether `path` is a URI (scheme://...) rather than a file name.
  static bool is_uri(const std::string& path);
  using UriOpener = std::function<Result<std::unique_ptr<Reader>>(const std::string& uri)>;
  // Sets the opener of the URIs of `scheme` ("ssh", "tcp"); call before any thread opens one.
  static void set_uri_opener(const std::string& scheme, UriOpener opener);
  virtual ~Reader();

  // The path or URI the recording was opened by.
  virtual const std::string& path() const = 0;
  // For long sequential scans (opening a large recording): maps the file instead of copying pages
  // through SQLite's cache. A hint; reads work without it.
  virtual void prefer_large_scans() {}
  // Calls about to be made: `calls` makes them on the reader it is given (their results are not
  // used). A reader across a link sends them all at once and answers the same calls (same
  // arguments) from what came back, so that a group of calls costs one round trip rather than one
  // each; a local reader does nothing. A hint: a call not made later costs only its answer. Inside
  // a Snapshot, the answers sent ahead last until it ends.
  virtual void expect(const std::function<void(Reader&)>& calls) { (void)calls; }

  // One read transaction around a group of calls: on a recording still being written, every call
  // inside sees the same committed flushes.
  class [[nodiscard]] Snapshot {
   public:
    explicit Snapshot(Reader& r);
    ~Snapshot();
    Snapshot(const Snapshot&) = delete;
    Snapshot& operator=(const Snapshot&) = delete;

   private:
    Reader& r_;
    bool open_;
  };
  // What Snapshot calls: begin returns whether a transaction was opened (end is called only then).
  virtual bool begin_read() = 0;
  virtual void end_read() = 0;

  // Whole tables (small).
  virtual Result<std::map<std::string, std::string>> meta() = 0;
  virtual Result<std::map<uint32_t, std::string>> strings() = 0;
  virtual Result<int64_t> string_count() = 0;
  virtual Result<std::vector<ProcessRow>> processes() = 0;
  virtual Result<std::vector<ThreadRow>> threads() = 0;
  virtual Result<std::vector<CounterTrackRow>> counter_tracks() = 0;
  virtual Result<std::vector<FlushRow>> flushes() = 0;
  // The latest flush (its dropped_total is the recording's count of dropped events so far);
  // nullopt before the first.
  virtual Result<std::optional<FlushRow>> last_flush() = 0;
  virtual Result<int64_t> count(const std::string& table) = 0;

  // Spans that overlap [t0, t1] (ns since session start), ordered by start. Unended spans count as
  // reaching to the end of the recording.
  virtual Result<std::vector<SpanRow>> spans(int64_t t0, int64_t t1) = 0;
  virtual Result<std::vector<SpanRow>> all_spans() = 0;
  virtual Result<std::vector<InstantRow>> instants() = 0;
  virtual Result<std::vector<CounterRow>> counters(int64_t track_id) = 0;
  virtual Result<std::vector<GpuActivityRow>> gpu_activities() = 0;

  // The analysis's bulk load: the spans and instants whose name is one of `name_ids`, and the
  // samples of the tracks `track_ids`, in table order (sorting in memory is cheaper than asking
  // SQLite to, as no index covers time).
  virtual Result<std::vector<SpanRow>> spans_named(const std::vector<uint32_t>& name_ids) = 0;
  virtual Result<std::vector<InstantRow>> instants_named(const std::vector<uint32_t>& name_ids) = 0;
  // Each thread's first span of each name in `name_ids` (which threads wrote what), by id.
  virtual Result<std::vector<SpanRow>> first_spans_per_thread(const std::vector<uint32_t>& name_ids) = 0;

  // A time window of the rows named `name_ids`, in table order, for analyses that go through a
  // long recording part by part: spans that overlap [t0, t1] (the flush index finds them), and
  // instants with t0 <= ts <= t1. Instants have no time index: the collector writes each row
  // within one drain (~100 ms) of its time, so ids follow time to within kInstantSkewNs, and a
  // bisection on id bounds the rows to scan.
  static constexpr int64_t kInstantSkewNs = 60'000'000'000;
  virtual Result<std::vector<SpanRow>> spans_named_in(const std::vector<uint32_t>& name_ids, int64_t t0,
                                                      int64_t t1) = 0;
  virtual Result<std::vector<InstantRow>> instants_named_in(const std::vector<uint32_t>& name_ids, int64_t t0,
                                                            int64_t t1) = 0;
  virtual Result<std::vector<CounterRow>> counters_of(const std::vector<int64_t>& track_ids) = 0;
  // From t0 on (to t1): the samples of `track_ids` with t0 <= ts <= t1 and the GPU activities that
  // end at or after t0 and start by t1 (by start), each found by a bisection on id as
  // instants_named_in's.
  virtual Result<std::vector<CounterRow>> counters_of_from(const std::vector<int64_t>& track_ids, int64_t t0,
                                                           int64_t t1 = INT64_MAX) = 0;
  virtual Result<std::vector<GpuActivityRow>> gpu_activities_from(int64_t t0, int64_t t1 = INT64_MAX) = 0;
  // Where the latest `rows` events begin: the time of the newest drain (flushes row) such that
  // the drains after it wrote at most `rows` events; nullopt when the whole recording fits (or it
  // has no flushes).
  virtual Result<std::optional<int64_t>> time_of_last_rows(int64_t rows) = 0;
  // The summary tables (docs/schema.md, "Summaries"): whether the recording has them (one made
  // before them and not yet upgraded has not), and the rows of one level for the names `name_ids`,
  // ordered by bucket. A day's rows at the 100 s level are a few thousand.
  virtual Result<bool> has_summaries() = 0;
  // For a recording without them that cannot be upgraded (read-only, or not closed cleanly):
  // builds them from its rows into temporary tables of this Reader's connection, which the calls
  // above then read; the file is not touched (storage/upgrade.h). `progress` as the upgrade's.
  virtual Status build_temporary_summaries(const std::function<void(int64_t done, int64_t total)>& progress = {}) = 0;
  virtual Result<std::vector<SpanSummaryRow>> span_summaries(int64_t level_ns,
                                                             const std::vector<uint32_t>& name_ids) = 0;
  virtual Result<std::vector<InstantSummaryRow>> instant_summaries(int64_t level_ns,
                                                                   const std::vector<uint32_t>& name_ids) = 0;
  // The hand-offs of one level (ordered by bucket); nullopt for a recording made before
  // handoff_summaries was kept (its other summary tables are there, this one is not).
  virtual Result<std::optional<std::vector<HandoffSummaryRow>>> handoff_summaries(int64_t level_ns) = 0;
  // The loaders' queues of one level (ordered by bucket); nullopt for a recording made before
  // queue_summaries was kept.
  virtual Result<std::optional<std::vector<QueueSummaryRow>>> queue_summaries(int64_t level_ns) = 0;
  // The same, of the buckets first_bucket..last_bucket only (`stallscope top`'s last minute).
  virtual Result<std::optional<std::vector<QueueSummaryRow>>> queue_summaries(int64_t level_ns, int64_t first_bucket,
                                                                              int64_t last_bucket) = 0;
  // The same, of the buckets first_bucket..last_bucket only (the key's order: no scan of the level).
  virtual Result<std::vector<InstantSummaryRow>> instant_summaries(int64_t level_ns,
                                                                   const std::vector<uint32_t>& name_ids,
                                                                   int64_t first_bucket, int64_t last_bucket) = 0;
  // Every row of the summary tables, table by table, in the key's order, to the callbacks that are
  // set: what `merge` carries over from a recording whose older detail was deleted.
  struct SummaryVisitor {
    std::function<void(const SpanSummaryRow&)> span;
    std::function<void(const InstantSummaryRow&)> instant;
    std::function<void(const CounterSummaryRow&)> counter;
    std::function<void(const GpuSummaryRow&)> gpu;
    std::function<void(const HandoffSummaryRow&)> handoff;  // not called where the table is absent
    std::function<void(const QueueSummaryRow&)> queue;      // nor this one
  };
  virtual Status for_each_summary_row(const SummaryVisitor& to) = 0;
  // The first bucket of `level_ns` with a span named `name_id` of group `grp` (nullopt: none).
  // With `last`, the last such bucket; without `grp`, of any group.
  virtual Result<std::optional<int64_t>> first_span_bucket(int64_t level_ns, uint32_t name_id,
                                                           std::optional<int64_t> grp, bool last = false) = 0;
  // The first (or last) bucket of `level_ns` with an instant named `name_id`.
  virtual Result<std::optional<int64_t>> edge_instant_bucket(int64_t level_ns, uint32_t name_id, bool last) = 0;
  // The latest time any row reaches (a span that never ended counts at its start): a scan of
  // every table. The part of it from the drains and processes alone, which is cheap.
  virtual Result<int64_t> end_ns() = 0;
  virtual Result<int64_t> end_ns_of_flushes_and_processes() = 0;

  // Bounded reads of a time window (the dashboard's detail of a long recording, ui/recording_tail.h).
  // ids_before(t0): per table, an id such that every row reaching t0 or later has a larger one:
  // spans from the flush index (a drain writes the spans that ended since the one before), the
  // other tables by a bisection on id, give or take kInstantSkewNs. ids_through(t1): per table but
  // spans, an id at or past every row whose time is at or before t1.
  virtual Result<TableHeads> ids_before(int64_t t0) = 0;
  virtual Result<TableHeads> ids_through(int64_t t1) = 0;
  // The id ranges [first, last] of the spans table that hold every span overlapping [t0, t1]: the
  // drains around the window, and any later drain that wrote a span started by t1 (a long span);
  // adjacent ranges merged, in id order.
  virtual Result<std::vector<std::pair<int64_t, int64_t>>> span_id_ranges(int64_t t0, int64_t t1) = 0;
  // The summary tables at one level, without the sketches, for the dashboard's overview
  // (ui/overview.h): spans per (bucket, thread, name); GPU busy per (bucket, device); and every
  // table's rows per bucket (spans by start, instants, counter values, GPU activities).
  struct SpanTotal {
    int64_t bucket = 0, thread_id = 0;
    uint32_t name_id = 0;
    int64_t count = 0, total_ns = 0;
  };
  struct GpuTotal {
    int64_t bucket = 0, device = 0, count = 0, total_ns = 0;
  };
  virtual Result<std::vector<SpanTotal>> span_totals(int64_t level_ns) = 0;
  // Counter samples per (bucket, track): their count and sum, for a bucket's mean.
  struct CounterTotal {
    int64_t bucket = 0, track_id = 0, count = 0;
    double sum = 0;
  };
  virtual Result<std::vector<CounterTotal>> counter_totals(int64_t level_ns) = 0;
  virtual Result<std::vector<GpuTotal>> gpu_totals(int64_t level_ns) = 0;
  virtual Result<std::vector<std::pair<int64_t, int64_t>>> rows_per_bucket(int64_t level_ns) = 0;
  // The ids of the strings `values` (absent ones left out).
  virtual Result<std::map<std::string, uint32_t>> string_ids(const std::vector<std::string>& values) = 0;

  // Incremental reads: rows with after < id <= upto, in id order, to `row`.
  virtual Result<TableHeads> heads() = 0;
  // The smallest id past `after` in each table, or `after`'s own where none is past it.
  virtual Result<TableHeads> next_ids(const TableHeads& after) = 0;
  virtual Status for_each_string(int64_t after_id, const std::function<void(uint32_t, std::string)>& row) = 0;
  virtual Status for_each_span(int64_t after, int64_t upto, const std::function<void(const SpanRow&)>& row) = 0;
  virtual Status for_each_instant(int64_t after, int64_t upto, const std::function<void(const InstantRow&)>& row) = 0;
  virtual Status for_each_counter(int64_t after_rowid, int64_t upto_rowid,
                                  const std::function<void(const CounterRow&)>& row) = 0;
  virtual Status for_each_gpu_activity(int64_t after, int64_t upto,
                                       const std::function<void(const GpuActivityRow&)>& row) = 0;
  // Flushes with id > after_id: (id, ts_ns).
  virtual Status for_each_flush(int64_t after_id, const std::function<void(int64_t id, int64_t ts_ns)>& row) = 0;

  // The SQLite connection of a local recording, for tests that query it with their own SQL
  // (aborts on a remote one).
  Db& db();

 protected:
  Reader() = default;
  virtual Db* sqlite_db() { return nullptr; }
};

}  // namespace stallscope
