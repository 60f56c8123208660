// Incremental reads of a session database on this machine; see local_tail.h. Every query is storage's Reader's.
#include "storage/local_tail.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <thread>

#include "common/procfs.h"
#include "storage/uri_openers.h"

namespace stallscope {

namespace {
UriOpeners<RecordingTail::UriOpener>& openers() {
  static UriOpeners<RecordingTail::UriOpener> o;
  return o;
}
}  // namespace

Result<std::unique_ptr<RecordingTail>> RecordingTail::open(const std::string& path) {
  if (!Reader::is_uri(path)) return LocalTail::open_file(path);
  UriOpener opener = openers().of(path);
  if (!opener) return Reader::open(path).status();  // the same one line
  return opener(path);
}

void RecordingTail::set_uri_opener(const std::string& scheme, UriOpener opener) {
  openers().set(scheme, std::move(opener));
}

int64_t LocalTail::file_bytes() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) return -1;
  int64_t bytes = st.st_size;
  if (::stat((path_ + "-wal").c_str(), &st) == 0) bytes += st.st_size;
  return bytes;
}

bool LocalTail::recorder_alive(const std::map<std::string, std::string>& meta) {
  auto pid_it = meta.find("owner_pid");
  if (pid_it == meta.end()) return false;
  auto host_it = meta.find("host");
  if (host_it != meta.end()) {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) == 0 && host_it->second != host) return false;
  }
  char* end = nullptr;
  const long pid = std::strtol(pid_it->second.c_str(), &end, 10);
  if (end == pid_it->second.c_str() || pid <= 0) return false;
  return procfs::alive(static_cast<int>(pid));
}

Result<std::unique_ptr<RecordingTail>> LocalTail::open_file(const std::string& path) {
  auto t = open_local(path);
  if (!t.ok()) return t.status();
  return std::unique_ptr<RecordingTail>(std::move(*t));
}

Result<std::unique_ptr<LocalTail>> LocalTail::open_local(const std::string& path) {
  auto r = Reader::open(path);
  if (!r.ok()) return r.status();
  (*r)->prefer_large_scans();
  return std::unique_ptr<LocalTail>(new LocalTail(std::move(*r), path));
}

Result<PollStats> LocalTail::poll(RowSink& sink, int64_t max_rows) {
  PollStats st;
  Status s;
  {
    Reader::Snapshot snapshot(*reader_);
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

// Ids come from the file, and a damaged one can be anywhere in int64: sums and differences of
// them are taken in 128 bits and clamped back.
int64_t clamped(__int128 v) {
  constexpr __int128 kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(std::clamp(v, kMin, kMax));
}

// How many ids lie after `from` up to `upto` (0 when none).
int64_t ids_between(int64_t from, int64_t upto) {
  return clamped(std::max<__int128>(0, static_cast<__int128>(upto) - from));
}

int64_t total(const TableHeads& h) {
  return clamped(static_cast<__int128>(h.spans) + h.instants + h.counters + h.gpu_activities);
}

TableHeads minus(const TableHeads& a, const TableHeads& b) {
  return TableHeads{ids_between(b.spans, a.spans), ids_between(b.instants, a.instants),
                    ids_between(b.counters, a.counters), ids_between(b.gpu_activities, a.gpu_activities)};
}

}  // namespace

Status LocalTail::read_counters(Reader& reader, RowSink& sink, int64_t from, int64_t to, int64_t* count) {
  *count = 0;
  if (!any_track_wanted_) return Status::Ok();
  int64_t n = 0;
  Status s = reader.for_each_counter(from, to, [&](const CounterRow& r) {
    if (!wanted_track(r.track_id) || !in_window(r.ts_ns)) return;
    sink.on_counter(r);
    ++n;
  });
  *count = n;
  return s;
}

Status LocalTail::read_small_tables(RowSink& sink) {
  auto meta = reader_->meta();
  if (!meta.ok()) return meta.status();
  sink.on_meta(*meta);

  // Strings: new ids only; a full re-read if the count says some arrived below the last id.
  auto count = reader_->string_count();
  if (!count.ok()) return count.status();
  if (*count != strings_seen_) {
    for (int pass = 0; pass < 2; ++pass) {
      if (pass == 1) strings_seen_ = 0;
      Status s = reader_->for_each_string(pass == 0 ? last_string_ : -1, [&](uint32_t id, std::string value) {
        sink.on_string(id, std::move(value));
        last_string_ = std::max<int64_t>(last_string_, id);
        ++strings_seen_;
      });
      if (!s.ok()) return s;
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
  any_track_wanted_ = false;
  for (const CounterTrackRow& t : *tracks) {
    // Track ids are small and dense; one past 1 M is a damaged row (a vector by id would
    // allocate for it).
    if (!sink.wants_counter_track(t) || t.id < 0 || t.id >= (1 << 20)) continue;
    if (static_cast<size_t>(t.id) >= wanted_tracks_.size()) wanted_tracks_.resize(static_cast<size_t>(t.id) + 1, false);
    wanted_tracks_[static_cast<size_t>(t.id)] = true;
    any_track_wanted_ = true;
  }
  return Status::Ok();
}

Result<TableHeads> LocalTail::plan(const TableHeads& heads, int64_t max_rows) {
  // A large backlog (opening a big recording) is read in parts of about max_rows: the same share
  // of every table's new ids each time, which is about the same stretch of time, since every
  // table grows flush by flush.
  const int64_t pending = total(minus(heads, last_));
  if (max_rows <= 0 || pending <= max_rows) return heads;
  const double share = static_cast<double>(max_rows) / static_cast<double>(pending);
  auto cut = [share](int64_t last, int64_t hi) {
    if (hi <= last) return hi;
    const double step = std::ceil(static_cast<double>(ids_between(last, hi)) * share);
    return clamped(std::min<__int128>(hi, static_cast<__int128>(last) + static_cast<__int128>(step)));
  };
  const TableHeads upto{cut(last_.spans, heads.spans), cut(last_.instants, heads.instants),
                        cut(last_.counters, heads.counters), cut(last_.gpu_activities, heads.gpu_activities)};
  // The cut assumes ids are dense. Where they are not (a damaged file's can be far apart), a part
  // still reaches each table's next row, so every poll makes headway.
  auto next = reader_->next_ids(last_);
  if (!next.ok()) return next.status();
  auto reach = [](int64_t at, int64_t next_id, int64_t head) { return std::max(at, std::min(next_id, head)); };
  return TableHeads{reach(upto.spans, next->spans, heads.spans), reach(upto.instants, next->instants, heads.instants),
                    reach(upto.counters, next->counters, heads.counters),
                    reach(upto.gpu_activities, next->gpu_activities, heads.gpu_activities)};
}

Status LocalTail::read_rows(RowSink& sink, const TableHeads& upto, bool parallel, PollStats* st) {
  // In parallel, a second connection reads the counters (straight into the sink) and the
  // instants (into a buffer, replayed below) while this one reads the spans. The order rows reach
  // the sink in does not matter: lanes are grouped at publish.
  Status side_status;
  int64_t side_counters = 0;
  std::vector<PackedInstant> side_instants;
  std::thread side;
  if (parallel) {
    if (!side_) {
      auto second = Reader::open(path_);
      if (!second.ok()) return second.status();
      side_ = std::move(*second);
      side_->prefer_large_scans();
    }
    const TableHeads from = last_;
    side = std::thread([&, from, upto] {
      Reader::Snapshot snapshot(*side_);
      side_status = read_counters(*side_, sink, from.counters, upto.counters, &side_counters);
      if (!side_status.ok()) return;
      // A hint only: ids need not be dense, and a damaged file's may be far apart.
      constexpr int64_t kMaxReserve = 1 << 22;
      side_instants.reserve(static_cast<size_t>(std::min(kMaxReserve, ids_between(from.instants, upto.instants))));
      side_status = side_->for_each_instant(from.instants, upto.instants, [&](const InstantRow& r) {
        if (in_window(r.ts_ns)) side_instants.push_back(pack(r));
      });
    });
  }
  struct Joiner {
    std::thread& t;
    ~Joiner() {
      if (t.joinable()) t.join();
    }
  } joiner{side};

  Status s = reader_->for_each_span(last_.spans, upto.spans, [&](const SpanRow& r) {
    if (!in_window(r)) return;
    sink.on_span(r);
    ++st->spans;
  });
  if (!s.ok()) return s;
  last_.spans = upto.spans;

  if (parallel) {
    side.join();
    if (!side_status.ok()) return side_status;
    for (const PackedInstant& p : side_instants) sink.on_instant(unpack(p));
    st->instants = static_cast<int64_t>(side_instants.size());
    st->counters = side_counters;
  } else {
    s = reader_->for_each_instant(last_.instants, upto.instants, [&](const InstantRow& r) {
      if (!in_window(r.ts_ns)) return;
      sink.on_instant(r);
      ++st->instants;
    });
    if (!s.ok()) return s;
    s = read_counters(*reader_, sink, last_.counters, upto.counters, &st->counters);
    if (!s.ok()) return s;
  }
  last_.instants = upto.instants;
  last_.counters = upto.counters;
  return Status::Ok();
}

Status LocalTail::poll_locked(RowSink& sink, PollStats* st, int64_t max_rows) {
  if (Status s = read_small_tables(sink); !s.ok()) return s;

  // What this transaction sees: every read stops there, whichever connection does it.
  auto heads = reader_->heads();
  if (!heads.ok()) return heads.status();
  auto planned = plan(*heads, max_rows);
  if (!planned.ok()) return planned.status();
  const TableHeads upto = *planned;
  st->pending = total(minus(*heads, upto));

  constexpr int64_t kParallelRows = 200000;
  const bool parallel = clamped(static_cast<__int128>(ids_between(last_.counters, upto.counters)) +
                                ids_between(last_.instants, upto.instants)) > kParallelRows;
  if (Status s = read_rows(sink, upto, parallel, st); !s.ok()) return s;

  Status s = reader_->for_each_gpu_activity(last_.gpu_activities, upto.gpu_activities, [&](const GpuActivityRow& r) {
    if (!in_window(r.start_ns, end_of(r.start_ns, r.dur_ns))) return;
    sink.on_gpu(r);
    ++st->gpu;
  });
  if (!s.ok()) return s;
  last_.gpu_activities = upto.gpu_activities;

  s = reader_->for_each_flush(last_flush_, [&](int64_t id, int64_t ts_ns) {
    last_flush_ = id;
    sink.on_flush(ts_ns);
  });
  if (!s.ok()) return s;
  st->rows = st->spans + st->instants + st->counters + st->gpu;
  return Status::Ok();
}

Status LocalTail::start_from(int64_t t0) {
  Reader::Snapshot snapshot(*reader_);
  auto ids = reader_->ids_before(t0);
  if (!ids.ok()) return in_file(path_, ids.status());
  last_ = *ids;
  from_ns_ = t0;
  to_ns_ = INT64_MAX;
  return Status::Ok();
}

Result<PollStats> LocalTail::read_window(RowSink& sink, int64_t t0, int64_t t1) {
  PollStats st;
  const int64_t keep_from = from_ns_, keep_to = to_ns_;
  from_ns_ = t0;
  to_ns_ = t1;
  Status s = [&]() -> Status {
    Reader::Snapshot snapshot(*reader_);
    if (Status small = read_small_tables(sink); !small.ok()) return small;
    auto ranges = reader_->span_id_ranges(t0, t1);
    if (!ranges.ok()) return ranges.status();
    for (const auto& [first, last] : *ranges) {
      Status r = reader_->for_each_span(first > INT64_MIN ? first - 1 : first, last, [&](const SpanRow& row) {
        if (!in_window(row)) return;
        sink.on_span(row);
        ++st.spans;
      });
      if (!r.ok()) return r;
    }
    auto lo = reader_->ids_before(t0);
    if (!lo.ok()) return lo.status();
    auto hi = reader_->ids_through(t1);
    if (!hi.ok()) return hi.status();
    Status r = reader_->for_each_instant(lo->instants, hi->instants, [&](const InstantRow& row) {
      if (!in_window(row.ts_ns)) return;
      sink.on_instant(row);
      ++st.instants;
    });
    if (!r.ok()) return r;
    if (r = read_counters(*reader_, sink, lo->counters, hi->counters, &st.counters); !r.ok()) return r;
    r = reader_->for_each_gpu_activity(lo->gpu_activities, hi->gpu_activities, [&](const GpuActivityRow& row) {
      if (!in_window(row.start_ns, end_of(row.start_ns, row.dur_ns))) return;
      sink.on_gpu(row);
      ++st.gpu;
    });
    if (!r.ok()) return r;
    auto flush = reader_->last_flush();
    if (!flush.ok()) return flush.status();
    if (*flush) sink.on_flush((*flush)->ts_ns);
    return Status::Ok();
  }();
  from_ns_ = keep_from;
  to_ns_ = keep_to;
  if (!s.ok()) return in_file(path_, s);
  st.rows = st.spans + st.instants + st.counters + st.gpu;
  return st;
}

}  // namespace stallscope
