// Loading a recording into a Session; see session.h.
#include "analysis/session.h"

#include <algorithm>
#include <cmath>

namespace stallscope::analysis {

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
  names_ = vocab::NameTable();
  for (const auto& [id, text] : strings) names_.add(id, text);
  for (size_t i = 0; i < processes.size(); ++i) process_index_[processes[i].id] = i;
  for (size_t i = 0; i < threads.size(); ++i) thread_index_[threads[i].id] = i;
  for (size_t i = 0; i < counters.size();) {
    size_t j = i;
    while (j < counters.size() && counters[j].track_id == counters[i].track_id) ++j;
    counter_ranges_[counters[i].track_id] = {i, j};
    i = j;
  }
}

void Session::sort_rows() {
  std::sort(spans.begin(), spans.end(), [](const SpanRow& a, const SpanRow& b) {
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    if (a.depth != b.depth) return a.depth < b.depth;
    return a.id < b.id;
  });
  std::sort(instants.begin(), instants.end(), [](const InstantRow& a, const InstantRow& b) {
    return a.ts_ns != b.ts_ns ? a.ts_ns < b.ts_ns : a.id < b.id;
  });
}

namespace {

// Times a recording can hold: nanoseconds from the session start, so far less than 2^60 (36
// years) either way. Anything past that is damage, and left out so that sums and differences of a
// few times cannot overflow.
constexpr int64_t kMaxTimeNs = int64_t{1} << 60;
// Counter values (bytes, cores, fractions) far below 2^61, so that differences of two fit an int64.
constexpr double kMaxValue = 2305843009213693952.0;  // 2^61
bool sane_time(int64_t t) { return t > -kMaxTimeNs && t < kMaxTimeNs; }
bool sane_duration(int64_t d) { return d >= 0 && d < kMaxTimeNs; }
// Arguments (ids, counts, bytes, microseconds) likewise: a sum of two must fit.
bool sane_args(const std::optional<int64_t>& a0, const std::optional<int64_t>& a1, const std::optional<int64_t>& a2) {
  const auto ok = [](const std::optional<int64_t>& a) { return !a || (*a > -kMaxTimeNs && *a < kMaxTimeNs); };
  return ok(a0) && ok(a1) && ok(a2);
}

template <typename Rows, typename Bad>
int64_t drop_if(Rows* rows, Bad bad) {
  const size_t before = rows->size();
  rows->erase(std::remove_if(rows->begin(), rows->end(), bad), rows->end());
  return static_cast<int64_t>(before - rows->size());
}

}  // namespace

void Session::drop_impossible_rows() {
  impossible_rows += drop_if(&spans, [](const SpanRow& r) {
    return !sane_time(r.start_ns) || (r.dur_ns && !sane_duration(*r.dur_ns)) || !sane_args(r.arg0, r.arg1, r.arg2);
  });
  impossible_rows +=
      drop_if(&instants, [](const InstantRow& r) { return !sane_time(r.ts_ns) || !sane_args(r.arg0, r.arg1, r.arg2); });
  impossible_rows +=
      drop_if(&counters, [](const CounterRow& r) { return !sane_time(r.ts_ns) || !(std::fabs(r.value) < kMaxValue); });
  impossible_rows +=
      drop_if(&gpu, [](const GpuActivityRow& r) { return !sane_time(r.start_ns) || !sane_duration(r.dur_ns); });
  for (ProcessRow& p : processes) {
    if (p.start_ns && !sane_time(*p.start_ns)) p.start_ns.reset(), ++impossible_rows;
    if (p.end_ns && !sane_time(*p.end_ns)) p.end_ns.reset(), ++impossible_rows;
  }
  if (!sane_time(end_ns)) end_ns = 0, ++impossible_rows;
}

Result<Session> load_session(Reader& reader, const LoadOptions& options) {
  Reader::Snapshot snapshot(reader);
  Session s;
  s.path = reader.path();

  auto meta = reader.meta();
  if (!meta.ok()) return in_file(s.path, meta.status());
  s.meta = std::move(*meta);
  auto complete = s.meta.find("complete");
  s.complete = complete != s.meta.end() && complete->second == "1";

  auto strings = reader.strings();
  if (!strings.ok()) return in_file(s.path, strings.status());
  std::vector<uint32_t> name_ids;
  for (auto& [id, value] : *strings) {
    if (options.all_names || vocab::event_of(value) != vocab::Event::kNone) name_ids.push_back(id);
    s.strings.emplace(id, std::move(value));
  }

  auto processes = reader.processes();
  if (!processes.ok()) return in_file(s.path, processes.status());
  s.processes = std::move(*processes);
  auto threads = reader.threads();
  if (!threads.ok()) return in_file(s.path, threads.status());
  s.threads = std::move(*threads);

  auto spans = options.all_names ? reader.all_spans() : reader.spans_named(name_ids);
  if (!spans.ok()) return in_file(s.path, spans.status());
  s.spans = std::move(*spans);
  auto instants = options.all_names ? reader.instants() : reader.instants_named(name_ids);
  if (!instants.ok()) return in_file(s.path, instants.status());
  s.instants = std::move(*instants);
  s.sort_rows();

  auto tracks = reader.counter_tracks();
  if (!tracks.ok()) return in_file(s.path, tracks.status());
  s.counter_tracks = std::move(*tracks);
  std::vector<int64_t> track_ids;
  for (const CounterTrackRow& t : s.counter_tracks) {
    if (options.counters.empty() || std::find(options.counters.begin(), options.counters.end(),
                                              vocab::counter_of(t.name)) != options.counters.end()) {
      track_ids.push_back(t.id);
    }
  }
  auto counters = reader.counters_of(track_ids);
  if (!counters.ok()) return in_file(s.path, counters.status());
  s.counters = std::move(*counters);
  std::stable_sort(s.counters.begin(), s.counters.end(), [](const CounterRow& a, const CounterRow& b) {
    return a.track_id != b.track_id ? a.track_id < b.track_id : a.ts_ns < b.ts_ns;
  });

  auto gpu = reader.gpu_activities();
  if (!gpu.ok()) return in_file(s.path, gpu.status());
  s.gpu = std::move(*gpu);

  auto end = reader.end_ns();
  if (!end.ok()) return in_file(s.path, end.status());
  s.end_ns = *end;
  s.drop_impossible_rows();
  s.index();
  return s;
}

Result<Session> load_session(const std::string& path, const LoadOptions& options) {
  auto reader = Reader::open(path);
  if (!reader.ok()) return reader.status();
  return load_session(**reader, options);
}

}  // namespace stallscope::analysis
