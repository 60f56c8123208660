// analyze(): the training window, steps and throughput, stalls, per-loader figures, queue depth,
// workers and recommendations, one function per figure; analyze() at the end runs them in order.
// Formulas: docs/report.md.
#include "analysis/report.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "analysis/format.h"
#include "analysis/stats.h"

namespace stallscope::analysis {
namespace {

constexpr double kNsPerS = 1e9;
constexpr double kNsPerMs = 1e6;

double seconds(int64_t ns) { return static_cast<double>(ns) / kNsPerS; }

// Length of the part of `x` inside the merged set `over`.
int64_t overlap(const std::vector<Interval>& over, Interval x) {
  auto it =
      std::lower_bound(over.begin(), over.end(), x.begin, [](const Interval& i, int64_t t) { return i.end <= t; });
  int64_t total = 0;
  for (; it != over.end() && it->begin < x.end; ++it) {
    total += std::max<int64_t>(0, std::min(it->end, x.end) - std::max(it->begin, x.begin));
  }
  return total;
}

// The training window: from the first next() call to the end of the last iteration (the latest
// dl.epoch_end or next() end; a next() still waiting reaches the end of the recording).
Interval training_window(const DataLoaderModel& m) {
  Interval w{m.next_calls.front().start_ns, m.next_calls.front().end_ns};
  for (const NextCall& c : m.next_calls) w.end = std::max(w.end, c.end_ns);
  for (const LoaderInfo& l : m.loaders) {
    for (const auto& [e, info] : l.epochs) {
      if (info.end_ns && *info.end_ns >= w.begin) w.end = std::max(w.end, *info.end_ns);
    }
  }
  return w;
}

// One loader's own figures: its settings and worker count, epochs, fetch times (workers', or the
// main thread's with num_workers=0), its active time in the window and how busy its workers were
// then, and what each epoch's start cost (the re-created workers' excess). The loop's waits and
// samples are added by next_call_waits() and handed_batches().
void loader_figures(const DataLoaderModel& m, const Interval& window, const LoaderInfo& li, LoaderStats* ls,
                    std::vector<Interval>* active_out) {
  ls->id = li.id;
  ls->has_config = li.has_config;
  ls->config = li.config;
  ls->stages = li.stages;
  ls->num_workers = li.num_workers();
  if (!ls->num_workers && !li.workers.empty()) {  // neither dl.config nor dl.epoch_begin: count them
    int64_t n = 0;
    for (size_t i : li.workers) n = std::max<int64_t>(n, m.workers[i].worker_id + 1);
    ls->num_workers = n;
  }
  ls->batches_handed = li.handed;
  for (const auto& [e, info] : li.epochs) {
    if (info.next_calls > 0 || info.begin_ns) ++ls->epochs;
  }

  // Fetch times (workers, or the main thread with num_workers=0).
  std::vector<double> fetch_ms;
  std::vector<Interval> fetch_iv;
  for (const FetchInfo& f : m.fetches) {
    if (f.loader != li.id) continue;
    fetch_ms.push_back(static_cast<double>(f.end_ns - f.start_ns) / kNsPerMs);
    fetch_iv.push_back(Interval{f.start_ns, f.end_ns});
  }
  std::sort(fetch_ms.begin(), fetch_ms.end());
  ls->fetches = static_cast<int64_t>(fetch_ms.size());
  ls->fetch_p50_ms = percentile(fetch_ms, 50);
  ls->fetch_p90_ms = percentile(fetch_ms, 90);
  ls->fetch_p99_ms = percentile(fetch_ms, 99);
  if (!fetch_ms.empty()) {
    double sum = 0;
    for (double d : fetch_ms) sum += d;
    ls->fetch_mean_ms = sum / static_cast<double>(fetch_ms.size());
  }

  // Active time: while the loop iterates this loader, epoch by epoch, inside the window.
  std::vector<Interval> active;
  for (const auto& [e, info] : li.epochs) {
    if (info.first_next_ns && info.last_next_end_ns)
      active.push_back(Interval{*info.first_next_ns, *info.last_next_end_ns});
  }
  active = intersect(merge_intervals(std::move(active)), {window});
  ls->active_s = seconds(total_length(active));
  if (ls->num_workers && *ls->num_workers > 0 && total_length(active) > 0) {
    int64_t busy = 0;
    for (const Interval& f : fetch_iv) busy += overlap(active, f);
    ls->workers_busy_fraction =
        static_cast<double>(busy) / (static_cast<double>(*ls->num_workers) * static_cast<double>(total_length(active)));
  }
  *active_out = std::move(active);

  // Epoch starts: dl.epoch_begin -> first batch handed; what re-created workers cost.
  bool first = true;
  const double typical_first_ms = ls->fetch_p50_ms.value_or(0);
  for (const auto& [e, info] : li.epochs) {
    if (!info.begin_ns || !info.first_handed_ns) {
      first = false;
      continue;
    }
    const double start_s = seconds(*info.first_handed_ns - *info.begin_ns);
    ls->epoch_start_s.push_back(start_s);
    ls->epoch_starts.push_back(LoaderStats::EpochStart{e, *info.begin_ns, *info.first_handed_ns});
    if (!first && info.workers_started > 0 && *info.begin_ns >= window.begin) {
      ++ls->respawned_epochs;
      ls->respawn_excess_s += std::max(0.0, start_s - typical_first_ms / 1e3);
    }
    first = false;
  }
}

// Each loader's figures from loader_figures(), by id, and the time the loop iterates it.
struct PerLoader {
  std::map<int64_t, LoaderStats> stats;
  std::map<int64_t, std::vector<Interval>> active;
};

// What the recording is and what qualifies every figure: its path, whether it is finished, the
// machine's CPU count and who recorded it (meta rows), the model's notes, and notes for an attach
// (the run's start is missing) and for an unfinished recording.
void describe_recording(const Session& s, const DataLoaderModel& m, Report* r) {
  r->source = s.path;
  r->complete = s.complete;
  if (auto it = s.meta.find("cpu_count"); it != s.meta.end()) {
    char* end = nullptr;
    const long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (end != it->second.c_str() && v > 0) r->cpu_count = v;
  }
  if (auto it = s.meta.find("usable_cores"); it != s.meta.end()) {
    char* end = nullptr;
    const long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (end != it->second.c_str() && v > 0) r->usable_cores = v;
  }
  if (auto it = s.meta.find("mode"); it != s.meta.end()) r->recorded_by = it->second;
  if (auto it = s.meta.find("command"); it != s.meta.end()) r->command = it->second;
  r->dataloader_seen = m.seen;
  r->train_pid = m.train_pid;
  r->notes = m.notes;
  if (r->recorded_by == vocab::kRecordedByAttach) {
    r->notes.push_back(
        "recorded by `stallscope attach` from the middle of the run: the epoch under way at the "
        "attach is counted from there, and what was in progress then (a next() call, batches "
        "already sent or put) has no events (docs/attach.md)");
  }
  if (!s.complete) {
    r->notes.push_back(
        "the recording is not finished (still being written, or the recorder was stopped): "
        "figures cover what it holds so far");
  }
}

// loader_figures() for every loader of the training process, over the window.
PerLoader per_loader_figures(const DataLoaderModel& m, const Interval& window) {
  PerLoader out;
  for (const LoaderInfo& li : m.loaders) loader_figures(m, window, li, &out.stats[li.id], &out.active[li.id]);
  return out;
}

// Steps and samples: the end of every next() call that handed a batch, sorted (a step ends at
// each), and each loader's samples: the batch's collated size, else batch_size, else 1 (counted
// in samples_unknown).
std::vector<int64_t> handed_batches(const DataLoaderModel& m, std::map<int64_t, LoaderStats>* per_loader) {
  std::vector<int64_t> handoffs;
  for (const NextCall& c : m.next_calls) {
    LoaderStats& ls = (*per_loader)[c.loader];
    if (!c.handed()) continue;
    handoffs.push_back(c.end_ns);
    const BatchInfo* b = m.batch(c.loader, c.epoch, c.batch);
    if (b && b->samples) {
      ls.samples += *b->samples;
    } else if (ls.config.batch_size) {
      ls.samples += *ls.config.batch_size;
    } else {
      ls.samples += 1;
      ++ls.samples_unknown;
    }
  }
  std::sort(handoffs.begin(), handoffs.end());
  return handoffs;
}

// Step times: the gaps between consecutive hand-offs (sorted), as p50/p90/p99, mean and max, and
// in time order.
StepTimes step_times(const std::vector<int64_t>& handoffs) {
  StepTimes t;
  for (size_t i = 1; i < handoffs.size(); ++i) {
    t.series_ms.push_back(static_cast<double>(handoffs[i] - handoffs[i - 1]) / kNsPerMs);
  }
  std::vector<double> step_ms = t.series_ms;
  std::sort(step_ms.begin(), step_ms.end());
  t.p50_ms = percentile(step_ms, 50);
  t.p90_ms = percentile(step_ms, 90);
  t.p99_ms = percentile(step_ms, 99);
  if (!step_ms.empty()) {
    double sum = 0;
    for (double d : step_ms) sum += d;
    t.mean_ms = sum / static_cast<double>(step_ms.size());
    t.max_ms = step_ms.back();
  }
  return t;
}

// The training loop's waits: every next() call clipped to the window becomes a data_wait stall
// interval, and per loader: its wait; the part of it in epoch edges (an epoch's first next() and
// the calls that handed nothing); the StopIteration calls during which the loader stopped its
// workers (a shutdown, which persistent workers would save); and the p50 of the other, steady
// handed calls. Returns the stall in ns. Sums stay in ns, converted once (exact for exact
// inputs), and are unions, should calls ever overlap.
int64_t next_call_waits(const DataLoaderModel& m, const Interval& window, std::map<int64_t, LoaderStats>* per_loader,
                        StallStats* stall) {
  std::map<std::pair<int64_t, int64_t>, bool> seen_epoch;  // (loader, epoch) whose first call was seen
  std::vector<Interval> all_waits;
  std::map<int64_t, std::vector<Interval>> waits;
  std::map<int64_t, int64_t> edge_wait_ns, shutdown_ns;
  std::map<int64_t, std::vector<double>> next_ms;  // per loader: steady handed calls
  std::map<int64_t, std::vector<int64_t>> stops;   // per loader: dl.worker_stop times
  for (const WorkerInfo& w : m.workers) {
    if (w.stop_ns) stops[w.loader].push_back(*w.stop_ns);
  }
  for (auto& [id, v] : stops) std::sort(v.begin(), v.end());
  for (const NextCall& c : m.next_calls) {
    const Interval clipped{std::max(c.start_ns, window.begin), std::min(c.end_ns, window.end)};
    const bool first_of_epoch = !seen_epoch[{c.loader, c.epoch}];
    seen_epoch[{c.loader, c.epoch}] = true;
    if (clipped.length() > 0) {
      stall->intervals.push_back(StallInterval{clipped.begin, clipped.end, kCauseDataWait, c.loader, c.epoch, c.batch});
      all_waits.push_back(clipped);
      waits[c.loader].push_back(clipped);
      if (first_of_epoch || !c.handed()) edge_wait_ns[c.loader] += clipped.length();
      // A StopIteration call during which the loader stopped its workers: a shutdown.
      const auto& st = stops[c.loader];
      auto it = std::lower_bound(st.begin(), st.end(), c.start_ns);
      if (!c.handed() && c.ended && it != st.end() && *it <= c.end_ns) shutdown_ns[c.loader] += clipped.length();
    }
    if (c.handed() && !first_of_epoch) {
      next_ms[c.loader].push_back(static_cast<double>(c.end_ns - c.start_ns) / kNsPerMs);
    }
  }
  for (auto& [id, ls] : *per_loader) {
    const int64_t wait = total_length(merge_intervals(std::move(waits[id])));
    ls.wait_s = seconds(wait);
    ls.edge_wait_s = seconds(std::min(wait, edge_wait_ns[id]));
    ls.shutdown_s = seconds(shutdown_ns[id]);
    if (ls.respawned_epochs > 0) ls.respawn_excess_s += ls.shutdown_s;
    std::sort(next_ms[id].begin(), next_ms[id].end());
    ls.next_p50_ms = percentile(next_ms[id], 50);
  }
  return total_length(merge_intervals(std::move(all_waits)));
}

// The stall: in CPU mode the loop's waits (all data_wait); in GPU mode the GPU's idle time in the
// window, attributed by cause (docs/report.md).
void stall_figures(const Session& s, const DataLoaderModel& m, const Interval& window, int64_t stall_ns, Report* r) {
  r->stall.seconds = seconds(stall_ns);
  r->stall.by_cause_s[kCauseDataWait] = r->stall.seconds;
  r->stall.fraction = window.length() > 0 ? static_cast<double>(stall_ns) / static_cast<double>(window.length()) : 0;
  r->gpu = gpu_stats(s, m, window);
  if (r->gpu.present) {
    r->mode = vocab::kModeGpu;
    attribute_gpu_stalls(s, m, r->gpu, window, &r->stall);
  }
}

// The longest stall interval, with context around it, as evidence to show.
std::optional<EvidenceAt> longest_stall(const StallStats& stall) {
  const StallInterval* longest = nullptr;
  for (const StallInterval& iv : stall.intervals) {
    if (!longest || iv.end_ns - iv.start_ns > longest->end_ns - longest->start_ns) longest = &iv;
  }
  if (!longest) return std::nullopt;
  const int64_t len = longest->end_ns - longest->start_ns;
  return evidence_around(
      longest->start_ns, longest->end_ns, 1.5,
      "longest stall: " + duration_ms(static_cast<double>(len) / 1e6) + " at " + clock_time(longest->start_ns) +
          (longest->batch >= 0 ? " (waiting for batch " + std::to_string(longest->batch) + ")" : ""));
}

// Input wait: the stall plus time inside DataLoader.__iter__ (epoch_begin -> first next()) for
// epochs that start inside the window; __iter__ is where non-persistent workers are started.
// From it: whether the run is data-bound, and the compute time per step (the rest of the window).
void input_wait(const DataLoaderModel& m, const Interval& window, int64_t stall_ns, Report* r) {
  int64_t iter_ns = 0;
  for (const LoaderInfo& li : m.loaders) {
    for (const auto& [e, info] : li.epochs) {
      if (info.begin_ns && info.first_next_ns && *info.begin_ns >= window.begin && *info.first_next_ns <= window.end) {
        iter_ns += std::max<int64_t>(0, *info.first_next_ns - *info.begin_ns);
      }
    }
  }
  const int64_t input_wait_ns = std::min(window.length(), stall_ns + iter_ns);
  r->input_wait_fraction =
      window.length() > 0 ? static_cast<double>(input_wait_ns) / static_cast<double>(window.length()) : 0;
  r->data_bound = r->input_wait_fraction >= kDataBoundFraction;
  if (r->steps > 0) {
    r->compute_per_step_ms =
        static_cast<double>(window.length() - input_wait_ns) / kNsPerMs / static_cast<double>(r->steps);
  }
}

// The loaders into the report, in id order, with the totals over them: samples (and a note for
// batches of unknown size), samples/s, and the main loader (the most batches handed; ties: the
// lowest id).
void loader_totals(const std::map<int64_t, LoaderStats>& per_loader, Report* r) {
  int64_t unknown = 0;
  for (const auto& [id, ls] : per_loader) {
    r->samples += ls.samples;
    unknown += ls.samples_unknown;
    if (!r->main_loader || ls.batches_handed > per_loader.at(*r->main_loader).batches_handed) r->main_loader = id;
    r->loaders.push_back(ls);
  }
  if (unknown > 0) {
    r->notes.push_back(std::to_string(unknown) +
                       " handed batches had no known size (no dl.collate and no batch_size); each was counted as 1 "
                       "sample");
  }
  r->samples_per_s = r->wall_s > 0 ? std::optional<double>(static_cast<double>(r->samples) / r->wall_s) : std::nullopt;
}

// Queue depth of the main loader (batches ready in the queue, batches in flight), weighted over
// its active time; or why it is unknown (no workers, no dl.sent/dl.put events).
void queue_figures(const Session& s, const DataLoaderModel& m, const PerLoader& loaders, Report* r) {
  const LoaderStats* main = r->loader();
  const LoaderInfo* main_info = main ? m.loader(main->id) : nullptr;
  if (!main || !main_info) return;
  bool has_queue_events = false;
  for (size_t i : main_info->batches) {
    if (m.batches[i].sent_ns || m.batches[i].put_ns) {
      has_queue_events = true;
      break;
    }
  }
  if (main->num_workers && *main->num_workers == 0) {
    r->queue.note = "num_workers=0: batches are loaded inside next(), there is no queue";
    return;
  }
  if (!has_queue_events) {
    r->queue.note = "no dl.sent/dl.put events were recorded for the main loader; queue depth is unknown";
    return;
  }
  const QueueDepth q = queue_depth(m, *main_info, s.end_ns);
  const auto active = loaders.active.find(main->id);
  const std::vector<Interval> none;
  const std::vector<Interval>& over = active == loaders.active.end() ? none : active->second;
  const StepSummary ready = summarize(q.ready, over);
  const StepSummary flight = summarize(q.in_flight, over);
  r->queue.available = ready.covered_ns > 0;
  if (r->queue.available) {
    r->queue.mean_ready = ready.mean;
    r->queue.empty_fraction = ready.zero_fraction;
    r->queue.mean_in_flight = flight.mean;
    r->queue.max_ready = ready.max;
    r->queue.active_s = seconds(ready.covered_ns);
  }
  r->queue.ready = q.ready;
  r->queue.in_flight = q.in_flight;
}

// The training process's CPU use (cores) and run-queue delay: the means of its proc.cpu and
// proc.runq_wait samples inside the window.
void train_process_cpu(const Session& s, const DataLoaderModel& m, const Interval& window, Report* r) {
  for (const CounterTrackRow& t : s.counter_tracks) {
    const vocab::Counter counter = vocab::counter_of(t.name);
    if (t.pid != m.train_pid || (counter != vocab::Counter::kCpu && counter != vocab::Counter::kRunqWait)) continue;
    auto [b, e] = s.samples(t.id);
    double sum = 0;
    int n = 0;
    for (const CounterRow* c = b; c != e; ++c) {
      if (c->ts_ns >= window.begin && c->ts_ns <= window.end) {
        sum += c->value;
        ++n;
      }
    }
    if (n > 0) (counter == vocab::Counter::kCpu ? r->train_cpu_util : r->train_runq_delay_fraction) = sum / n;
  }
}

// A data-bound run that no speed recommendation explains gets a note, first, with what was
// measured instead: the queue, the workers' busy time, a steady next() and the epoch edges.
void note_unexplained_wait(Report* r) {
  const LoaderStats* main = r->loader();
  bool speed = false;
  for (const Recommendation& rec : r->recommendations) speed |= rec.speed;
  if (!r->data_bound || speed || !main) return;
  if (r->whatif.available) {
    r->notes.insert(r->notes.begin(), "the loop waits for input " + percent(r->input_wait_fraction) +
                                          " of the window, but the what-if model finds no DataLoader setting that "
                                          "gains " +
                                          percent(r->whatif.min_gain - 1, 0) + " or more: the loop is bound by " +
                                          r->whatif.bound_text);
    return;
  }
  std::string n = "the loop waits for input " + percent(r->input_wait_fraction) +
                  " of the window, but no DataLoader setting explains it:";
  if (r->queue.available) {
    n += " the ready queue holds " + fixed(*r->queue.mean_ready, 1) + " batches on average (empty " +
         percent(*r->queue.empty_fraction) + " of the time);";
  }
  if (main->workers_busy_fraction) n += " workers are busy " + percent(*main->workers_busy_fraction) + ";";
  n += " a next() that is not an epoch's first takes " + or_dash(main->next_p50_ms, duration_ms) +
       " (p50) and epoch starts and ends take " + fixed(main->edge_wait_s, 2) + " s in all";
  if (main->num_workers.value_or(0) > 0) n += "; per-batch cost of receiving batches from worker processes shows here";
  r->notes.insert(r->notes.begin(), n);
}

}  // namespace

const LoaderStats* Report::loader() const {
  if (!main_loader) return nullptr;
  for (const LoaderStats& l : loaders) {
    if (l.id == *main_loader) return &l;
  }
  return nullptr;
}

EvidenceAt evidence_around(int64_t t0, int64_t t1, double pad, std::string what) {
  const int64_t len = std::max<int64_t>(t1 - t0, 1000);
  const int64_t context = static_cast<int64_t>(static_cast<double>(len) * pad);
  EvidenceAt e;
  e.t0 = t0 - context;
  e.t1 = t1 + context;
  e.what = std::move(what);
  return e;
}

Report analyze(const Session& s) { return analyze(s, build_dataloader_model(s)); }

Report analyze(const Session& s, const DataLoaderModel& m) {
  Report r;
  describe_recording(s, m, &r);
  r.workers = worker_stats(s, m);
  if (!m.seen) {
    r.notes.insert(r.notes.begin(),
                   "no DataLoader was seen: the recording has no dl.* events, so there is no training "
                   "loop to analyse (was the program iterating a torch DataLoader under stallscope run?)");
    return r;
  }
  if (m.next_calls.empty()) {
    r.notes.insert(r.notes.begin(),
                   "a DataLoader was created but next() was never called on it: no training loop to analyse");
    for (const LoaderInfo& li : m.loaders) {
      LoaderStats ls;
      std::vector<Interval> active;
      loader_figures(m, Interval{0, 0}, li, &ls, &active);
      r.loaders.push_back(std::move(ls));
    }
    return r;
  }

  const Interval window = training_window(m);
  r.window_start_ns = window.begin;
  r.window_end_ns = window.end;
  r.wall_s = seconds(window.length());

  PerLoader loaders = per_loader_figures(m, window);
  const std::vector<int64_t> handoffs = handed_batches(m, &loaders.stats);
  r.steps = static_cast<int64_t>(handoffs.size());
  r.step_time = step_times(handoffs);
  const int64_t stall_ns = next_call_waits(m, window, &loaders.stats, &r.stall);
  stall_figures(s, m, window, stall_ns, &r);
  r.longest_stall = longest_stall(r.stall);
  input_wait(m, window, stall_ns, &r);
  loader_totals(loaders.stats, &r);
  queue_figures(s, m, loaders, &r);
  train_process_cpu(s, m, window, &r);
  r.whatif = what_if(s, m, r);
  r.recommendations = recommend(r);
  note_unexplained_wait(&r);
  return r;
}

}  // namespace stallscope::analysis
