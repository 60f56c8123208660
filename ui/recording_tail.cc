// Incremental reads of a session database; see recording_tail.h.
#include "ui/recording_tail.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "storage/row_decode.h"

namespace stallscope::ui {

Result<std::unique_ptr<RecordingTail>> RecordingTail::open(const std::string& path) {
  auto r = Reader::open(path);
  if (!r.ok()) return r.status();
  // Reads are large sequential scans: map the file rather than copy pages through the cache.
  (void)(*r)->db().exec("PRAGMA mmap_size = 4294967296; PRAGMA cache_size = -65536;");  // a hint: reads work without it
  return std::unique_ptr<RecordingTail>(new RecordingTail(std::move(*r), path));
}

Result<PollStats> RecordingTail::poll(RowSink& sink, int64_t max_rows) {
  PollStats st;
  Db& db = reader_->db();
  Status s;
  {
    ReadTransaction txn(db);
    s = poll_locked(sink, &st, max_rows);
  }
  if (!s.ok()) return in_file(path_, s);
  return st;
}

namespace {

// An instant as the second thread buffers it (InstantRow's optionals double its size).
struct PackedInstant {
  int64_t id, thread_id, ts_ns, a0, a1, a2;
  uint32_t name_id;
  uint8_t present;  // bit i: arg i is not NULL
};

PackedInstant pack(const InstantRow& r) {
  PackedInstant p{r.id, r.thread_id, r.ts_ns, r.arg0.value_or(0), r.arg1.value_or(0), r.arg2.value_or(0), r.name_id, 0};
  p.present = static_cast<uint8_t>((r.arg0 ? 1 : 0) | (r.arg1 ? 2 : 0) | (r.arg2 ? 4 : 0));
  return p;
}

InstantRow unpack(const PackedInstant& p) {
  InstantRow r;
  r.id = p.id;
  r.thread_id = p.thread_id;
  r.ts_ns = p.ts_ns;
  r.name_id = p.name_id;
  if (p.present & 1) r.arg0 = p.a0;
  if (p.present & 2) r.arg1 = p.a1;
  if (p.present & 4) r.arg2 = p.a2;
  return r;
}

const std::string kInstantsSql =
    std::string("SELECT ") + kInstantColumns + " FROM instants WHERE id > ?1 AND id <= ?2 ORDER BY id";

}  // namespace

Status RecordingTail::read_counters(RowSink& sink, int64_t from, int64_t to, int64_t* count) {
  Db& db = *counters_db_;
  *count = 0;
  if (counters_sql_.empty()) return Status::Ok();
  auto q = db.prepare(counters_sql_);
  if (!q.ok()) return q.status();
  Stmt& s = **q;
  s.bind(1, from).bind(2, to);
  int64_t n = 0;
  while (s.step()) {
    const int64_t track = s.int64(0);
    if (!wanted_track(track)) continue;
    sink.on_counter(CounterRow{track, s.int64(1), s.real(2)});
    ++n;
  }
  *count = n;
  return s.status();
}

Status RecordingTail::poll_locked(RowSink& sink, PollStats* st, int64_t max_rows) {
  Db& db = reader_->db();
  auto meta = reader_->meta();
  if (!meta.ok()) return meta.status();
  sink.on_meta(*meta);

  // Strings: new ids only; a full re-read if the count says some arrived below the last id.
  auto count = db.query_int("SELECT count(*) FROM strings");
  if (!count.ok()) return count.status();
  if (*count != strings_seen_) {
    for (int pass = 0; pass < 2; ++pass) {
      auto q = db.prepare(pass == 0 ? "SELECT id, value FROM strings WHERE id > ?1 ORDER BY id"
                                    : "SELECT id, value FROM strings ORDER BY id");
      if (!q.ok()) return q.status();
      Stmt& sq = **q;
      if (pass == 0) sq.bind(1, last_string_);
      if (pass == 1) strings_seen_ = 0;
      while (sq.step()) {
        const int64_t id = sq.int64(0);
        sink.on_string(static_cast<uint32_t>(id), sq.text(1));
        last_string_ = std::max(last_string_, id);
        ++strings_seen_;
      }
      if (!sq.status().ok()) return sq.status();
      if (strings_seen_ == *count) break;
    }
  }

  auto procs = reader_->processes();
  if (!procs.ok()) return procs.status();
  sink.on_processes(*procs);
  auto threads = reader_->threads();
  if (!threads.ok()) return threads.status();
  sink.on_threads(*threads);
  auto tracks = reader_->counter_tracks();
  if (!tracks.ok()) return tracks.status();
  sink.on_counter_tracks(*tracks);
  // The wanted tracks are picked here rather than with "track_id IN (...)": SQLite answers an IN
  // list with an index probe per row, which cost ~5 % of opening a large recording.
  wanted_tracks_.clear();
  bool any = false;
  for (const CounterTrackRow& t : *tracks) {
    if (!sink.wants_counter_track(t) || t.id < 0) continue;
    if (static_cast<size_t>(t.id) >= wanted_tracks_.size()) wanted_tracks_.resize(static_cast<size_t>(t.id) + 1, false);
    wanted_tracks_[static_cast<size_t>(t.id)] = true;
    any = true;
  }
  counters_sql_ = any ? "SELECT track_id, ts_ns, value FROM counters WHERE rowid > ?1 AND rowid <= ?2" : "";

  // What this transaction sees: every read stops there, whichever connection does it.
  auto max_counter = db.query_int("SELECT coalesce(max(rowid), 0) FROM counters");
  if (!max_counter.ok()) return max_counter.status();
  auto max_instant = db.query_int("SELECT coalesce(max(id), 0) FROM instants");
  if (!max_instant.ok()) return max_instant.status();
  auto max_span = db.query_int("SELECT coalesce(max(id), 0) FROM spans");
  if (!max_span.ok()) return max_span.status();
  auto max_gpu = db.query_int("SELECT coalesce(max(id), 0) FROM gpu_activities");
  if (!max_gpu.ok()) return max_gpu.status();
  int64_t hi_counter = *max_counter, hi_instant = *max_instant, hi_span = *max_span, hi_gpu = *max_gpu;
  // A large backlog (opening a big recording) is read in parts of about max_rows: the same share
  // of every table's new ids each time, which is about the same stretch of time, since every
  // table grows flush by flush.
  const int64_t pending = (hi_counter - last_counter_) + (hi_instant - last_instant_) + (hi_span - last_span_) +
                          (hi_gpu - last_gpu_);
  if (max_rows > 0 && pending > max_rows) {
    const double share = static_cast<double>(max_rows) / static_cast<double>(pending);
    auto cut = [share](int64_t last, int64_t hi) {
      return std::min(hi, last + static_cast<int64_t>(std::ceil(static_cast<double>(hi - last) * share)));
    };
    hi_counter = cut(last_counter_, hi_counter);
    hi_instant = cut(last_instant_, hi_instant);
    hi_span = cut(last_span_, hi_span);
    hi_gpu = cut(last_gpu_, hi_gpu);
  }
  st->pending = (*max_counter - hi_counter) + (*max_instant - hi_instant) + (*max_span - hi_span) + (*max_gpu - hi_gpu);

  // Many new rows (the first read of a large recording): a second connection reads the counters
  // (straight into the sink) and the instants (into a buffer, replayed below) while this one reads
  // the spans. The order rows reach the sink in does not matter: lanes are grouped at publish.
  constexpr int64_t kParallelRows = 200000;
  const bool parallel = (hi_counter - last_counter_) + (hi_instant - last_instant_) > kParallelRows;
  Status side_status;
  int64_t side_counters = 0;
  std::vector<PackedInstant> side_instants;
  std::thread side;
  if (parallel) {
    if (!counters_db_) {
      auto second = Db::open(path_, Db::Mode::kReadOnly);
      if (!second.ok()) return second.status();
      (void)(*second)->exec("PRAGMA mmap_size = 4294967296; PRAGMA cache_size = -65536;");  // a hint
      counters_db_ = std::move(*second);
    }
    const int64_t c0 = last_counter_, c1 = hi_counter, i0 = last_instant_, i1 = hi_instant;
    side = std::thread([&, c0, c1, i0, i1] {
      ReadTransaction txn(*counters_db_);
      side_status = read_counters(sink, c0, c1, &side_counters);
      if (!side_status.ok()) return;
      auto q = counters_db_->prepare(kInstantsSql);
      if (!q.ok()) {
        side_status = q.status();
        return;
      }
      Stmt& s = **q;
      s.bind(1, i0).bind(2, i1);
      side_instants.reserve(static_cast<size_t>(std::max<int64_t>(0, i1 - i0)));
      while (s.step()) side_instants.push_back(pack(decode_instant(s)));  // one decoder for instants
      side_status = s.status();
    });
  }
  struct Joiner {
    std::thread& t;
    ~Joiner() {
      if (t.joinable()) t.join();
    }
  } joiner{side};

  {  // Bounded like the others.
    auto q = db.prepare(std::string("SELECT ") + kSpanColumns + " FROM spans WHERE id > ?1 AND id <= ?2");
    if (!q.ok()) return q.status();
    Stmt& s = **q;
    s.bind(1, last_span_).bind(2, hi_span);
    while (s.step()) {
      sink.on_span(decode_span(s));
      ++st->spans;
    }
    if (!s.status().ok()) return s.status();
    last_span_ = hi_span;
  }

  if (parallel) {
    side.join();
    if (!side_status.ok()) return side_status;
    for (const PackedInstant& p : side_instants) sink.on_instant(unpack(p));
    st->instants = static_cast<int64_t>(side_instants.size());
    st->counters = side_counters;
  } else {
    auto q = db.prepare(kInstantsSql);
    if (!q.ok()) return q.status();
    Stmt& s = **q;
    s.bind(1, last_instant_).bind(2, hi_instant);
    while (s.step()) {
      sink.on_instant(decode_instant(s));
      ++st->instants;
    }
    if (!s.status().ok()) return s.status();
    if (!counters_sql_.empty()) {
      auto c = db.prepare(counters_sql_);
      if (!c.ok()) return c.status();
      Stmt& sc = **c;
      sc.bind(1, last_counter_).bind(2, hi_counter);
      while (sc.step()) {
        const int64_t track = sc.int64(0);
        if (!wanted_track(track)) continue;
        sink.on_counter(CounterRow{track, sc.int64(1), sc.real(2)});
        ++st->counters;
      }
      if (!sc.status().ok()) return sc.status();
    }
  }
  last_instant_ = hi_instant;
  last_counter_ = hi_counter;

  {
    auto q = db.prepare(std::string("SELECT ") + kGpuActivityColumns +
                        " FROM gpu_activities WHERE id > ?1 AND id <= ?2 ORDER BY id");
    if (!q.ok()) return q.status();
    Stmt& s = **q;
    s.bind(1, last_gpu_).bind(2, hi_gpu);
    while (s.step()) {
      const GpuActivityRow r = decode_gpu_activity(s);
      sink.on_gpu(r);
      ++st->gpu;
    }
    if (!s.status().ok()) return s.status();
    last_gpu_ = hi_gpu;
  }
  {
    auto q = db.prepare("SELECT id, ts_ns FROM flushes WHERE id > ?1 ORDER BY id");
    if (!q.ok()) return q.status();
    Stmt& s = **q;
    s.bind(1, last_flush_);
    while (s.step()) {
      last_flush_ = s.int64(0);
      sink.on_flush(s.int64(1));
    }
    if (!s.status().ok()) return s.status();
  }
  st->rows = st->spans + st->instants + st->counters + st->gpu;
  return Status::Ok();
}

}  // namespace stallscope::ui
