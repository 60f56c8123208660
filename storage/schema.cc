// Schema creation and validation; see schema.h and docs/schema.md.
#include "storage/schema.h"

#include <string>

#include "collector/event.h"

namespace stallscope {
namespace {

constexpr const char* kSchemaSql = R"sql(
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE event_kinds (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE units (
  table_name TEXT NOT NULL, column_name TEXT NOT NULL, unit TEXT NOT NULL, description TEXT NOT NULL,
  PRIMARY KEY (table_name, column_name)) WITHOUT ROWID;
CREATE TABLE strings (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE processes (
  id INTEGER PRIMARY KEY, pid INTEGER NOT NULL, ppid INTEGER, cmdline TEXT,
  start_ns INTEGER, end_ns INTEGER, exit_code INTEGER, exit_signal INTEGER);
CREATE TABLE threads (
  id INTEGER PRIMARY KEY, process_id INTEGER NOT NULL REFERENCES processes(id),
  tid INTEGER NOT NULL, name TEXT);
CREATE TABLE spans (
  id INTEGER PRIMARY KEY, thread_id INTEGER NOT NULL, start_ns INTEGER NOT NULL, dur_ns INTEGER,
  name_id INTEGER NOT NULL, depth INTEGER NOT NULL, arg0 INTEGER, arg1 INTEGER, arg2 INTEGER);
CREATE TABLE instants (
  id INTEGER PRIMARY KEY, thread_id INTEGER NOT NULL, ts_ns INTEGER NOT NULL,
  name_id INTEGER NOT NULL, arg0 INTEGER, arg1 INTEGER, arg2 INTEGER);
CREATE TABLE counter_tracks (
  id INTEGER PRIMARY KEY, name TEXT NOT NULL, unit TEXT NOT NULL, pid INTEGER NOT NULL);
CREATE TABLE counters (track_id INTEGER NOT NULL, ts_ns INTEGER NOT NULL, value REAL NOT NULL);
CREATE TABLE gpu_activities (
  id INTEGER PRIMARY KEY, process_id INTEGER NOT NULL, device INTEGER NOT NULL, stream INTEGER NOT NULL,
  context INTEGER NOT NULL, kind TEXT NOT NULL, start_ns INTEGER NOT NULL, dur_ns INTEGER NOT NULL,
  name_id INTEGER NOT NULL, bytes INTEGER, copy_kind TEXT, src_kind TEXT, dst_kind TEXT,
  correlation_id INTEGER NOT NULL);
CREATE TABLE flushes (
  id INTEGER PRIMARY KEY, ts_ns INTEGER NOT NULL, events INTEGER NOT NULL,
  dropped_total INTEGER NOT NULL, first_span_id INTEGER, last_span_id INTEGER,
  min_start_ns INTEGER, max_end_ns INTEGER);
CREATE VIEW span_view AS
  SELECT s.id, s.start_ns, s.dur_ns, s.start_ns + s.dur_ns AS end_ns, n.value AS name, s.depth,
         s.arg0, s.arg1, s.arg2, t.tid, t.name AS thread, p.pid, s.thread_id
  FROM spans s JOIN strings n ON n.id = s.name_id JOIN threads t ON t.id = s.thread_id
       JOIN processes p ON p.id = t.process_id;
CREATE VIEW instant_view AS
  SELECT i.id, i.ts_ns, n.value AS name, i.arg0, i.arg1, i.arg2, t.tid, t.name AS thread, p.pid
  FROM instants i JOIN strings n ON n.id = i.name_id JOIN threads t ON t.id = i.thread_id
       JOIN processes p ON p.id = t.process_id;
CREATE VIEW gpu_view AS
  SELECT g.id, g.start_ns, g.dur_ns, g.start_ns + g.dur_ns AS end_ns, g.kind, n.value AS name, g.device,
         g.stream, g.bytes, g.copy_kind, g.src_kind, g.dst_kind, g.correlation_id, p.pid
  FROM gpu_activities g JOIN strings n ON n.id = g.name_id JOIN processes p ON p.id = g.process_id;
CREATE VIEW counter_view AS
  SELECT c.ts_ns, k.name, k.unit, k.pid, c.value
  FROM counters c JOIN counter_tracks k ON k.id = c.track_id;
INSERT INTO units VALUES
  ('spans', 'start_ns', 'ns', 'start, nanoseconds since the session start (meta.start_mono_ns)'),
  ('spans', 'dur_ns', 'ns', 'duration; NULL if the span never ended (process killed)'),
  ('instants', 'ts_ns', 'ns', 'time, nanoseconds since the session start'),
  ('counters', 'ts_ns', 'ns', 'time, nanoseconds since the session start'),
  ('counters', 'value', 'counter_tracks.unit', 'value in the unit of its track'),
  ('processes', 'start_ns', 'ns', 'process joined the session, ns since the session start'),
  ('processes', 'end_ns', 'ns', 'process ended (or was found gone), ns since the session start'),
  ('gpu_activities', 'start_ns', 'ns', 'GPU start, ns since the session start (host clock)'),
  ('gpu_activities', 'dur_ns', 'ns', 'GPU duration'),
  ('gpu_activities', 'bytes', 'bytes', 'bytes copied or set'),
  ('flushes', 'ts_ns', 'ns', 'time of the flush, ns since the session start');

)sql";

// Version 2: the summaries (storage/summaries.h); also what upgrade_to_summaries() adds to a
// version 1 recording.
constexpr const char* kSummarySql = R"sql(
CREATE TABLE span_summaries (
  level_ns INTEGER NOT NULL, bucket INTEGER NOT NULL, thread_id INTEGER NOT NULL, name_id INTEGER NOT NULL,
  grp INTEGER NOT NULL, count INTEGER NOT NULL, total_ns INTEGER NOT NULL, min_ns INTEGER NOT NULL,
  max_ns INTEGER NOT NULL, sketch BLOB NOT NULL,
  PRIMARY KEY (level_ns, bucket, thread_id, name_id, grp)) WITHOUT ROWID;
CREATE TABLE instant_summaries (
  level_ns INTEGER NOT NULL, bucket INTEGER NOT NULL, thread_id INTEGER NOT NULL, name_id INTEGER NOT NULL,
  grp INTEGER NOT NULL, count INTEGER NOT NULL,
  PRIMARY KEY (level_ns, bucket, thread_id, name_id, grp)) WITHOUT ROWID;
CREATE TABLE counter_summaries (
  level_ns INTEGER NOT NULL, bucket INTEGER NOT NULL, track_id INTEGER NOT NULL, count INTEGER NOT NULL,
  sum REAL NOT NULL, min REAL NOT NULL, max REAL NOT NULL, last_ts_ns INTEGER NOT NULL, last REAL NOT NULL,
  PRIMARY KEY (level_ns, bucket, track_id)) WITHOUT ROWID;
CREATE TABLE gpu_summaries (
  level_ns INTEGER NOT NULL, bucket INTEGER NOT NULL, process_id INTEGER NOT NULL, device INTEGER NOT NULL,
  kind TEXT NOT NULL, count INTEGER NOT NULL, total_ns INTEGER NOT NULL, bytes INTEGER NOT NULL,
  PRIMARY KEY (level_ns, bucket, process_id, device, kind)) WITHOUT ROWID;
CREATE TABLE handoff_summaries (
  level_ns INTEGER NOT NULL, bucket INTEGER NOT NULL, thread_id INTEGER NOT NULL, loader INTEGER NOT NULL,
  batches INTEGER NOT NULL, samples INTEGER NOT NULL, unsized INTEGER NOT NULL, steps INTEGER NOT NULL,
  step_total_ns INTEGER NOT NULL, step_min_ns INTEGER NOT NULL, step_max_ns INTEGER NOT NULL,
  step_sketch BLOB NOT NULL, starts INTEGER NOT NULL, start_total_ns INTEGER NOT NULL,
  PRIMARY KEY (level_ns, bucket, thread_id, loader)) WITHOUT ROWID;
CREATE TABLE queue_summaries (
  level_ns INTEGER NOT NULL, bucket INTEGER NOT NULL, process_id INTEGER NOT NULL, loader INTEGER NOT NULL,
  covered_ns INTEGER NOT NULL, ready_ns INTEGER NOT NULL, ready_min INTEGER NOT NULL, ready_max INTEGER NOT NULL,
  empty_ns INTEGER NOT NULL, flight_ns INTEGER NOT NULL, flight_min INTEGER NOT NULL, flight_max INTEGER NOT NULL,
  PRIMARY KEY (level_ns, bucket, process_id, loader)) WITHOUT ROWID;
)sql";

constexpr const char* kSummaryUnitsSql = R"sql(
INSERT INTO units VALUES
  ('span_summaries', 'level_ns', 'ns', 'length of the interval: 1 s, 10 s or 100 s'),
  ('span_summaries', 'bucket', 'level_ns', 'the interval [bucket * level_ns, (bucket + 1) * level_ns) of session time'),
  ('span_summaries', 'total_ns', 'ns', 'summed durations of the spans that start in the interval'),
  ('span_summaries', 'min_ns', 'ns', 'shortest of those spans'),
  ('span_summaries', 'max_ns', 'ns', 'longest of those spans'),
  ('span_summaries', 'sketch', 'ns', 'quantile sketch of their durations, 1 % relative error (docs/schema.md)'),
  ('instant_summaries', 'level_ns', 'ns', 'length of the interval'),
  ('counter_summaries', 'level_ns', 'ns', 'length of the interval'),
  ('counter_summaries', 'sum', 'counter_tracks.unit', 'sum of the values in the interval'),
  ('counter_summaries', 'last_ts_ns', 'ns', 'time of the interval''s last value'),
  ('gpu_summaries', 'level_ns', 'ns', 'length of the interval'),
  ('gpu_summaries', 'total_ns', 'ns', 'summed durations of the activities that start in the interval'),
  ('gpu_summaries', 'bytes', 'bytes', 'bytes copied or set by them'),
  ('handoff_summaries', 'level_ns', 'ns', 'length of the interval'),
  ('handoff_summaries', 'batches', 'batches', 'next() calls of the loader that handed a batch and ended in the interval'),
  ('handoff_summaries', 'samples', 'samples', 'collated size of those batches whose size the recording holds'),
  ('handoff_summaries', 'unsized', 'batches', 'those batches whose collated size the recording does not hold'),
  ('handoff_summaries', 'step_total_ns', 'ns', 'summed step times (gap since the previous hand-off) ending in the interval'),
  ('handoff_summaries', 'step_sketch', 'ns', 'quantile sketch of those step times, 1 % relative error'),
  ('handoff_summaries', 'start_total_ns', 'ns', 'summed loader starts (dl.epoch_begin to the first next()) that began in the interval'),
  ('queue_summaries', 'level_ns', 'ns', 'length of the interval'),
  ('queue_summaries', 'covered_ns', 'ns', 'time in the interval the loader was active (first next() of an epoch to its end)'),
  ('queue_summaries', 'ready_ns', 'batch ns', 'integral over that time of the batches ready (put, not yet handed)'),
  ('queue_summaries', 'ready_min', 'batches', 'fewest batches ready for a positive time'),
  ('queue_summaries', 'ready_max', 'batches', 'most batches ready for a positive time'),
  ('queue_summaries', 'empty_ns', 'ns', 'time of covered_ns with no batch ready'),
  ('queue_summaries', 'flight_ns', 'batch ns', 'integral over that time of the batches in flight (sent, not yet put)'),
  ('queue_summaries', 'flight_min', 'batches', 'fewest batches in flight for a positive time'),
  ('queue_summaries', 'flight_max', 'batches', 'most batches in flight for a positive time');
)sql";

}  // namespace

Status create_schema(Db& db) {
  std::string sql = "PRAGMA application_id = " + std::to_string(kApplicationId) +
                    "; PRAGMA user_version = " + std::to_string(kSchemaVersion) + ";";
  if (Status s = db.exec(sql); !s.ok()) return s;
  if (Status s = db.exec("BEGIN"); !s.ok()) return s;
  if (Status s = db.exec(kSchemaSql); !s.ok()) return s;
  if (Status s = create_summary_tables(db); !s.ok()) return s;
  auto ins = db.prepare("INSERT INTO event_kinds (id, name) VALUES (?, ?)");
  if (!ins.ok()) return ins.status();
  for (int k = 0; k < static_cast<int>(EventKind::kCount); ++k) {
    if (Status s = (*ins)->bind(1, static_cast<int64_t>(k)).bind(2, kEventKindNames[k]).run(); !s.ok()) return s;
  }
  return db.exec("COMMIT");
}

Status create_summary_tables(Db& db, bool temporary) {
  if (!temporary) {
    if (Status s = db.exec(kSummarySql); !s.ok()) return s;
    return db.exec(kSummaryUnitsSql);
  }
  std::string sql = kSummarySql;
  for (size_t at = sql.find("CREATE TABLE "); at != std::string::npos; at = sql.find("CREATE TABLE ", at)) {
    sql.replace(at, 13, "CREATE TEMP TABLE ");
  }
  return db.exec(sql);
}

Status check_schema(Db& db) {
  const std::string& path = db.path();
  auto app = db.query_int("PRAGMA application_id");
  if (!app.ok() && app.status().message().find("malformed") != std::string::npos) {
    return Status::Error(path + " is damaged or truncated (" + app.status().message() + ")");
  }
  if (!app.ok()) {
    return Status::Error(path + " is not a stallscope recording (" + app.status().message() +
                         "); pass a .db file written by `stallscope run`");
  }
  if (*app != kApplicationId) {
    return Status::Error(
        path +
        " is not a stallscope recording (not written by stallscope); pass a .db file written by `stallscope run`");
  }
  auto ver = db.query_int("PRAGMA user_version");
  if (!ver.ok()) return Status::Error(path + ": " + ver.status().message());
  if (*ver > kSchemaVersion) {
    return Status::Error(path + " has schema version " + std::to_string(*ver) + " but this stallscope reads up to " +
                         std::to_string(kSchemaVersion) + "; upgrade stallscope to open it");
  }
  if (*ver < 1) return Status::Error(path + " has no valid schema version; the recording is damaged");
  auto tables = db.query_int(
      "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
      "('meta','strings','processes','threads','spans','instants','counter_tracks','counters','flushes',"
      "'gpu_activities')");
  if (!tables.ok()) {
    return Status::Error(path + " is damaged or truncated (" + tables.status().message() + ")");
  }
  if (*tables != 10) return Status::Error(path + " is missing tables; the recording is damaged or truncated");
  return Status::Ok();
}

}  // namespace stallscope
