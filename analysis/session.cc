// Loading a recording into a Session; see session.h.
#include "analysis/session.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <utility>

#include "storage/summaries.h"
#include "storage/writer.h"

namespace stallscope::analysis {

int64_t Session::detail_from_ns() const {
  int64_t from = loaded_from_ns.value_or(INT64_MIN);
  if (auto it = meta.find("detail_from_ns"); it != meta.end()) {
    char* e = nullptr;
    const long long kept = std::strtoll(it->second.c_str(), &e, 10);
    if (e != it->second.c_str() && kept > 0) from = std::max<int64_t>(from, kept);
  }
  return from;
}

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

namespace {

using RunCounts = std::map<std::pair<int64_t, int64_t>, int64_t>;  // (thread id, loader) -> count

// The whole run's next() calls and optimizer steps by (thread, loader), from the summaries' 100-s
// level; held at INT64_MAX (a damaged file's counts can be anything).
Status run_counts(Reader& reader, std::optional<uint32_t> next_id, std::optional<uint32_t> step_id, RunCounts* calls,
                  RunCounts* steps) {
  auto add = [](RunCounts* into, const auto& rows) {
    for (const auto& r : rows) {
      int64_t& n = (*into)[{r.thread_id, r.grp}];
      if (__builtin_add_overflow(n, r.count, &n)) n = INT64_MAX;
    }
  };
  const int64_t level = kSummaryLevelsNs.back();
  if (next_id) {
    auto rows = reader.span_summaries(level, {*next_id});
    if (!rows.ok()) return rows.status();
    add(calls, *rows);
  }
  if (step_id) {
    auto rows = reader.instant_summaries(level, {*step_id});
    if (!rows.ok()) return rows.status();
    add(steps, *rows);
  }
  return Status::Ok();
}

// The spans and instants of LoadOptions::detail_from_ns: from `from` on, and before it the
// instants that describe loaders and processes. Where those are, the instant summaries say (at the
// 100 s level); a recording without summaries is searched whole for them.
Status load_detail_from(Reader& reader, int64_t from, int64_t to, bool all_names, const std::vector<uint32_t>& name_ids,
                        Session& s) {
  std::vector<uint32_t> names = name_ids;
  if (all_names) {
    names.clear();
    for (const auto& [id, value] : s.strings) names.push_back(id);
  }
  auto spans = reader.spans_named_in(names, from, to);
  if (!spans.ok()) return spans.status();
  s.spans = std::move(*spans);
  auto instants = reader.instants_named_in(names, from, to);
  if (!instants.ok()) return instants.status();
  s.instants = std::move(*instants);
  s.loaded_from_ns = from;
  if (to < INT64_MAX) s.loaded_to_ns = to;

  std::vector<uint32_t> kept;
  for (const auto& [id, value] : s.strings) {
    for (const char* k : Writer::kKeptInstants) {
      if (value == k) kept.push_back(id);
    }
  }
  if (kept.empty() || from <= INT64_MIN + 1) return Status::Ok();
  auto append = [&](const std::vector<InstantRow>& rows) {
    for (const InstantRow& i : rows) {
      if (i.ts_ns < from) s.instants.push_back(i);
    }
  };
  auto has = reader.has_summaries();
  if (!has.ok()) return has.status();
  if (!*has) {
    auto rows = reader.instants_named(kept);
    if (!rows.ok()) return rows.status();
    append(*rows);
    return Status::Ok();
  }
  const int64_t level = kSummaryLevelsNs.back();
  std::optional<uint32_t> next_id, step_id;
  for (const auto& [id, value] : s.strings) {
    if (value == "dl.next") next_id = id;
    if (value == "dl.step") step_id = id;
  }
  if (Status st = run_counts(reader, next_id, step_id, &s.run_next_calls, &s.run_steps); !st.ok()) return st;
  auto buckets = reader.instant_summaries(level, kept);
  if (!buckets.ok()) return buckets.status();
  // Per name, runs of adjacent buckets before the cut. Of each run the first bucket is read (a
  // loader's configuration and its persistent workers' starts are at the start of a run), and the
  // last bucket before the cut (the workers of the epoch under way there); of a name with more
  // than kMaxRuns runs, the first and last kMaxRuns / 2. A name that comes every epoch (workers
  // started anew, or ready again) is one long run, and is not read all the way: that would be a
  // scan of the whole run.
  constexpr size_t kMaxRuns = 64;
  std::map<uint32_t, std::vector<std::pair<int64_t, int64_t>>> runs;            // name -> (first, last bucket)
  constexpr int64_t kMaxBucket = (int64_t{1} << 60) / kSummaryLevelsNs.back();  // times past +-2^60 cannot be
  for (const InstantSummaryRow& b : *buckets) {
    if (b.bucket <= -kMaxBucket || b.bucket >= kMaxBucket || b.bucket * level >= from) continue;
    auto& r = runs[b.name_id];
    if (!r.empty() && b.bucket <= r.back().second + 1) {
      r.back().second = std::max(r.back().second, b.bucket);
    } else {
      r.emplace_back(b.bucket, b.bucket);
    }
  }
  for (const auto& [name, r] : runs) {
    std::vector<int64_t> read;
    for (size_t k = 0; k < r.size(); ++k) {
      if (r.size() <= kMaxRuns || k < kMaxRuns / 2 || k >= r.size() - kMaxRuns / 2) read.push_back(r[k].first);
    }
    if (r.back().second != r.back().first) read.push_back(r.back().second);
    for (int64_t b : read) {
      auto rows = reader.instants_named_in({name}, b * level, std::min(b * level + level - 1, from - 1));
      if (!rows.ok()) return rows.status();
      append(*rows);
    }
  }
  return Status::Ok();
}

// The loader that trained, by the summaries of the whole run: the most optimizer steps, else the
// most next() calls (report.cc's choice, without a framework's hint). nullopt: none.
Result<std::optional<int64_t>> busiest_loader(Reader& reader, uint32_t next_id, std::optional<uint32_t> step_id) {
  RunCounts calls, steps;
  if (Status st = run_counts(reader, next_id, step_id, &calls, &steps); !st.ok()) return st;
  std::map<int64_t, std::pair<int64_t, int64_t>> per;  // loader -> (steps, next calls)
  auto sum = [](int64_t& into, int64_t n) {
    if (__builtin_add_overflow(into, n, &into)) into = INT64_MAX;
  };
  for (const auto& [key, n] : steps) {
    if (key.second >= 0) sum(per[key.second].first, n);
  }
  for (const auto& [key, n] : calls) {
    if (key.second >= 0) sum(per[key.second].second, n);
  }
  std::optional<int64_t> best;
  for (const auto& [loader, counts] : per) {
    if (counts.second > 0 && (!best || counts > per[*best])) best = loader;
  }
  return best;
}

}  // namespace

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

  if (options.detail_from_ns) {
    Status loaded = load_detail_from(reader, *options.detail_from_ns, options.detail_to_ns.value_or(INT64_MAX),
                                     options.all_names, name_ids, s);
    if (!loaded.ok()) return in_file(s.path, loaded);
  } else {
    auto spans = options.all_names ? reader.all_spans() : reader.spans_named(name_ids);
    if (!spans.ok()) return in_file(s.path, spans.status());
    s.spans = std::move(*spans);
    auto instants = options.all_names ? reader.instants() : reader.instants_named(name_ids);
    if (!instants.ok()) return in_file(s.path, instants.status());
    s.instants = std::move(*instants);
  }
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
  const int64_t to = options.detail_from_ns ? options.detail_to_ns.value_or(INT64_MAX) : INT64_MAX;
  auto counters = options.detail_from_ns ? reader.counters_of_from(track_ids, *options.detail_from_ns, to)
                                         : reader.counters_of(track_ids);
  if (!counters.ok()) return in_file(s.path, counters.status());
  s.counters = std::move(*counters);
  std::stable_sort(s.counters.begin(), s.counters.end(), [](const CounterRow& a, const CounterRow& b) {
    return a.track_id != b.track_id ? a.track_id < b.track_id : a.ts_ns < b.ts_ns;
  });

  auto gpu = options.detail_from_ns ? reader.gpu_activities_from(*options.detail_from_ns, to) : reader.gpu_activities();
  if (!gpu.ok()) return in_file(s.path, gpu.status());
  s.gpu = std::move(*gpu);

  if (options.detail_from_ns) {
    // Every row that reaches past the cut was read: the end is theirs (and the drains' and
    // processes'), without the scan of every table that Reader::end_ns() is. A window of the past
    // ends at its end: what comes after it was not read.
    auto end = reader.end_ns_of_flushes_and_processes();
    if (!end.ok()) return in_file(s.path, end.status());
    s.end_ns = to < INT64_MAX ? std::min(*end, to) : *end;
    for (const SpanRow& r : s.spans) {
      s.end_ns =
          std::max(s.end_ns, r.dur_ns && *r.dur_ns <= INT64_MAX - r.start_ns ? r.start_ns + *r.dur_ns : r.start_ns);
    }
    for (const InstantRow& r : s.instants) s.end_ns = std::max(s.end_ns, r.ts_ns);
    for (const CounterRow& r : s.counters) s.end_ns = std::max(s.end_ns, r.ts_ns);
    for (const GpuActivityRow& r : s.gpu) {
      s.end_ns = std::max(s.end_ns, r.dur_ns <= INT64_MAX - r.start_ns ? r.start_ns + r.dur_ns : r.start_ns);
    }
  } else {
    auto end = reader.end_ns();
    if (!end.ok()) return in_file(s.path, end.status());
    s.end_ns = *end;
  }
  s.drop_impossible_rows();
  s.index();
  return s;
}

Result<std::optional<int64_t>> choose_detail_from(Reader& reader, const DetailBudget& budget) {
  using Cut = std::optional<int64_t>;
  if (budget.window) return Cut(budget.window->first);
  if (budget.all) return Cut();
  Reader::Snapshot snapshot(reader);
  auto last = reader.last_flush();
  if (!last.ok()) return last.status();
  if (!*last) return Cut();  // no drain yet: nothing to cut
  const int64_t end = (*last)->ts_ns;
  Cut cut;
  if (budget.last_ns) {
    if (*budget.last_ns < end) cut = end - *budget.last_ns;
  } else {
    auto at = reader.time_of_last_rows(budget.max_rows);
    if (!at.ok()) return at.status();
    cut = *at;
  }
  if (!cut || *cut <= 0) return Cut();
  auto meta = reader.meta();
  if (!meta.ok()) return meta.status();
  if (auto it = meta->find("detail_from_ns"); it != meta->end()) {
    char* e = nullptr;
    const long long kept = std::strtoll(it->second.c_str(), &e, 10);
    if (e != it->second.c_str() && kept >= *cut) return Cut();  // --keep-detail already left less
  }

  // The first dl.epoch_begin of the training loader at or after the cut, if it comes soon enough.
  auto strings = reader.strings();
  if (!strings.ok()) return strings.status();
  std::optional<uint32_t> begin_id, next_id, step_id;
  for (const auto& [id, value] : *strings) {
    if (value == "dl.epoch_begin") begin_id = id;
    if (value == "dl.next") next_id = id;
    if (value == "dl.step") step_id = id;
  }
  auto has = reader.has_summaries();
  if (!has.ok()) return has.status();
  if (!begin_id || !next_id || !*has) return cut;
  auto loader = busiest_loader(reader, *next_id, step_id);
  if (!loader.ok()) return loader.status();
  if (!*loader) return cut;
  const int64_t limit = *cut + (end - *cut) / 2;
  const int64_t level = kSummaryLevelsNs.front();
  auto buckets =
      reader.instant_summaries(level, {*begin_id}, summary_bucket(*cut, level), summary_bucket(limit, level));
  if (!buckets.ok()) return buckets.status();
  constexpr int64_t kMaxBucket = (int64_t{1} << 60) / kSummaryLevelsNs.front();
  for (const InstantSummaryRow& b : *buckets) {
    if (b.grp != **loader || b.bucket <= -kMaxBucket || b.bucket >= kMaxBucket) continue;
    const int64_t t0 = b.bucket * level, t1 = t0 + level - 1;
    if (t1 < *cut) continue;
    if (t0 > limit) break;
    auto rows = reader.instants_named_in({*begin_id}, std::max(t0, *cut), std::min(t1, limit));
    if (!rows.ok()) return rows.status();
    Cut first;
    for (const InstantRow& i : *rows) {
      if (i.arg0 == **loader && (!first || i.ts_ns < *first)) first = i.ts_ns;
    }
    if (first) return first;
  }
  return cut;
}

Result<Session> load_session(const std::string& path, const LoadOptions& options) {
  auto reader = Reader::open(path);
  if (!reader.ok()) return reader.status();
  return load_session(**reader, options);
}

}  // namespace stallscope::analysis
