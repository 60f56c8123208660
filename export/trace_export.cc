// The export's one pass: names and derived series from the DataLoader model, then every table of
// the recording streamed to the sink in id order.
#include "export/trace_export.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "analysis/session.h"
#include "storage/summaries.h"

namespace stallscope::exporting {
namespace {

// The lane order of the dashboard (ui/snapshot_builder.cc): GPU streams, the training loop, the
// pin-memory thread, workers, other threads. Processes sort the same way. The GPU streams' index,
// 0, is given where they are written (perfetto_json.cc).
constexpr int kSortMain = 1, kSortPin = 2, kSortWorker = 3, kSortOther = 4;

std::string loader_label(const analysis::DataLoaderModel& m, int64_t loader, size_t loaders_with_workers) {
  if (loaders_with_workers < 2) return "";
  const analysis::LoaderInfo* l = m.loader(loader);
  return (l != nullptr ? analysis::loader_name(l->config, loader) : "loader " + std::to_string(loader)) + " ";
}

void name_tracks(const analysis::DataLoaderModel& m, const std::set<int64_t>& pin_threads,
                 const std::map<int64_t, int64_t>& rank_of_pid, ExportContext& ctx) {
  std::set<int64_t> loaders_with_workers;
  for (const analysis::WorkerInfo& w : m.workers) loaders_with_workers.insert(w.loader);
  std::map<int64_t, const analysis::WorkerInfo*> worker_of_pid;     // worker processes
  std::map<int64_t, const analysis::WorkerInfo*> worker_of_thread;  // reference loader threads
  for (const analysis::WorkerInfo& w : m.workers) {
    if (w.thread_id != 0) {
      worker_of_thread.emplace(w.thread_id, &w);
    } else {
      worker_of_pid.emplace(w.pid, &w);
    }
  }
  for (const ProcessRow& p : ctx.processes) {
    TrackName n;
    auto w = worker_of_pid.find(p.pid);
    const auto rank = rank_of_pid.find(p.pid);
    if (rank != rank_of_pid.end()) {  // a rank of a multi-rank job: the ranks in order
      n = {"rank " + std::to_string(rank->second) + " (pid " + std::to_string(p.pid) + ")",
           kSortMain * 1000 + static_cast<int>(rank->second)};
    } else if (p.pid == m.train_pid && m.seen) {
      n = {"training (pid " + std::to_string(p.pid) + ")", kSortMain};
    } else if (w != worker_of_pid.end()) {
      n = {loader_label(m, w->second->loader, loaders_with_workers.size()) + "worker " +
               std::to_string(w->second->worker_id) + " (pid " + std::to_string(p.pid) + ")",
           kSortWorker * 1000 + w->second->worker_id};
      ctx.is_worker[p.pid] = true;
    } else {
      std::string cmd = p.cmdline.substr(0, 60);
      n = {"pid " + std::to_string(p.pid) + (cmd.empty() ? "" : ": " + cmd), kSortOther * 1000};
    }
    ctx.process_names[p.pid] = n;
  }
  for (const ThreadRow& t : ctx.threads) {
    TrackName n;
    auto w = worker_of_thread.find(t.id);
    const int64_t pid = ctx.thread_pid[t.id];
    if (t.id == m.train_thread_id && m.seen) {
      n = {"main thread", kSortMain};
    } else if (pin_threads.count(t.id) != 0) {
      n = {"pin memory", kSortPin};
    } else if (w != worker_of_thread.end()) {
      n = {loader_label(m, w->second->loader, loaders_with_workers.size()) + "worker " +
               std::to_string(w->second->worker_id),
           kSortWorker * 1000 + w->second->worker_id};
    } else if (ctx.is_worker.count(pid) != 0 && t.tid == pid) {
      n = {ctx.process_names[pid].name.substr(0, ctx.process_names[pid].name.find(" (pid")), kSortWorker};
    } else {
      n = {t.name.empty() ? "tid " + std::to_string(t.tid) : t.name, kSortOther};
    }
    ctx.thread_names[t.id] = n;
  }
}

// The training thread's id in the threads table and its spans' times: whether a point falls
// inside one of its dl.next calls (a flow's start binds to the span around it).
bool inside_next(const analysis::DataLoaderModel& m, int64_t ts) {
  auto it = std::upper_bound(m.next_calls.begin(), m.next_calls.end(), ts,
                             [](int64_t t, const analysis::NextCall& c) { return t < c.start_ns; });
  if (it == m.next_calls.begin()) return false;
  --it;
  return ts > it->start_ns && ts < it->end_ns;
}

// A part of the recording the DataLoader model is built for: batches handed, next() calls begun
// and queue points in [lo, hi) are emitted from it.
struct Window {
  int64_t lo, hi;
};
constexpr int64_t kFar = int64_t{1} << 62;

// Each batch's flow in `w`, to `emit`, in the model's batch order (trace viewers sort by time).
// `from`: an export of a range starts there; a flow whose fetch lies before it is left out (its
// fetch span may not be in the export), and so is a sent point before it.
void batch_flows(const analysis::DataLoaderModel& m, const ExportContext& ctx, Window w, int64_t from, int64_t* next_id,
                 const std::function<void(const BatchFlow&)>& emit) {
  std::map<int64_t, int64_t> main_tid_of_pid;  // pid -> tid of its thread with tid == pid
  for (const ThreadRow& t : ctx.threads) {
    const auto pid = ctx.thread_pid.find(t.id);
    if (pid != ctx.thread_pid.end() && pid->second == t.tid) main_tid_of_pid[pid->second] = t.tid;
  }
  const auto train_tid = ctx.thread_tid.find(m.train_thread_id);
  if (!m.seen || train_tid == ctx.thread_tid.end()) return;
  for (const analysis::BatchInfo& b : m.batches) {
    if (!b.handed_ns || *b.handed_ns < w.lo || *b.handed_ns >= w.hi) continue;
    if (!b.fetch_start_ns || !b.fetch_end_ns || b.worker < 0) continue;
    // Points strictly inside the spans they bind to: a point on a span's edge could be read as
    // outside it when events at one timestamp are reordered.
    const int64_t fetch_mid = *b.fetch_start_ns + (*b.fetch_end_ns - *b.fetch_start_ns) / 2;
    if (fetch_mid < from) continue;
    BatchFlow f;
    f.loader = b.loader;
    f.epoch = b.epoch;
    f.batch = b.batch;
    if (b.worker_thread != 0) {  // a reference loader's thread
      const auto tid = ctx.thread_tid.find(b.worker_thread);
      if (tid == ctx.thread_tid.end()) continue;
      f.fetch = {m.train_pid, tid->second, fetch_mid};
    } else {
      const auto tid = main_tid_of_pid.find(b.worker_pid);
      if (tid == main_tid_of_pid.end()) continue;
      f.fetch = {b.worker_pid, tid->second, fetch_mid};
    }
    if (b.sent_ns && *b.sent_ns >= from && inside_next(m, *b.sent_ns))
      f.sent = BatchFlow::Point{m.train_pid, train_tid->second, *b.sent_ns};
    // Just inside the end of the dl.next span that handed it: the flow ends where the loop got it.
    f.handed = {m.train_pid, train_tid->second, *b.handed_ns - 1};
    f.id = ++*next_id;
    emit(f);
  }
}

// The series the analysis derives, window by window; a series' name gets its index the first time
// it has a point.
class DerivedSeries {
 public:
  explicit DerivedSeries(std::vector<std::string>* names) : names_(names) {}

  void emit(const analysis::DataLoaderModel& m, int64_t end_ns, Window w,
            const std::function<void(const DerivedSample&)>& out) {
    if (!m.seen) return;
    for (const analysis::NextCall& c : m.next_calls) {
      if (c.start_ns < w.lo || c.start_ns >= w.hi) continue;
      const int stalled = index("stalled (waiting for data)");
      out({stalled, c.start_ns, 1});
      out({stalled, c.end_ns, 0});
    }
    for (const analysis::LoaderInfo& l : m.loaders) {
      if (l.workers.empty()) continue;
      const analysis::QueueDepth q = analysis::queue_depth(m, l, end_ns);
      const std::string prefix = "loader " + std::to_string(l.id) + " batches ";
      step_points(q.in_flight, index(prefix + "in flight"), w, out);
      step_points(q.ready, index(prefix + "ready"), w, out);
    }
  }

 private:
  int index(const std::string& name) {
    auto [it, fresh] = by_name_.try_emplace(name, static_cast<int>(names_->size()));
    if (fresh) names_->push_back(name);
    return it->second;
  }
  // The points in the window, after the value in effect where the window begins (a window's
  // first point would otherwise be missing when it falls in the window before).
  static void step_points(const analysis::StepFunction& f, int series, Window w,
                          const std::function<void(const DerivedSample&)>& out) {
    auto first =
        std::lower_bound(f.begin(), f.end(), w.lo, [](const analysis::StepPoint& p, int64_t t) { return p.ts_ns < t; });
    if (w.lo > -kFar && first != f.begin() && (first == f.end() || first->ts_ns != w.lo)) {
      out({series, w.lo, std::prev(first)->value});
    }
    for (auto it = first; it != f.end() && it->ts_ns < w.hi; ++it) out({series, it->ts_ns, it->value});
  }

  std::vector<std::string>* names_;
  std::map<std::string, int> by_name_;
};

// Rows by their vocabulary event.
std::vector<uint32_t> ids_of(const std::map<uint32_t, std::string>& strings,
                             std::initializer_list<vocab::Event> events) {
  std::vector<uint32_t> ids;
  for (const auto& [id, value] : strings) {
    const vocab::Event e = vocab::event_of(value);
    if (std::find(events.begin(), events.end(), e) != events.end()) ids.push_back(id);
  }
  return ids;
}

// A range's instants that describe loaders and processes (`names`): those of the range and its
// margin, and each name's first 100-s bucket of the run (the loaders' settings, the first epoch).
// Found through the instant summaries; a recording without them is read whole.
Result<std::vector<InstantRow>> run_instants_of_range(Reader& reader, const std::vector<uint32_t>& names,
                                                      std::pair<int64_t, int64_t> range, int64_t margin_ns) {
  auto has = reader.has_summaries();
  if (!has.ok()) return has.status();
  if (!*has) return reader.instants_named(names);
  const int64_t level = kSummaryLevelsNs.back();
  auto rows = reader.instant_summaries(level, names);
  if (!rows.ok()) return rows.status();
  std::map<uint32_t, int64_t> first_bucket;
  for (const InstantSummaryRow& r : *rows) {
    auto [it, fresh] = first_bucket.try_emplace(r.name_id, r.bucket);
    if (!fresh) it->second = std::min(it->second, r.bucket);
  }
  const int64_t lo = range.first > INT64_MIN + margin_ns ? range.first - margin_ns : INT64_MIN;
  auto out = reader.instants_named_in(names, lo, range.second);
  if (!out.ok()) return out;
  std::set<int64_t> ids;
  for (const InstantRow& r : *out) ids.insert(r.id);
  std::set<int64_t> buckets;
  for (const auto& [name, b] : first_bucket) buckets.insert(b);
  for (int64_t b : buckets) {
    if (b <= -(kFar / level) || b >= kFar / level) continue;  // a damaged row's
    auto more = reader.instants_named_in(names, b * level, (b + 1) * level - 1);
    if (!more.ok()) return more;
    for (InstantRow& r : *more) {
      if (ids.insert(r.id).second) out->push_back(std::move(r));
    }
  }
  return out;
}

// Each thread's first span of each of `names` in the range and its margin, by id (what
// first_spans_per_thread gives for the whole run).
Result<std::vector<SpanRow>> first_spans_of_range(Reader& reader, const std::vector<uint32_t>& names,
                                                  std::pair<int64_t, int64_t> range, int64_t margin_ns) {
  const int64_t lo = range.first > INT64_MIN + margin_ns ? range.first - margin_ns : INT64_MIN;
  auto spans = reader.spans_named_in(names, lo, range.second);
  if (!spans.ok()) return spans;
  std::map<std::pair<int64_t, uint32_t>, SpanRow> first;
  for (SpanRow& sp : *spans) {
    auto [it, fresh] = first.try_emplace({sp.thread_id, sp.name_id}, sp);
    if (!fresh && sp.id < it->second.id) it->second = sp;
  }
  std::vector<SpanRow> out;
  for (auto& [key, sp] : first) out.push_back(std::move(sp));
  std::sort(out.begin(), out.end(), [](const SpanRow& a, const SpanRow& b) { return a.id < b.id; });
  return out;
}

}  // namespace

Result<ExportCounts> export_recording(Reader& reader, TraceSink& sink, const ExportOptions& options) {
  // No prefer_large_scans(): the rows are read once, in order, and mapped pages of the file would
  // count in the export's resident memory.
  Reader::Snapshot snapshot(reader);
  ExportContext ctx;
  using E = vocab::Event;

  // The recording's small tables, and the model of what is known once per run: the loaders, their
  // epochs and worker processes (the per-epoch and per-worker instants), and which threads run
  // the loop, fetch and pin (each one's first span of each kind).
  analysis::Session base;
  base.path = reader.path();
  auto meta = reader.meta();
  if (!meta.ok()) return meta.status();
  auto strings = reader.strings();
  if (!strings.ok()) return strings.status();
  auto processes = reader.processes();
  if (!processes.ok()) return processes.status();
  auto threads = reader.threads();
  if (!threads.ok()) return threads.status();
  const std::optional<std::pair<int64_t, int64_t>> range = options.range;
  // A range: the end from the drains and processes (a scan of every table is what a range avoids),
  // and spans that never ended stop at the range's end.
  auto end = range ? reader.end_ns_of_flushes_and_processes() : reader.end_ns();
  if (!end.ok()) return end.status();
  if (range) *end = std::min(*end, range->second);
  auto instant_rows = range ? Result<int64_t>(INT64_MAX) : reader.count("instants");
  if (!instant_rows.ok()) return instant_rows.status();
  base.meta = *meta;
  base.processes = *processes;
  base.threads = *threads;
  base.end_ns = *end;
  for (const auto& [id, value] : *strings) base.strings.emplace(id, value);

  const std::vector<uint32_t> run_instants =
      ids_of(*strings, {E::kDlConfig, E::kDlEpochBegin, E::kDlEpochEnd, E::kDlWorkerStart, E::kDlWorkerStop,
                        E::kDlWorkerReady, E::kDistRank});
  const std::vector<uint32_t> batch_spans = ids_of(*strings, {E::kDlNext, E::kDlFetch});
  const std::vector<uint32_t> batch_instants = ids_of(*strings, {E::kDlSent, E::kDlRecv, E::kDlPut});
  auto context_instants = range ? run_instants_of_range(reader, run_instants, *range, options.margin_ns)
                                : reader.instants_named(run_instants);
  if (!context_instants.ok()) return context_instants.status();
  const std::vector<uint32_t> role_spans = ids_of(*strings, {E::kDlNext, E::kDlFetch, E::kDlPin});
  auto first_spans = range ? first_spans_of_range(reader, role_spans, *range, options.margin_ns)
                           : reader.first_spans_per_thread(role_spans);
  if (!first_spans.ok()) return first_spans.status();
  std::set<int64_t> pin_threads, context_span_ids;
  for (const SpanRow& sp : *first_spans) {
    context_span_ids.insert(sp.id);
    const auto name = strings->find(sp.name_id);
    if (name != strings->end() && vocab::event_of(name->second) == E::kDlPin) pin_threads.insert(sp.thread_id);
  }
  analysis::Session context = base;
  context.spans = *first_spans;
  context.instants = *context_instants;
  context.drop_impossible_rows();
  context.sort_rows();
  context.index();
  const analysis::DataLoaderModel run_model = analysis::build_dataloader_model(context);

  ctx.meta = std::move(*meta);
  ctx.processes = std::move(*processes);
  ctx.threads = std::move(*threads);
  ctx.strings = std::move(*strings);
  ctx.end_ns = base.end_ns;
  ctx.train_pid = run_model.train_pid;
  std::map<int64_t, int64_t> pid_of_process;
  for (const ProcessRow& p : ctx.processes) pid_of_process[p.id] = p.pid;
  for (const ThreadRow& t : ctx.threads) {
    ctx.thread_pid[t.id] = pid_of_process.count(t.process_id) ? pid_of_process[t.process_id] : 0;
    ctx.thread_tid[t.id] = t.tid;
  }
  auto tracks = reader.counter_tracks();
  if (!tracks.ok()) return tracks.status();
  for (CounterTrackRow& t : *tracks) ctx.tracks.emplace(t.id, std::move(t));
  std::map<int64_t, int64_t> rank_of_pid;  // the processes that said their rank
  for (const InstantRow& in : context.instants) {
    if (context.event(in.name_id) == E::kDistRank && in.arg0)
      rank_of_pid.emplace(context.pid_of_thread(in.thread_id), *in.arg0);
  }
  if (rank_of_pid.size() < 2) rank_of_pid.clear();  // one rank: named as any training process
  name_tracks(run_model, pin_threads, rank_of_pid, ctx);

  auto heads = reader.heads();
  if (!heads.ok()) return heads.status();

  ExportCounts n;
  if (Status s = sink.begin(ctx); !s.ok()) return s;

  // The per-batch model, window by window: memory follows the batches of one window, not the run.
  // A small recording is one window, read whole.
  const int64_t window = *instant_rows > options.whole_below_instants ? options.window_ns : 0;
  DerivedSeries derived(&ctx.series);
  int64_t flow_id = 0;
  const int64_t first = range ? range->first : 0;
  // A range: the windows cover it, and end with it.
  const int64_t last = range ? std::min(range->second, kFar - 1) + 1 : kFar;
  for (int64_t k = 0;; ++k) {
    Window w = window <= 0 ? Window{-kFar, kFar}
                           : Window{k == 0 ? (range ? first : -kFar) : first + k * window,
                                    first + (k + 1) * window > ctx.end_ns ? kFar : first + (k + 1) * window};
    if (w.hi >= last) w.hi = last;
    analysis::Session part = base;
    part.spans = context.spans;
    part.instants = context.instants;
    Result<std::vector<SpanRow>> spans = std::vector<SpanRow>{};
    Result<std::vector<InstantRow>> instants = std::vector<InstantRow>{};
    if (window <= 0) {
      spans = reader.spans_named(batch_spans);
      instants = reader.instants_named(batch_instants);
    } else {
      const int64_t lo = w.lo == -kFar ? -kFar : w.lo - options.margin_ns;
      const int64_t hi = w.hi == kFar ? kFar : w.hi + options.margin_ns;
      spans = reader.spans_named_in(batch_spans, lo, hi);
      instants = reader.instants_named_in(batch_instants, lo, hi);
    }
    if (!spans.ok()) return spans.status();
    if (!instants.ok()) return instants.status();
    for (SpanRow& sp : *spans) {
      if (context_span_ids.count(sp.id) == 0) part.spans.push_back(sp);
    }
    part.instants.insert(part.instants.end(), instants->begin(), instants->end());
    part.drop_impossible_rows();
    part.sort_rows();
    part.index();
    const analysis::DataLoaderModel m = analysis::build_dataloader_model(part);
    derived.emit(m, ctx.end_ns, w, [&](const DerivedSample& d) {
      sink.derived(d);
      ++n.derived;
    });
    batch_flows(m, ctx, w, range ? range->first : INT64_MIN, &flow_id, [&](const BatchFlow& f) {
      sink.flow(f);
      ++n.flows;
    });
    if (w.hi == last) break;
  }
  // The rows, table by table: all of them, or those of the range (found through the flush index and
  // a bisection on id, each checked against the range).
  const int64_t lo = range ? range->first : INT64_MIN, hi = range ? range->second : INT64_MAX;
  auto reaches = [&](int64_t start, int64_t end_ns) { return end_ns >= lo && start <= hi; };
  auto span_end = [](const SpanRow& r) {
    int64_t e = 0;
    return !r.dur_ns ? INT64_MAX : __builtin_add_overflow(r.start_ns, *r.dur_ns, &e) ? INT64_MAX : e;
  };
  std::vector<std::pair<int64_t, int64_t>> span_ranges{{1, heads->spans}};
  TableHeads from, upto = *heads;
  if (range) {
    auto spans = reader.span_id_ranges(lo, hi);
    if (!spans.ok()) return spans.status();
    span_ranges = *spans;
    auto before = reader.ids_before(lo);
    if (!before.ok()) return before.status();
    auto through = reader.ids_through(hi);
    if (!through.ok()) return through.status();
    from = *before;
    upto = *through;
  }
  Status s;
  for (const auto& [a, b] : span_ranges) {
    s = reader.for_each_span(a > INT64_MIN ? a - 1 : a, b, [&](const SpanRow& r) {
      if (!reaches(r.start_ns, span_end(r))) return;
      sink.span(r);
      ++n.spans;
    });
    if (!s.ok()) break;
  }
  if (s.ok()) {
    s = reader.for_each_instant(from.instants, upto.instants, [&](const InstantRow& r) {
      if (!reaches(r.ts_ns, r.ts_ns)) return;
      sink.instant(r);
      ++n.instants;
    });
  }
  if (s.ok()) {
    s = reader.for_each_counter(from.counters, upto.counters, [&](const CounterRow& r) {
      if (!reaches(r.ts_ns, r.ts_ns)) return;
      sink.counter(r);
      ++n.counters;
    });
  }
  if (s.ok()) {
    s = reader.for_each_gpu_activity(from.gpu_activities, upto.gpu_activities, [&](const GpuActivityRow& r) {
      int64_t e = 0;
      if (!reaches(r.start_ns, __builtin_add_overflow(r.start_ns, r.dur_ns, &e) ? INT64_MAX : e)) return;
      sink.gpu_activity(r);
      ++n.gpu_activities;
    });
  }
  const Status closed = sink.end();
  if (!s.ok()) return Status::Error(reader.path() + ": " + s.message());
  if (!closed.ok()) return closed;
  return n;
}

}  // namespace stallscope::exporting
