// Loading a recording into a Session; see session.h.
#include "analysis/session.h"

#include <algorithm>

#include "storage/row_decode.h"

namespace stallscope::analysis {
namespace {

bool wanted(const std::string& name, const std::vector<std::string>& prefixes) {
  if (prefixes.empty()) return true;
  for (const std::string& p : prefixes) {
    if (name.compare(0, p.size(), p) == 0) return true;
  }
  return false;
}

// "a, b, c" for an IN (...) list of integer ids.
template <typename T>
std::string id_list(const std::vector<T>& ids) {
  std::string out;
  for (const T& id : ids) {
    if (!out.empty()) out += ",";
    out += std::to_string(id);
  }
  return out;
}

Status query_error(Db& db, const Status& s) { return in_file(db.path(), s); }

}  // namespace

const ProcessRow* Session::process(int64_t process_id) const {
  auto it = process_index_.find(process_id);
  return it == process_index_.end() ? nullptr : &processes[it->second];
}

const ThreadRow* Session::thread(int64_t thread_id) const {
  auto it = thread_index_.find(thread_id);
  return it == thread_index_.end() ? nullptr : &threads[it->second];
}

int64_t Session::pid_of_thread(int64_t thread_id) const {
  const ThreadRow* t = thread(thread_id);
  if (t == nullptr) return 0;
  const ProcessRow* p = process(t->process_id);
  return p == nullptr ? 0 : p->pid;
}

const std::string& Session::string(uint32_t id) const {
  static const std::string kEmpty;
  auto it = strings.find(id);
  return it == strings.end() ? kEmpty : it->second;
}

std::pair<const CounterRow*, const CounterRow*> Session::samples(int64_t track_id) const {
  auto it = counter_ranges_.find(track_id);
  if (it == counter_ranges_.end()) return {nullptr, nullptr};
  return {counters.data() + it->second.first, counters.data() + it->second.second};
}

void Session::index() {
  process_index_.clear();
  thread_index_.clear();
  counter_ranges_.clear();
  for (size_t i = 0; i < processes.size(); ++i) process_index_[processes[i].id] = i;
  for (size_t i = 0; i < threads.size(); ++i) thread_index_[threads[i].id] = i;
  for (size_t i = 0; i < counters.size();) {
    size_t j = i;
    while (j < counters.size() && counters[j].track_id == counters[i].track_id) ++j;
    counter_ranges_[counters[i].track_id] = {i, j};
    i = j;
  }
}

Result<Session> load_session(Reader& reader, const LoadOptions& options) {
  Db& db = reader.db();
  ReadTransaction txn(db);
  Session s;
  s.path = db.path();

  auto meta = reader.meta();
  if (!meta.ok()) return query_error(db, meta.status());
  s.meta = std::move(*meta);
  auto complete = s.meta.find("complete");
  s.complete = complete != s.meta.end() && complete->second == "1";

  auto strings = reader.strings();
  if (!strings.ok()) return query_error(db, strings.status());
  std::vector<uint32_t> name_ids;
  for (auto& [id, value] : *strings) {
    if (wanted(value, options.name_prefixes)) name_ids.push_back(id);
    s.strings.emplace(id, std::move(value));
  }

  auto processes = reader.processes();
  if (!processes.ok()) return query_error(db, processes.status());
  s.processes = std::move(*processes);
  auto threads = reader.threads();
  if (!threads.ok()) return query_error(db, threads.status());
  s.threads = std::move(*threads);

  // Spans and instants of the wanted names: one query each, no ORDER BY (there is no index on
  // the time columns; sorting here is cheaper than in SQLite).
  const std::string name_filter =
      options.name_prefixes.empty() ? "" : " WHERE name_id IN (" + id_list(name_ids) + ")";
  if (options.name_prefixes.empty() || !name_ids.empty()) {
    auto st = db.prepare(std::string("SELECT ") + kSpanColumns + " FROM spans" + name_filter);
    if (!st.ok()) return query_error(db, st.status());
    Stmt& q = **st;
    while (q.step()) s.spans.push_back(decode_span(q));
    if (!q.status().ok()) return query_error(db, q.status());

    auto it = db.prepare(std::string("SELECT ") + kInstantColumns + " FROM instants" + name_filter);
    if (!it.ok()) return query_error(db, it.status());
    Stmt& qi = **it;
    while (qi.step()) s.instants.push_back(decode_instant(qi));
    if (!qi.status().ok()) return query_error(db, qi.status());
  }
  std::sort(s.spans.begin(), s.spans.end(), [](const SpanRow& a, const SpanRow& b) {
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    if (a.depth != b.depth) return a.depth < b.depth;
    return a.id < b.id;
  });
  std::sort(s.instants.begin(), s.instants.end(), [](const InstantRow& a, const InstantRow& b) {
    return a.ts_ns != b.ts_ns ? a.ts_ns < b.ts_ns : a.id < b.id;
  });

  auto tracks = reader.counter_tracks();
  if (!tracks.ok()) return query_error(db, tracks.status());
  s.counter_tracks = std::move(*tracks);
  std::vector<int64_t> track_ids;
  for (const CounterTrackRow& t : s.counter_tracks) {
    if (options.counter_names.empty() ||
        std::find(options.counter_names.begin(), options.counter_names.end(), t.name) != options.counter_names.end()) {
      track_ids.push_back(t.id);
    }
  }
  if (!track_ids.empty()) {
    auto st = db.prepare("SELECT track_id, ts_ns, value FROM counters WHERE track_id IN (" + id_list(track_ids) + ")");
    if (!st.ok()) return query_error(db, st.status());
    Stmt& q = **st;
    while (q.step()) s.counters.push_back(CounterRow{q.int64(0), q.int64(1), q.real(2)});
    if (!q.status().ok()) return query_error(db, q.status());
    std::stable_sort(s.counters.begin(), s.counters.end(), [](const CounterRow& a, const CounterRow& b) {
      return a.track_id != b.track_id ? a.track_id < b.track_id : a.ts_ns < b.ts_ns;
    });
  }

  auto gpu = reader.gpu_activities();
  if (!gpu.ok()) return query_error(db, gpu.status());
  s.gpu = std::move(*gpu);

  // The end of the recording: the latest time any row reaches (spans that never ended reach it).
  int64_t end = 0;
  for (const char* sql : {"SELECT coalesce(max(start_ns + coalesce(dur_ns, 0)), 0) FROM spans",
                          "SELECT coalesce(max(ts_ns), 0) FROM instants", "SELECT coalesce(max(ts_ns), 0) FROM counters",
                          "SELECT coalesce(max(ts_ns), 0) FROM flushes",
                          "SELECT coalesce(max(start_ns + dur_ns), 0) FROM gpu_activities",
                          "SELECT coalesce(max(max(coalesce(start_ns, 0), coalesce(end_ns, 0))), 0) FROM processes"}) {
    auto v = db.query_int(sql);
    if (!v.ok()) return query_error(db, v.status());
    end = std::max(end, *v);
  }
  s.end_ns = end;
  s.index();
  return s;
}

Result<Session> load_session(const std::string& path, const LoadOptions& options) {
  auto reader = Reader::open(path);
  if (!reader.ok()) return reader.status();
  return load_session(**reader, options);
}

}  // namespace stallscope::analysis
