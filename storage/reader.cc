// Session database reader; see reader.h.
#include "storage/reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <initializer_list>
#include <mutex>
#include <tuple>

#include "storage/row_decode.h"
#include "storage/schema.h"
#include "storage/sqlite.h"
#include "storage/sqlite_reader.h"
#include "storage/upgrade.h"
#include "storage/uri_openers.h"

namespace stallscope {
namespace {

template <typename T, typename F>
Result<std::vector<T>> collect(Db& db, const std::string& sql, F row) {
  auto st = db.prepare(sql);
  if (!st.ok()) return Status::Error(db.path() + ": " + st.status().message());
  std::vector<T> out;
  while ((*st)->step()) out.push_back(row(**st));
  if (!(*st)->status().ok()) return Status::Error(db.path() + ": " + (*st)->status().message());
  return out;
}

// Runs `sql` with `binds` as ?1, ?2, ... and hands each row's statement to `row`.
template <typename F>
Status stream(Db& db, const std::string& sql, std::initializer_list<int64_t> binds, F&& row) {
  auto st = db.prepare(sql);
  if (!st.ok()) return in_file(db.path(), st.status());
  Stmt& s = **st;
  int i = 1;
  for (int64_t b : binds) s.bind(i++, b);
  while (s.step()) row(s);
  return in_file(db.path(), s.status());
}

// "1,2,3" for an IN (...) list of integer ids.
template <typename T>
std::string id_list(const std::vector<T>& ids) {
  std::string out;
  for (const T& id : ids) {
    if (!out.empty()) out += ",";
    out += std::to_string(id);
  }
  return out;
}

}  // namespace

namespace {
UriOpeners<Reader::UriOpener>& openers() {
  static UriOpeners<Reader::UriOpener> o;
  return o;
}
}  // namespace

Reader::~Reader() = default;

Db& Reader::db() {
  Db* d = sqlite_db();
  if (!d) std::abort();  // tests only, on local recordings
  return *d;
}

Reader::Snapshot::Snapshot(Reader& r) : r_(r), open_(r.begin_read()) {}
Reader::Snapshot::~Snapshot() {
  if (open_) r_.end_read();
}

bool Reader::is_uri(const std::string& path) {
  const size_t colon = path.find("://");
  if (colon == std::string::npos || colon == 0) return false;
  for (size_t i = 0; i < colon; ++i)
    if (!std::isalpha(static_cast<unsigned char>(path[i]))) return false;
  return true;
}

void Reader::set_uri_opener(const std::string& scheme, UriOpener opener) { openers().set(scheme, std::move(opener)); }

Result<std::unique_ptr<Reader>> Reader::open(const std::string& path) {
  if (!is_uri(path)) return SqliteReader::open_file(path);
  UriOpener opener = openers().of(path);
  if (!opener)
    return Status::Error(
        "cannot open " + path + ": this program does not read " + path.substr(0, path.find("://")) +
        ":// recordings; pass a file, or an ssh://host/path or tcp://host:port/path URI to stallscope ui");
  return opener(path);
}

SqliteReader::SqliteReader(std::unique_ptr<Db> db) : db_(std::move(db)) {}
SqliteReader::~SqliteReader() = default;

const std::string& SqliteReader::path() const { return db_->path(); }

void SqliteReader::prefer_large_scans() {
  (void)db_->exec("PRAGMA mmap_size = 4294967296; PRAGMA cache_size = -65536;");  // a hint: reads work without it
}

bool SqliteReader::begin_read() { return db_->exec("BEGIN").ok(); }
void SqliteReader::end_read() { (void)db_->exec("COMMIT"); }  // a read transaction has nothing to keep

Result<std::unique_ptr<Reader>> SqliteReader::open_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::Error("cannot open " + path + ": no such file");
  if (!S_ISREG(st.st_mode)) return Status::Error(path + " is not a regular file; pass a .db recording");
  if (st.st_size == 0) return Status::Error(path + " is empty, not a stallscope recording");
  auto db = Db::open(path, Db::Mode::kReadOnly);
  if (!db.ok()) return db.status();
  // A file cut short outside of SQLite (copy interrupted, disk full) is caught here rather than
  // midway through a query: without a WAL beside it, the main file must hold every page.
  struct stat wal;
  if (::stat((path + "-wal").c_str(), &wal) != 0) {
    auto pages = (*db)->query_int("PRAGMA page_count");
    auto page_size = (*db)->query_int("PRAGMA page_size");
    if (pages.ok() && page_size.ok() && *pages * *page_size > st.st_size) {
      return Status::Error(path + " is truncated (" + std::to_string(st.st_size) + " of " +
                           std::to_string(*pages * *page_size) + " bytes); the recording is damaged");
    }
  }
  if (Status s = check_schema(**db); !s.ok()) return s;
  return std::unique_ptr<Reader>(new SqliteReader(std::move(*db)));
}

Result<std::map<std::string, std::string>> SqliteReader::meta() {
  auto st = db_->prepare("SELECT key, value FROM meta");
  if (!st.ok()) return st.status();
  std::map<std::string, std::string> out;
  while ((*st)->step()) out[(*st)->text(0)] = (*st)->text(1);
  if (!(*st)->status().ok()) return (*st)->status();
  return out;
}

Result<std::map<uint32_t, std::string>> SqliteReader::strings() {
  auto st = db_->prepare("SELECT id, value FROM strings");
  if (!st.ok()) return st.status();
  std::map<uint32_t, std::string> out;
  while ((*st)->step()) out[static_cast<uint32_t>((*st)->int64(0))] = (*st)->text(1);
  if (!(*st)->status().ok()) return (*st)->status();
  return out;
}

Result<int64_t> SqliteReader::string_count() { return db_->query_int("SELECT count(*) FROM strings"); }

Result<std::vector<ProcessRow>> SqliteReader::processes() {
  return collect<ProcessRow>(
      *db_, "SELECT id, pid, ppid, cmdline, start_ns, end_ns, exit_code, exit_signal FROM processes ORDER BY id",
      [](const Stmt& s) {
        ProcessRow r;
        r.id = s.int64(0);
        r.pid = s.int64(1);
        r.ppid = column_opt(s, 2);
        r.cmdline = s.text(3);
        r.start_ns = column_opt(s, 4);
        r.end_ns = column_opt(s, 5);
        r.exit_code = column_opt(s, 6);
        r.exit_signal = column_opt(s, 7);
        return r;
      });
}

Result<std::vector<ThreadRow>> SqliteReader::threads() {
  return collect<ThreadRow>(*db_, "SELECT id, process_id, tid, name FROM threads ORDER BY id", [](const Stmt& s) {
    return ThreadRow{s.int64(0), s.int64(1), s.int64(2), s.text(3)};
  });
}

Result<std::vector<SpanRow>> SqliteReader::span_query(const std::string& where, int64_t a, int64_t b) {
  auto st = db_->prepare(std::string("SELECT ") + kSpanColumns + " FROM spans " + where + " ORDER BY start_ns, depth");
  if (!st.ok()) return Status::Error(db_->path() + ": " + st.status().message());
  Stmt& s = **st;
  if (where.find('?') != std::string::npos) s.bind(1, a).bind(2, b);
  std::vector<SpanRow> out;
  while (s.step()) out.push_back(decode_span(s));
  if (!s.status().ok()) return Status::Error(db_->path() + ": " + s.status().message());
  return out;
}

Result<std::vector<SpanRow>> SqliteReader::spans(int64_t t0, int64_t t1) {
  // The flushes table is the time index: each flush covers a contiguous range of span ids and
  // knows the earliest start and latest end among them (NULL: one never ended), so a window maps
  // to an id range.
  return span_query(
      "WHERE id BETWEEN "
      "  (SELECT coalesce(min(first_span_id), 0) FROM flushes "
      "     WHERE (max_end_ns IS NULL OR max_end_ns >= ?1) AND min_start_ns <= ?2) AND "
      "  (SELECT coalesce(max(last_span_id), -1) FROM flushes "
      "     WHERE (max_end_ns IS NULL OR max_end_ns >= ?1) AND min_start_ns <= ?2) "
      "AND start_ns <= ?2 AND (dur_ns IS NULL OR start_ns + dur_ns >= ?1)",
      t0, t1);
}

Result<std::vector<SpanRow>> SqliteReader::all_spans() { return span_query("", 0, 0); }

Result<std::vector<InstantRow>> SqliteReader::instants() {
  return collect<InstantRow>(*db_, std::string("SELECT ") + kInstantColumns + " FROM instants ORDER BY ts_ns",
                             decode_instant);
}

Result<std::vector<CounterTrackRow>> SqliteReader::counter_tracks() {
  return collect<CounterTrackRow>(*db_, "SELECT id, name, unit, pid FROM counter_tracks ORDER BY id",
                                  [](const Stmt& s) {
                                    return CounterTrackRow{s.int64(0), s.text(1), s.text(2), s.int64(3)};
                                  });
}

Result<std::vector<CounterRow>> SqliteReader::counters(int64_t track_id) {
  return collect<CounterRow>(
      *db_,
      "SELECT track_id, ts_ns, value FROM counters WHERE track_id = " + std::to_string(track_id) + " ORDER BY ts_ns",
      [](const Stmt& s) {
        return CounterRow{s.int64(0), s.int64(1), s.real(2)};
      });
}

Result<std::vector<FlushRow>> SqliteReader::flushes() {
  return collect<FlushRow>(*db_,
                           "SELECT ts_ns, events, dropped_total, first_span_id, last_span_id, min_start_ns, max_end_ns "
                           "FROM flushes ORDER BY id",
                           [](const Stmt& s) {
                             FlushRow r;
                             r.ts_ns = s.int64(0);
                             r.events = s.int64(1);
                             r.dropped_total = s.int64(2);
                             r.first_span_id = column_opt(s, 3);
                             r.last_span_id = column_opt(s, 4);
                             r.min_start_ns = column_opt(s, 5);
                             r.max_end_ns = column_opt(s, 6);
                             return r;
                           });
}

Result<std::optional<FlushRow>> SqliteReader::last_flush() {
  auto rows = collect<FlushRow>(*db_, "SELECT ts_ns, events, dropped_total FROM flushes ORDER BY id DESC LIMIT 1",
                                [](const Stmt& s) {
                                  FlushRow r;
                                  r.ts_ns = s.int64(0);
                                  r.events = s.int64(1);
                                  r.dropped_total = s.int64(2);
                                  return r;
                                });
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return std::optional<FlushRow>();
  return std::optional<FlushRow>(rows->front());
}

Result<std::vector<GpuActivityRow>> SqliteReader::gpu_activities() {
  return collect<GpuActivityRow>(
      *db_, std::string("SELECT ") + kGpuActivityColumns + " FROM gpu_activities ORDER BY start_ns",
      decode_gpu_activity);
}

Result<int64_t> SqliteReader::count(const std::string& table) {
  static const char* const kTables[] = {"spans",     "instants", "counters", "threads",
                                        "processes", "strings",  "flushes",  "gpu_activities"};
  for (const char* t : kTables) {
    if (table == t) return db_->query_int("SELECT count(*) FROM " + table);
  }
  return Status::Error("unknown table " + table);
}

Result<std::vector<SpanRow>> SqliteReader::spans_named(const std::vector<uint32_t>& name_ids) {
  std::vector<SpanRow> out;
  if (name_ids.empty()) return out;
  Status s =
      stream(*db_, std::string("SELECT ") + kSpanColumns + " FROM spans WHERE name_id IN (" + id_list(name_ids) + ")",
             {}, [&](const Stmt& st) { out.push_back(decode_span(st)); });
  if (!s.ok()) return s;
  return out;
}

namespace {
// Whether `table` is there, in the file or among the connection's temporary tables.
Result<bool> has_table(Db& db, const char* table) {
  auto n = db.prepare(
      "SELECT count(*) FROM (SELECT name FROM sqlite_master WHERE type = 'table' UNION ALL "
      "SELECT name FROM sqlite_temp_master WHERE type = 'table') WHERE name = ?1");
  if (!n.ok()) return n.status();
  (*n)->bind(1, std::string_view(table));
  if ((*n)->step()) return (*n)->int64(0) > 0;
  return (*n)->status();
}
}  // namespace

Result<bool> SqliteReader::has_summaries() {
  for (const char* table : {"span_summaries", "instant_summaries"}) {
    auto has = has_table(*db_, table);
    if (!has.ok() || !*has) return has;
  }
  return true;
}

namespace {
// The rows of one level of a summary table added after version 2 first shipped, by bucket (of the
// buckets `range` only, when given); nullopt where the recording does not have the table.
template <typename Row, typename Decode>
Result<std::optional<std::vector<Row>>> optional_summaries(Db& db, const char* table, const char* columns,
                                                           int64_t level_ns, Decode decode,
                                                           std::optional<std::pair<int64_t, int64_t>> range = {}) {
  auto has = has_table(db, table);
  if (!has.ok()) return has.status();
  if (!*has) return std::optional<std::vector<Row>>();
  const std::string buckets =
      range ? " AND bucket BETWEEN " + std::to_string(range->first) + " AND " + std::to_string(range->second) : "";
  auto rows = collect<Row>(db,
                           std::string("SELECT ") + columns + " FROM " + table +
                               " WHERE level_ns = " + std::to_string(level_ns) + buckets + " ORDER BY bucket",
                           decode);
  if (!rows.ok()) return rows.status();
  return std::optional<std::vector<Row>>(std::move(*rows));
}
}  // namespace

Result<std::optional<std::vector<HandoffSummaryRow>>> SqliteReader::handoff_summaries(int64_t level_ns) {
  return optional_summaries<HandoffSummaryRow>(*db_, "handoff_summaries", kHandoffSummaryColumns, level_ns,
                                               decode_handoff_summary);
}

Result<std::optional<std::vector<QueueSummaryRow>>> SqliteReader::queue_summaries(int64_t level_ns) {
  return optional_summaries<QueueSummaryRow>(*db_, "queue_summaries", kQueueSummaryColumns, level_ns,
                                             decode_queue_summary);
}

Result<std::optional<std::vector<QueueSummaryRow>>> SqliteReader::queue_summaries(int64_t level_ns,
                                                                                  int64_t first_bucket,
                                                                                  int64_t last_bucket) {
  return optional_summaries<QueueSummaryRow>(*db_, "queue_summaries", kQueueSummaryColumns, level_ns,
                                             decode_queue_summary, std::make_pair(first_bucket, last_bucket));
}

Status SqliteReader::build_temporary_summaries(const std::function<void(int64_t done, int64_t total)>& progress) {
  return stallscope::build_temporary_summaries(*db_, progress);
}

Result<std::vector<SpanSummaryRow>> SqliteReader::span_summaries(int64_t level_ns,
                                                                 const std::vector<uint32_t>& name_ids) {
  if (name_ids.empty()) return std::vector<SpanSummaryRow>{};
  return collect<SpanSummaryRow>(*db_,
                                 std::string("SELECT ") + kSpanSummaryColumns +
                                     " FROM span_summaries WHERE level_ns = " + std::to_string(level_ns) +
                                     " AND name_id IN (" + id_list(name_ids) + ") ORDER BY bucket",
                                 decode_span_summary);
}

Status SqliteReader::for_each_summary_row(const SummaryVisitor& to) {
  // Each table in the key's order, to its callback when one is set.
  auto each = [&](const char* columns, const char* table, const auto& decode, const auto& row) -> Status {
    if (!row) return Status::Ok();
    return stream(*db_, std::string("SELECT ") + columns + " FROM " + table + " ORDER BY level_ns, bucket", {},
                  [&](const Stmt& st) { row(decode(st)); });
  };
  if (Status s = each(kSpanSummaryColumns, "span_summaries", decode_span_summary, to.span); !s.ok()) return s;
  if (Status s = each(kInstantSummaryColumns, "instant_summaries", decode_instant_summary, to.instant); !s.ok())
    return s;
  if (Status s = each(kCounterSummaryColumns, "counter_summaries", decode_counter_summary, to.counter); !s.ok())
    return s;
  if (Status s = each(kGpuSummaryColumns, "gpu_summaries", decode_gpu_summary, to.gpu); !s.ok()) return s;
  // Tables a version 2 recording may lack: read where they are there.
  auto if_there = [&](const char* columns, const char* table, const auto& decode, const auto& row) -> Status {
    if (!row) return Status::Ok();
    auto has = has_table(*db_, table);
    if (!has.ok()) return has.status();
    return *has ? each(columns, table, decode, row) : Status::Ok();
  };
  if (Status s = if_there(kHandoffSummaryColumns, "handoff_summaries", decode_handoff_summary, to.handoff); !s.ok())
    return s;
  return if_there(kQueueSummaryColumns, "queue_summaries", decode_queue_summary, to.queue);
}

Result<std::optional<int64_t>> SqliteReader::first_span_bucket(int64_t level_ns, uint32_t name_id,
                                                               std::optional<int64_t> grp, bool last) {
  return edge_bucket("span_summaries", level_ns, name_id, grp, last);
}

Result<std::optional<int64_t>> SqliteReader::edge_instant_bucket(int64_t level_ns, uint32_t name_id, bool last) {
  return edge_bucket("instant_summaries", level_ns, name_id, std::nullopt, last);
}

Result<std::optional<int64_t>> SqliteReader::edge_bucket(const char* table, int64_t level_ns, uint32_t name_id,
                                                         std::optional<int64_t> grp, bool last) {
  // Walked in the key's order from the end asked for, to the first row of the name: min() and max()
  // with a condition on a column past the key's prefix would read every bucket of the level.
  std::optional<int64_t> out;
  Status s = stream(*db_,
                    std::string("SELECT bucket FROM ") + table + " WHERE level_ns = ?1 AND name_id = ?2" +
                        (grp ? " AND grp = ?3" : "") + " ORDER BY bucket " + (last ? "DESC" : "ASC") + " LIMIT 1",
                    {level_ns, static_cast<int64_t>(name_id), grp.value_or(0)}, [&](const Stmt& st) {
                      if (!st.is_null(0)) out = st.int64(0);
                    });
  if (!s.ok()) return s;
  return out;
}

Result<std::vector<InstantSummaryRow>> SqliteReader::instant_summaries(int64_t level_ns,
                                                                       const std::vector<uint32_t>& name_ids) {
  return instant_summaries(level_ns, name_ids, INT64_MIN, INT64_MAX);
}

Result<std::vector<InstantSummaryRow>> SqliteReader::instant_summaries(int64_t level_ns,
                                                                       const std::vector<uint32_t>& name_ids,
                                                                       int64_t first_bucket, int64_t last_bucket) {
  if (name_ids.empty()) return std::vector<InstantSummaryRow>{};
  return collect<InstantSummaryRow>(
      *db_,
      std::string("SELECT ") + kInstantSummaryColumns + " FROM instant_summaries WHERE level_ns = " +
          std::to_string(level_ns) + " AND bucket BETWEEN " + std::to_string(first_bucket) + " AND " +
          std::to_string(last_bucket) + " AND name_id IN (" + id_list(name_ids) + ") ORDER BY bucket",
      decode_instant_summary);
}

Result<std::vector<SpanRow>> SqliteReader::first_spans_per_thread(const std::vector<uint32_t>& name_ids) {
  std::vector<SpanRow> out;
  if (name_ids.empty()) return out;
  const std::string names = id_list(name_ids);
  Status s =
      stream(*db_,
             std::string("SELECT ") + kSpanColumns + " FROM spans WHERE id IN (SELECT min(id) FROM spans WHERE " +
                 "name_id IN (" + names + ") GROUP BY thread_id, name_id) ORDER BY id",
             {}, [&](const Stmt& st) { out.push_back(decode_span(st)); });
  if (!s.ok()) return s;
  return out;
}

Result<std::vector<SpanRow>> SqliteReader::spans_named_in(const std::vector<uint32_t>& name_ids, int64_t t0,
                                                          int64_t t1) {
  std::vector<SpanRow> out;
  if (name_ids.empty()) return out;
  Status s = stream(*db_,
                    std::string("SELECT ") + kSpanColumns +
                        " FROM spans WHERE id BETWEEN "
                        "  (SELECT coalesce(min(first_span_id), 0) FROM flushes "
                        "     WHERE (max_end_ns IS NULL OR max_end_ns >= ?1) AND min_start_ns <= ?2) AND "
                        "  (SELECT coalesce(max(last_span_id), -1) FROM flushes "
                        "     WHERE (max_end_ns IS NULL OR max_end_ns >= ?1) AND min_start_ns <= ?2) "
                        "AND start_ns <= ?2 AND (dur_ns IS NULL OR start_ns + dur_ns >= ?1) AND name_id IN (" +
                        id_list(name_ids) + ")",
                    {t0, t1}, [&](const Stmt& st) { out.push_back(decode_span(st)); });
  if (!s.ok()) return s;
  return out;
}

// The first id of `table` at or after which every row's time `ts_col` is >= ts, give or take
// kInstantSkewNs: a bisection on id (rows are written in drain order, so time follows id to within
// the skew). `id_col` is the table's id (rowid for counters).
Result<int64_t> SqliteReader::id_from(const char* table, const char* id_col, const char* ts_col, int64_t ts) {
  auto last = db_->query_int(std::string("SELECT coalesce(max(") + id_col + "), 0) FROM " + table);
  if (!last.ok()) return in_file(db_->path(), last.status());
  int64_t lo = 1, hi = *last < INT64_MAX ? *last + 1 : INT64_MAX;  // a damaged file's ids can be anything
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    auto t = db_->query_int(std::string("SELECT coalesce((SELECT ") + ts_col + " FROM " + table + " WHERE " + id_col +
                            " >= " + std::to_string(mid) + " ORDER BY " + id_col + " LIMIT 1), " +
                            std::to_string(INT64_MAX) + ")");
    if (!t.ok()) return in_file(db_->path(), t.status());
    if (*t < ts) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

Result<int64_t> SqliteReader::instant_id_from(int64_t ts) { return id_from("instants", "id", "ts_ns", ts); }

Result<std::vector<InstantRow>> SqliteReader::instants_named_in(const std::vector<uint32_t>& name_ids, int64_t t0,
                                                                int64_t t1) {
  std::vector<InstantRow> out;
  if (name_ids.empty()) return out;
  // Held at the int64 limits: t0 and t1 may be the ends of time.
  auto from = instant_id_from(t0 < INT64_MIN + kInstantSkewNs ? INT64_MIN : t0 - kInstantSkewNs);
  if (!from.ok()) return from.status();
  auto to = instant_id_from(t1 > INT64_MAX - kInstantSkewNs - 1 ? INT64_MAX : t1 + kInstantSkewNs + 1);
  if (!to.ok()) return to.status();
  Status s = stream(*db_,
                    std::string("SELECT ") + kInstantColumns +
                        " FROM instants WHERE id >= ?1 AND id < ?2 AND ts_ns BETWEEN ?3 AND ?4 AND name_id IN (" +
                        id_list(name_ids) + ")",
                    {*from, *to, t0, t1}, [&](const Stmt& st) { out.push_back(decode_instant(st)); });
  if (!s.ok()) return s;
  return out;
}

Result<std::vector<InstantRow>> SqliteReader::instants_named(const std::vector<uint32_t>& name_ids) {
  std::vector<InstantRow> out;
  if (name_ids.empty()) return out;
  Status s = stream(
      *db_, std::string("SELECT ") + kInstantColumns + " FROM instants WHERE name_id IN (" + id_list(name_ids) + ")",
      {}, [&](const Stmt& st) { out.push_back(decode_instant(st)); });
  if (!s.ok()) return s;
  return out;
}

Result<std::vector<CounterRow>> SqliteReader::counters_of(const std::vector<int64_t>& track_ids) {
  std::vector<CounterRow> out;
  if (track_ids.empty()) return out;
  Status s = stream(*db_, "SELECT track_id, ts_ns, value FROM counters WHERE track_id IN (" + id_list(track_ids) + ")",
                    {}, [&](const Stmt& st) {
                      out.push_back(CounterRow{st.int64(0), st.int64(1), st.real(2)});
                    });
  if (!s.ok()) return s;
  return out;
}

Result<std::vector<CounterRow>> SqliteReader::counters_of_from(const std::vector<int64_t>& track_ids, int64_t t0,
                                                               int64_t t1) {
  std::vector<CounterRow> out;
  if (track_ids.empty()) return out;
  auto from = id_from("counters", "rowid", "ts_ns", t0 < INT64_MIN + kInstantSkewNs ? INT64_MIN : t0 - kInstantSkewNs);
  if (!from.ok()) return from.status();
  // Up to t1: the first row past its reach bounds the scan.
  auto to = t1 > INT64_MAX - kInstantSkewNs - 1 ? Result<int64_t>(INT64_MAX)
                                                : id_from("counters", "rowid", "ts_ns", t1 + kInstantSkewNs + 1);
  if (!to.ok()) return to.status();
  // The upper bound as a plain range on rowid (a disjunction there makes SQLite scan to the end).
  Status s = stream(*db_,
                    std::string("SELECT track_id, ts_ns, value FROM counters WHERE rowid >= ?1 AND ") +
                        (*to == INT64_MAX ? "?3 = ?3" : "rowid < ?3") +
                        " AND ts_ns >= ?2 AND ts_ns <= ?4 AND track_id IN (" + id_list(track_ids) + ")",
                    {*from, t0, *to, t1}, [&](const Stmt& st) {
                      out.push_back(CounterRow{st.int64(0), st.int64(1), st.real(2)});
                    });
  if (!s.ok()) return s;
  return out;
}

Result<std::vector<GpuActivityRow>> SqliteReader::gpu_activities_from(int64_t t0, int64_t t1) {
  auto from =
      id_from("gpu_activities", "id", "start_ns", t0 < INT64_MIN + kInstantSkewNs ? INT64_MIN : t0 - kInstantSkewNs);
  if (!from.ok()) return from.status();
  auto to = t1 > INT64_MAX - kInstantSkewNs - 1 ? Result<int64_t>(INT64_MAX)
                                                : id_from("gpu_activities", "id", "start_ns", t1 + kInstantSkewNs + 1);
  if (!to.ok()) return to.status();
  std::vector<GpuActivityRow> out;
  Status s = stream(*db_,
                    std::string("SELECT ") + kGpuActivityColumns + " FROM gpu_activities WHERE id >= ?1 AND " +
                        (*to == INT64_MAX ? "?3 = ?3" : "id < ?3") + " AND start_ns + dur_ns >= ?2 AND start_ns <= ?4",
                    {*from, t0, *to, t1}, [&](const Stmt& st) { out.push_back(decode_gpu_activity(st)); });
  if (!s.ok()) return s;
  std::stable_sort(out.begin(), out.end(),
                   [](const GpuActivityRow& a, const GpuActivityRow& b) { return a.start_ns < b.start_ns; });
  return out;
}

Result<std::optional<int64_t>> SqliteReader::time_of_last_rows(int64_t rows) {
  // Newest first, a page of drains at a time: the drain whose events no longer fit marks the time
  // from which the later drains' events happened (each drain writes what happened since the one
  // before).
  std::optional<int64_t> at;
  int64_t sum = 0, before = INT64_MAX;
  while (!at) {
    int64_t read = 0;
    Status s = stream(*db_, "SELECT id, ts_ns, events FROM flushes WHERE id < ?1 ORDER BY id DESC LIMIT 4096", {before},
                      [&](const Stmt& st) {
                        ++read;
                        before = st.int64(0);
                        if (at) return;
                        const int64_t events = std::max<int64_t>(0, st.int64(2));
                        if (__builtin_add_overflow(sum, events, &sum) || sum > rows) at = st.int64(1);
                      });
    if (!s.ok()) return in_file(db_->path(), s);
    if (read == 0) break;
  }
  return at;
}

Result<int64_t> SqliteReader::end_ns() {
  auto end = end_ns_of_flushes_and_processes();
  if (!end.ok()) return end;
  for (const char* sql :
       {"SELECT coalesce(max(start_ns + coalesce(dur_ns, 0)), 0) FROM spans",
        "SELECT coalesce(max(ts_ns), 0) FROM instants", "SELECT coalesce(max(ts_ns), 0) FROM counters",
        "SELECT coalesce(max(start_ns + dur_ns), 0) FROM gpu_activities"}) {
    auto v = db_->query_int(sql);
    if (!v.ok()) return in_file(db_->path(), v.status());
    *end = std::max(*end, *v);
  }
  return end;
}

Result<int64_t> SqliteReader::end_ns_of_flushes_and_processes() {
  int64_t end = 0;
  for (const char* sql : {"SELECT coalesce(max(ts_ns), 0) FROM flushes",
                          "SELECT coalesce(max(max(coalesce(start_ns, 0), coalesce(end_ns, 0))), 0) FROM processes"}) {
    auto v = db_->query_int(sql);
    if (!v.ok()) return in_file(db_->path(), v.status());
    end = std::max(end, *v);
  }
  return end;
}

Result<TableHeads> SqliteReader::heads() {
  TableHeads h;
  const std::pair<const char*, int64_t*> kQueries[] = {
      {"SELECT coalesce(max(id), 0) FROM spans", &h.spans},
      {"SELECT coalesce(max(id), 0) FROM instants", &h.instants},
      {"SELECT coalesce(max(rowid), 0) FROM counters", &h.counters},
      {"SELECT coalesce(max(id), 0) FROM gpu_activities", &h.gpu_activities}};
  for (const auto& [sql, into] : kQueries) {
    auto v = db_->query_int(sql);
    if (!v.ok()) return in_file(db_->path(), v.status());
    *into = *v;
  }
  return h;
}

Result<TableHeads> SqliteReader::next_ids(const TableHeads& after) {
  TableHeads h = after;
  const std::pair<const char*, int64_t*> kQueries[] = {
      {"SELECT min(id) FROM spans WHERE id > ?1", &h.spans},
      {"SELECT min(id) FROM instants WHERE id > ?1", &h.instants},
      {"SELECT min(rowid) FROM counters WHERE rowid > ?1", &h.counters},
      {"SELECT min(id) FROM gpu_activities WHERE id > ?1", &h.gpu_activities}};
  for (const auto& q : kQueries) {
    int64_t* into = q.second;  // not a structured binding: clang's lambdas cannot capture those
    Status s = stream(*db_, q.first, {*into}, [&](const Stmt& st) {
      if (!st.is_null(0)) *into = st.int64(0);
    });
    if (!s.ok()) return in_file(db_->path(), s);
  }
  return h;
}

Result<TableHeads> SqliteReader::ids_before(int64_t t0) {
  TableHeads h;
  // A flush with no span ending at or after t0 wrote nothing the window needs; the first one that
  // did bounds the spans (none: every span ended before t0, so the window starts past the last).
  auto spans = db_->query_int(
      "SELECT coalesce((SELECT min(first_span_id) FROM flushes WHERE first_span_id IS NOT NULL AND "
      "(max_end_ns IS NULL OR max_end_ns >= " +
      std::to_string(t0) + ")), (SELECT coalesce(max(id), 0) + 1 FROM spans))");
  if (!spans.ok()) return in_file(db_->path(), spans.status());
  h.spans = *spans > INT64_MIN ? *spans - 1 : *spans;
  const int64_t from = t0 < INT64_MIN + kInstantSkewNs ? INT64_MIN : t0 - kInstantSkewNs;
  const std::tuple<const char*, const char*, const char*, int64_t*> kTables[] = {
      {"instants", "id", "ts_ns", &h.instants},
      {"counters", "rowid", "ts_ns", &h.counters},
      {"gpu_activities", "id", "start_ns", &h.gpu_activities}};
  for (const auto& [table, id, ts, into] : kTables) {
    auto v = id_from(table, id, ts, from);
    if (!v.ok()) return v.status();
    *into = *v > INT64_MIN ? *v - 1 : *v;
  }
  return h;
}

Result<TableHeads> SqliteReader::ids_through(int64_t t1) {
  auto h = heads();
  if (!h.ok()) return h;
  const int64_t to = t1 > INT64_MAX - kInstantSkewNs - 1 ? INT64_MAX : t1 + kInstantSkewNs + 1;
  const std::tuple<const char*, const char*, const char*, int64_t*> kTables[] = {
      {"instants", "id", "ts_ns", &h->instants},
      {"counters", "rowid", "ts_ns", &h->counters},
      {"gpu_activities", "id", "start_ns", &h->gpu_activities}};
  for (const auto& [table, id, ts, into] : kTables) {
    auto v = id_from(table, id, ts, to);  // the first row past the window's reach
    if (!v.ok()) return v.status();
    *into = std::min(*into, *v > INT64_MIN ? *v - 1 : *v);
  }
  return h;
}

Result<std::vector<std::pair<int64_t, int64_t>>> SqliteReader::span_id_ranges(int64_t t0, int64_t t1) {
  std::vector<std::pair<int64_t, int64_t>> out;
  Status s = stream(*db_,
                    "SELECT first_span_id, last_span_id FROM flushes WHERE first_span_id IS NOT NULL AND "
                    "last_span_id IS NOT NULL AND (max_end_ns IS NULL OR max_end_ns >= ?1) AND min_start_ns <= ?2 "
                    "ORDER BY first_span_id",
                    {t0, t1}, [&](const Stmt& st) {
                      const int64_t a = st.int64(0), b = std::max(a, st.int64(1));
                      if (!out.empty() && a <= out.back().second + 1 && out.back().second < INT64_MAX) {
                        out.back().second = std::max(out.back().second, b);
                      } else {
                        out.emplace_back(a, b);
                      }
                    });
  if (!s.ok()) return s;
  return out;
}

Result<std::vector<Reader::SpanTotal>> SqliteReader::span_totals(int64_t level_ns) {
  return collect<SpanTotal>(
      *db_,
      "SELECT bucket, thread_id, name_id, count, total_ns FROM span_summaries WHERE level_ns = " +
          std::to_string(level_ns) + " ORDER BY bucket",
      [](const Stmt& st) {
        return SpanTotal{st.int64(0), st.int64(1), static_cast<uint32_t>(st.int64(2)), st.int64(3), st.int64(4)};
      });
}

Result<std::vector<Reader::CounterTotal>> SqliteReader::counter_totals(int64_t level_ns) {
  return collect<CounterTotal>(*db_,
                               "SELECT bucket, track_id, count, sum FROM counter_summaries WHERE level_ns = " +
                                   std::to_string(level_ns) + " ORDER BY bucket",
                               [](const Stmt& st) {
                                 return CounterTotal{st.int64(0), st.int64(1), st.int64(2), st.real(3)};
                               });
}

Result<std::vector<Reader::GpuTotal>> SqliteReader::gpu_totals(int64_t level_ns) {
  return collect<GpuTotal>(*db_,
                           "SELECT bucket, device, sum(count), sum(total_ns) FROM gpu_summaries WHERE level_ns = " +
                               std::to_string(level_ns) + " GROUP BY bucket, device ORDER BY bucket",
                           [](const Stmt& st) {
                             return GpuTotal{st.int64(0), st.int64(1), st.int64(2), st.int64(3)};
                           });
}

Result<std::vector<std::pair<int64_t, int64_t>>> SqliteReader::rows_per_bucket(int64_t level_ns) {
  const std::string level = std::to_string(level_ns);
  return collect<std::pair<int64_t, int64_t>>(
      *db_,
      "SELECT bucket, sum(n) FROM (SELECT bucket, count AS n FROM span_summaries WHERE level_ns = " + level +
          " UNION ALL SELECT bucket, count FROM instant_summaries WHERE level_ns = " + level +
          " UNION ALL SELECT bucket, count FROM counter_summaries WHERE level_ns = " + level +
          " UNION ALL SELECT bucket, count FROM gpu_summaries WHERE level_ns = " + level +
          ") GROUP BY bucket ORDER BY bucket",
      [](const Stmt& st) { return std::make_pair(st.int64(0), st.int64(1)); });
}

Result<std::map<std::string, uint32_t>> SqliteReader::string_ids(const std::vector<std::string>& values) {
  std::map<std::string, uint32_t> out;
  auto st = db_->prepare("SELECT id FROM strings WHERE value = ?1");
  if (!st.ok()) return in_file(db_->path(), st.status());
  for (const std::string& v : values) {
    Stmt& s = **st;
    s.reset();
    s.bind(1, v);
    if (s.step()) out[v] = static_cast<uint32_t>(s.int64(0));
    if (!s.status().ok()) return in_file(db_->path(), s.status());
  }
  return out;
}

Status SqliteReader::for_each_string(int64_t after_id, const std::function<void(uint32_t, std::string)>& row) {
  return stream(*db_, "SELECT id, value FROM strings WHERE id > ?1 ORDER BY id", {after_id},
                [&](const Stmt& s) { row(static_cast<uint32_t>(s.int64(0)), s.text(1)); });
}

Status SqliteReader::for_each_span(int64_t after, int64_t upto, const std::function<void(const SpanRow&)>& row) {
  return stream(*db_, std::string("SELECT ") + kSpanColumns + " FROM spans WHERE id > ?1 AND id <= ?2", {after, upto},
                [&](const Stmt& s) { row(decode_span(s)); });
}

Status SqliteReader::for_each_instant(int64_t after, int64_t upto, const std::function<void(const InstantRow&)>& row) {
  return stream(*db_,
                std::string("SELECT ") + kInstantColumns + " FROM instants WHERE id > ?1 AND id <= ?2 ORDER BY id",
                {after, upto}, [&](const Stmt& s) { row(decode_instant(s)); });
}

Status SqliteReader::for_each_counter(int64_t after_rowid, int64_t upto_rowid,
                                      const std::function<void(const CounterRow&)>& row) {
  return stream(*db_, "SELECT track_id, ts_ns, value FROM counters WHERE rowid > ?1 AND rowid <= ?2",
                {after_rowid, upto_rowid}, [&](const Stmt& s) {
                  row(CounterRow{s.int64(0), s.int64(1), s.real(2)});
                });
}

Status SqliteReader::for_each_gpu_activity(int64_t after, int64_t upto,
                                           const std::function<void(const GpuActivityRow&)>& row) {
  return stream(
      *db_,
      std::string("SELECT ") + kGpuActivityColumns + " FROM gpu_activities WHERE id > ?1 AND id <= ?2 ORDER BY id",
      {after, upto}, [&](const Stmt& s) { row(decode_gpu_activity(s)); });
}

Status SqliteReader::for_each_flush(int64_t after_id, const std::function<void(int64_t, int64_t)>& row) {
  return stream(*db_, "SELECT id, ts_ns FROM flushes WHERE id > ?1 ORDER BY id", {after_id},
                [&](const Stmt& s) { row(s.int64(0), s.int64(1)); });
}

}  // namespace stallscope
