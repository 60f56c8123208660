// Session database writer; see writer.h.
#include "storage/writer.h"

#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "storage/schema.h"

namespace stallscope {
namespace {

void bind_opt(Stmt& s, int i, const std::optional<int64_t>& v) {
  if (v) {
    s.bind(i, *v);
  } else {
    s.bind_null(i);
  }
}

}  // namespace

Result<std::unique_ptr<Writer>> Writer::create(const std::string& path) {
  auto db = Db::open(path, Db::Mode::kCreate);
  if (!db.ok()) return db.status();
  if (Status s = (*db)->exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"); !s.ok()) {
    return Status::Error("cannot set up " + path + ": " + s.message());
  }
  if (Status s = create_schema(**db); !s.ok())
    return Status::Error("cannot create schema in " + path + ": " + s.message());
  std::unique_ptr<Writer> w(new Writer(std::move(*db)));
  if (Status s = w->prepare_all(); !s.ok()) return s;
  return w;
}

Status Writer::remove(const std::string& path) {
  // The side files first: a -wal left beside a new database of the same name would be read as its
  // own.
  for (const char* suffix : {"-wal", "-shm", ""}) {
    const std::string p = path + suffix;
    if (::unlink(p.c_str()) != 0 && errno != ENOENT) {
      return Status::Error("cannot remove " + p + ": " + std::strerror(errno));
    }
  }
  return Status::Ok();
}

Writer::~Writer() = default;

Status Writer::prepare_all() {
  struct Item {
    std::unique_ptr<Stmt>* slot;
    const char* sql;
  };
  const Item items[] = {
      {&meta_, "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)"},
      {&string_, "INSERT OR REPLACE INTO strings (id, value) VALUES (?, ?)"},
      {&process_,
       "INSERT INTO processes (pid, ppid, cmdline, start_ns, end_ns, exit_code, exit_signal) VALUES (?,?,?,?,?,?,?)"},
      {&process_end_, "UPDATE processes SET end_ns = ?, exit_code = ?, exit_signal = ? WHERE id = ?"},
      {&process_cmd_, "UPDATE processes SET cmdline = ? WHERE id = ?"},
      {&thread_, "INSERT INTO threads (process_id, tid, name) VALUES (?, ?, ?)"},
      {&thread_name_, "UPDATE threads SET name = ? WHERE id = ?"},
      {&span_,
       "INSERT INTO spans (thread_id, start_ns, dur_ns, name_id, depth, arg0, arg1, arg2) VALUES (?,?,?,?,?,?,?,?)"},
      {&instant_, "INSERT INTO instants (thread_id, ts_ns, name_id, arg0, arg1, arg2) VALUES (?,?,?,?,?,?)"},
      {&track_, "INSERT INTO counter_tracks (name, unit, pid) VALUES (?, ?, ?)"},
      {&counter_, "INSERT INTO counters (track_id, ts_ns, value) VALUES (?, ?, ?)"},
      {&gpu_,
       "INSERT INTO gpu_activities (process_id, device, stream, context, kind, start_ns, dur_ns, name_id, bytes, "
       "copy_kind, src_kind, dst_kind, correlation_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"},
      {&flush_,
       "INSERT INTO flushes (ts_ns, events, dropped_total, first_span_id, last_span_id, min_start_ns, max_end_ns) "
       "VALUES (?,?,?,?,?,?,?)"},
  };
  for (const Item& it : items) {
    auto s = db_->prepare(it.sql);
    if (!s.ok()) return Status::Error("cannot prepare statement: " + s.status().message());
    *it.slot = std::move(*s);
  }
  std::string many = "INSERT INTO spans (thread_id, start_ns, dur_ns, name_id, depth, arg0, arg1, arg2) VALUES ";
  for (size_t i = 0; i < kSpanRows; ++i) many += i == 0 ? "(?,?,?,?,?,?,?,?)" : ",(?,?,?,?,?,?,?,?)";
  auto sm = db_->prepare(many);
  if (!sm.ok()) return Status::Error("cannot prepare statement: " + sm.status().message());
  spans_ = std::move(*sm);
  pending_spans_.reserve(kSpanRows);
  if (Status s = count_span_ids(); !s.ok()) return s;
  summaries_ = std::make_unique<Summaries>(*db_);
  return summaries_->prepare();
}

void Writer::keep(Status s) {
  if (!s.ok() && batch_status_.ok()) batch_status_ = std::move(s);
}

Status Writer::set_meta(std::string_view key, std::string_view value) {
  return meta_->bind(1, key).bind(2, value).run();
}

Status Writer::begin() {
  batch_status_ = Status::Ok();
  Status s = db_->exec("BEGIN");
  in_batch_ = s.ok();
  return s;
}

Status Writer::commit() {
  write_spans();
  in_batch_ = false;
  keep(summaries_->write());
  if (keep_ns_ > 0 && flush_ns_) keep(purge());
  flush_ns_.reset();
  Status c = db_->exec("COMMIT");
  if (!c.ok()) {
    (void)db_->exec("ROLLBACK");  // the COMMIT's error is the one that matters
    // The batch's spans are gone: the next gets the largest id left + 1.
    (void)count_span_ids();
    return c;
  }
  Status b = batch_status_;
  batch_status_ = Status::Ok();
  return b;
}

void Writer::add_string(uint32_t id, std::string_view value) {
  summaries_->on_string(id, value);
  for (const char* kept : kKeptInstants) {
    if (value == kept) kept_names_.insert(id);
  }
  keep(string_->bind(1, static_cast<int64_t>(id)).bind(2, value).run());
}

int64_t Writer::add_process(const ProcessRow& r) {
  process_->bind(1, r.pid);
  bind_opt(*process_, 2, r.ppid);
  process_->bind(3, std::string_view(r.cmdline));
  bind_opt(*process_, 4, r.start_ns);
  bind_opt(*process_, 5, r.end_ns);
  bind_opt(*process_, 6, r.exit_code);
  bind_opt(*process_, 7, r.exit_signal);
  keep(process_->run());
  const int64_t id = db_->last_insert_rowid();
  summaries_->on_process(id, r.pid);
  return id;
}

void Writer::update_process_end(int64_t id, std::optional<int64_t> end_ns, std::optional<int64_t> exit_code,
                                std::optional<int64_t> exit_signal) {
  bind_opt(*process_end_, 1, end_ns);
  bind_opt(*process_end_, 2, exit_code);
  bind_opt(*process_end_, 3, exit_signal);
  process_end_->bind(4, id);
  keep(process_end_->run());
}

void Writer::update_process_cmdline(int64_t id, std::string_view cmdline) {
  keep(process_cmd_->bind(1, cmdline).bind(2, id).run());
}

int64_t Writer::add_thread(const ThreadRow& r) {
  keep(thread_->bind(1, r.process_id).bind(2, r.tid).bind(3, std::string_view(r.name)).run());
  const int64_t id = db_->last_insert_rowid();
  summaries_->on_thread(id, r.process_id);
  return id;
}

void Writer::set_thread_name(int64_t id, std::string_view name) { keep(thread_name_->bind(1, name).bind(2, id).run()); }

int64_t Writer::add_span(const SpanRow& r) {
  pending_spans_.push_back(r);
  const int64_t id = next_span_id_++;
  if (pending_spans_.size() == kSpanRows || !in_batch_) write_spans();
  if (summarize_) summaries_->add_span(r);
  return id;
}

Status Writer::count_span_ids() {
  auto next = db_->query_int("SELECT coalesce(max(id), 0) + 1 FROM spans");
  if (!next.ok()) return Status::Error("cannot read the spans table: " + next.status().message());
  next_span_id_ = *next;
  return Status::Ok();
}

void Writer::write_spans() {
  if (pending_spans_.empty()) return;
  const bool many = pending_spans_.size() == kSpanRows;
  int col = 1;
  for (const SpanRow& r : pending_spans_) {
    Stmt& s = many ? *spans_ : *span_;
    if (!many) col = 1;
    s.bind(col, r.thread_id).bind(col + 1, r.start_ns);
    bind_opt(s, col + 2, r.dur_ns);
    s.bind(col + 3, static_cast<int64_t>(r.name_id)).bind(col + 4, static_cast<int64_t>(r.depth));
    bind_opt(s, col + 5, r.arg0);
    bind_opt(s, col + 6, r.arg1);
    bind_opt(s, col + 7, r.arg2);
    col += 8;
    if (!many) keep(s.run());
  }
  if (many) keep(spans_->run());
  pending_spans_.clear();
  // SQLite gives a new row the largest id + 1, as add_span() counted (the id is not bound: a bound
  // one costs a search of the table). purge() never deletes the largest, so this holds; after a
  // failed write the count starts again from the table.
  if (!batch_status_.ok()) {
    (void)count_span_ids();
  } else if (db_->last_insert_rowid() != next_span_id_ - 1) {
    keep(Status::Error("span ids out of step: " + std::to_string(db_->last_insert_rowid()) + " written, " +
                       std::to_string(next_span_id_ - 1) + " counted"));
  }
}

void Writer::add_instant(const InstantRow& r) {
  if (summarize_) summaries_->add_instant(r);
  Stmt& s = *instant_;
  s.bind(1, r.thread_id).bind(2, r.ts_ns).bind(3, static_cast<int64_t>(r.name_id));
  bind_opt(s, 4, r.arg0);
  bind_opt(s, 5, r.arg1);
  bind_opt(s, 6, r.arg2);
  keep(s.run());
}

int64_t Writer::add_counter_track(const CounterTrackRow& r) {
  keep(track_->bind(1, std::string_view(r.name)).bind(2, std::string_view(r.unit)).bind(3, r.pid).run());
  return db_->last_insert_rowid();
}

void Writer::add_counter(const CounterRow& r) {
  if (summarize_) summaries_->add_counter(r);
  keep(counter_->bind(1, r.track_id).bind(2, r.ts_ns).bind(3, r.value).run());
}

void Writer::add_flush(const FlushRow& r) {
  write_spans();
  flush_ns_ = r.ts_ns;
  Stmt& s = *flush_;
  s.bind(1, r.ts_ns).bind(2, r.events).bind(3, r.dropped_total);
  bind_opt(s, 4, r.first_span_id);
  bind_opt(s, 5, r.last_span_id);
  bind_opt(s, 6, r.min_start_ns);
  bind_opt(s, 7, r.max_end_ns);
  keep(s.run());
}

void Writer::add_gpu_activity(const GpuActivityRow& r) {
  if (summarize_) summaries_->add_gpu(r);
  Stmt& s = *gpu_;
  s.bind(1, r.process_id).bind(2, r.device).bind(3, r.stream).bind(4, r.context).bind(5, std::string_view(r.kind));
  s.bind(6, r.start_ns).bind(7, r.dur_ns).bind(8, static_cast<int64_t>(r.name_id));
  if (r.kind == "memcpy" || r.kind == "memset") {
    s.bind(9, r.bytes);
  } else {
    s.bind_null(9);
  }
  if (r.kind == "memcpy") {
    s.bind(10, std::string_view(r.copy_kind))
        .bind(11, std::string_view(r.src_kind))
        .bind(12, std::string_view(r.dst_kind));
  } else {
    s.bind_null(10).bind_null(11).bind_null(12);
  }
  s.bind(13, r.correlation_id);
  keep(s.run());
}

Status Writer::finish() {
  // The queues' events that still wait for later rows (storage/summaries.h): there are none now.
  if (Status s = begin(); !s.ok()) return s;
  summaries_->finish_queues();
  if (Status s = commit(); !s.ok()) return s;
  if (Status s = db_->exec("PRAGMA wal_checkpoint(TRUNCATE)"); !s.ok()) return s;
  // A finished recording is one self-contained file: readers need no -wal/-shm beside it (and do
  // not create them). If a reader holds the file open the switch fails and the file stays in WAL
  // mode, which reads the same.
  (void)db_->exec("PRAGMA journal_mode = DELETE");
  return Status::Ok();
}

Status Writer::set_keep_detail(int64_t keep_ns) {
  keep_ns_ = std::max<int64_t>(0, keep_ns);
  return set_meta("keep_detail_ns", std::to_string(keep_ns_));
}

// Rows drained at a flush happened before it: once a flush is more than keep_ns_ before the latest,
// the rows of its commit (the id ranges up to it) are deleted, by rowid ranges (no time index).
// The time filters only guard against rows whose times cannot be (a damaged clock): those stay.
Status Writer::purge() {
  Drained now;
  now.flush_ns = *flush_ns_;
  for (auto [table, id] : {std::pair<const char*, int64_t*>{"spans", &now.span},
                           {"instants", &now.instant},
                           {"counters", &now.counter},
                           {"gpu_activities", &now.gpu}}) {
    auto max = db_->query_int(std::string("SELECT coalesce(max(rowid), 0) FROM ") + table);
    if (!max.ok()) return max.status();
    *id = *max;
  }
  // One entry a second at most: a later drain's ids and time cover the earlier ones' rows.
  if (!drained_.empty() && now.flush_ns - drained_.back().first_ns < 1'000'000'000) {
    now.first_ns = drained_.back().first_ns;
    drained_.back() = now;
  } else {
    now.first_ns = now.flush_ns;
    drained_.push_back(now);
  }
  const int64_t cutoff = now.flush_ns - keep_ns_;
  // In steps: a delete every kPurgeStepNs of session time, not every drain.
  if (drained_.front().flush_ns >= cutoff - std::min(kPurgeStepNs, keep_ns_ / 4)) return Status::Ok();
  Drained upto;
  while (!drained_.empty() && drained_.front().flush_ns < cutoff) {
    upto = drained_.front();
    drained_.pop_front();
  }
  std::string kept;
  for (uint32_t id : kept_names_) kept += (kept.empty() ? "" : ",") + std::to_string(id);
  const std::string c = std::to_string(cutoff);
  auto range = [](int64_t after, int64_t last) {
    return "rowid > " + std::to_string(after) + " AND rowid <= " + std::to_string(last);
  };
  const std::string sql = "DELETE FROM spans WHERE " + range(purged_.span, std::min(upto.span, next_span_id_ - 2)) +
                          " AND dur_ns IS NOT NULL AND start_ns + dur_ns < " + c + "; DELETE FROM instants WHERE " +
                          range(purged_.instant, upto.instant) + " AND ts_ns < " + c +
                          (kept.empty() ? "" : " AND name_id NOT IN (" + kept + ")") + "; DELETE FROM counters WHERE " +
                          range(purged_.counter, upto.counter) + " AND ts_ns < " + c +
                          "; DELETE FROM gpu_activities WHERE " + range(purged_.gpu, upto.gpu) +
                          " AND start_ns + dur_ns < " + c + ";";
  if (Status s = db_->exec(sql); !s.ok()) return s;
  purged_ = upto;
  return set_meta("detail_from_ns", std::to_string(upto.flush_ns));
}

}  // namespace stallscope
