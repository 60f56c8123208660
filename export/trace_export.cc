// The export's one pass: names and derived series from the DataLoader model, then every table of
// the recording streamed to the sink in id order.
#include "export/trace_export.h"

#include <algorithm>
#include <functional>
#include <set>
#include <utility>

#include "analysis/session.h"

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
void batch_flows(const analysis::DataLoaderModel& m, const ExportContext& ctx, Window w, int64_t* next_id,
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
    if (b.sent_ns && inside_next(m, *b.sent_ns)) f.sent = BatchFlow::Point{m.train_pid, train_tid->second, *b.sent_ns};
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
  auto end = reader.end_ns();
  if (!end.ok()) return end.status();
  auto instant_rows = reader.count("instants");
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
  auto context_instants = reader.instants_named(run_instants);
  if (!context_instants.ok()) return context_instants.status();
  auto first_spans = reader.first_spans_per_thread(ids_of(*strings, {E::kDlNext, E::kDlFetch, E::kDlPin}));
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
  const int64_t first = 0;
  for (int64_t k = 0;; ++k) {
    const Window w = window <= 0 ? Window{-kFar, kFar}
                                 : Window{k == 0 ? -kFar : first + k * window,
                                          first + (k + 1) * window > ctx.end_ns ? kFar : first + (k + 1) * window};
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
    batch_flows(m, ctx, w, &flow_id, [&](const BatchFlow& f) {
      sink.flow(f);
      ++n.flows;
    });
    if (w.hi == kFar) break;
  }
  Status s = reader.for_each_span(0, heads->spans, [&](const SpanRow& r) {
    sink.span(r);
    ++n.spans;
  });
  if (s.ok()) {
    s = reader.for_each_instant(0, heads->instants, [&](const InstantRow& r) {
      sink.instant(r);
      ++n.instants;
    });
  }
  if (s.ok()) {
    s = reader.for_each_counter(0, heads->counters, [&](const CounterRow& r) {
      sink.counter(r);
      ++n.counters;
    });
  }
  if (s.ok()) {
    s = reader.for_each_gpu_activity(0, heads->gpu_activities, [&](const GpuActivityRow& r) {
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
