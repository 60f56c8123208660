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

// The training loader (docs/report.md, "Who is who"): the loader whose batches the optimizer
// steps trained on (dl.step), else the one a framework made for training (Lightning's
// train_dataloader, HF Trainer's get_train_dataloader), else the one that handed the most
// batches. Ties: the most batches handed, then the lowest id. Only loaders that handed a batch.
struct TrainingLoader {
  std::optional<int64_t> id;
  std::string by;
};
// A session read from a later point (Session::run_next_calls) ranks the loaders by their
// whole-run counts from the summaries, on the training process's threads.
TrainingLoader pick_training_loader(const Session& s, const DataLoaderModel& m) {
  const bool whole_run = s.loaded_from_ns.has_value() && !s.run_next_calls.empty();
  auto run_count = [&](const std::map<std::pair<int64_t, int64_t>, int64_t>& counts, int64_t loader) {
    int64_t n = 0;
    for (const auto& [key, count] : counts) {
      const ThreadRow* t = s.thread(key.first);
      if (key.second == loader && t != nullptr && t->process_id == m.train_process_id) n += count;
    }
    return n;
  };
  auto handed = [&](const LoaderInfo& l) { return whole_run ? run_count(s.run_next_calls, l.id) : l.handed; };
  auto steps = [&](const LoaderInfo& l) { return whole_run ? run_count(s.run_steps, l.id) : l.steps; };
  auto better = [&](const LoaderInfo& a, const LoaderInfo* b, auto key) {
    return b == nullptr || key(a) > key(*b) || (key(a) == key(*b) && handed(a) > handed(*b));
  };
  const LoaderInfo* by_steps = nullptr;
  const LoaderInfo* by_hint = nullptr;
  const LoaderInfo* by_batches = nullptr;
  for (const LoaderInfo& l : m.loaders) {  // by id
    if (l.handed == 0) continue;           // none in what was read: no figures to give
    if (steps(l) > 0 && better(l, by_steps, steps)) by_steps = &l;
    if (l.config.role_hint == std::string("train") && better(l, by_hint, handed)) by_hint = &l;
    if (better(l, by_batches, handed)) by_batches = &l;
  }
  if (by_steps) return {by_steps->id, "optimizer_steps"};
  if (by_hint) return {by_hint->id, "framework"};
  if (by_batches) return {by_batches->id, "most_batches"};
  return {};
}

// The training window: from the training loader's first DataLoader.__iter__ (its first epoch's
// dl.epoch_begin, where workers start; else its first next() call) to the end of the last
// iteration of any loader (the latest dl.epoch_end or next() end; a next() still waiting reaches
// the end of the recording). Without a training loader: from the first next() call.
Interval training_window(const DataLoaderModel& m, std::optional<int64_t> train) {
  std::optional<int64_t> begin;
  if (const LoaderInfo* li = train ? m.loader(*train) : nullptr) {
    for (const auto& [e, info] : li->epochs) {
      if (!info.first_next_ns) continue;  // an epoch never iterated
      begin = info.begin_ns && *info.begin_ns <= *info.first_next_ns ? *info.begin_ns : *info.first_next_ns;
      break;
    }
  }
  if (!begin) begin = m.next_calls.front().start_ns;
  Interval w{*begin, *begin};
  for (const NextCall& c : m.next_calls) {
    if (c.end_ns >= w.begin) w.end = std::max(w.end, c.end_ns);
  }
  for (const LoaderInfo& l : m.loaders) {
    for (const auto& [e, info] : l.epochs) {
      if (info.end_ns && *info.end_ns >= w.begin) w.end = std::max(w.end, *info.end_ns);
    }
  }
  return w;
}

// Where one loader was starting (loader_starts(): its DataLoader.__iter__ and, while no worker it
// started is ready, the start of its first next()), clipped to the window.
std::vector<Interval> iter_intervals(const DataLoaderModel& m, const LoaderInfo& li, const Interval& window) {
  std::vector<Interval> out;
  for (const LoaderStart& st : loader_starts(m, li)) {
    const Interval x{std::max(st.begin_ns, window.begin), std::min(st.end_ns, window.end)};
    if (x.length() > 0) out.push_back(x);
  }
  return out;
}

// One loader's own figures: its settings and worker count, epochs, fetch times (workers', or the
// main thread's with num_workers=0), its active time in the window and how busy its workers were
// then, and what each epoch's start cost (the re-created workers' excess). The loop's waits and
// samples are added by next_call_waits() and handed_batches().
void loader_figures(const DataLoaderModel& m, const Interval& window, const LoaderInfo& li, LoaderStats* ls,
                    std::vector<Interval>* active_out) {
  ls->id = li.id;
  ls->name = loader_name(li.config, li.id);
  ls->steps = li.steps;
  ls->start_s = seconds(total_length(merge_intervals(iter_intervals(m, li, window))));
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
  if (auto it = s.meta.find("detail_from_ns"); it != s.meta.end()) {
    char* end = nullptr;
    const long long from = std::strtoll(it->second.c_str(), &end, 10);
    if (end != it->second.c_str() && from > 0) {
      r->detail_from_ns = from;
      r->notes.push_back("recorded with --keep-detail: every event was kept from " + clock_time(from, 0) +
                         " on, summaries for the whole run; the figures above cover what has every event, the "
                         "\"Over time\" table the whole run");
    }
  }
  if (s.loaded_to_ns && s.loaded_from_ns) {
    r->detail_from_ns = std::max(*s.loaded_from_ns, r->detail_from_ns.value_or(INT64_MIN));
    r->detail_to_ns = *s.loaded_to_ns;
    r->notes.push_back("a window of a long recording: the figures above cover " + clock_time(*r->detail_from_ns, 0) +
                       " to " + clock_time(*s.loaded_to_ns, 0) + ", and the \"Over time\" table the whole run");
  } else if (s.loaded_from_ns && (!r->detail_from_ns || *s.loaded_from_ns > *r->detail_from_ns)) {
    r->detail_from_ns = *s.loaded_from_ns;
    r->notes.push_back("a long recording: the figures above cover its latest part, from " +
                       clock_time(*s.loaded_from_ns, 0) +
                       " on, to keep the report's memory bounded, and the \"Over time\" table the whole run; "
                       "`stallscope report --detail all` reads every event (--detail 2h: the latest 2 hours)");
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

// Steps and samples: the end of every next() call of the training loader that handed a batch,
// sorted (a step ends at each), and each loader's samples: the batch's collated size, else
// batch_size, else 1 (counted in samples_unknown).
std::vector<int64_t> handed_batches(const DataLoaderModel& m, std::optional<int64_t> train,
                                    std::map<int64_t, LoaderStats>* per_loader) {
  std::vector<int64_t> handoffs;
  for (const NextCall& c : m.next_calls) {
    LoaderStats& ls = (*per_loader)[c.loader];
    if (!c.handed()) continue;
    if (train && c.loader == *train) handoffs.push_back(c.end_ns);
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

// The training loop's waits: every next() call of the training loader clipped to the window
// becomes a data_wait stall interval, and each of its epochs' DataLoader.__iter__ a loader_start
// one; per loader (evaluation loaders too): its wait; the part of it in epoch edges (an epoch's first next() and
// the calls that handed nothing); the StopIteration calls during which the loader stopped its
// workers (a shutdown, which persistent workers would save); and the p50 of the other, steady
// handed calls. Returns the stall in ns. Sums stay in ns, converted once (exact for exact
// inputs), and are unions, should calls ever overlap.
int64_t next_call_waits(const DataLoaderModel& m, const Interval& window, std::optional<int64_t> train,
                        std::map<int64_t, LoaderStats>* per_loader, StallStats* stall) {
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
  // The training loader's starts: the part of an epoch's first next() spent waiting for its new
  // workers to be ready is loader_start, not data_wait.
  const LoaderInfo* train_info = train ? m.loader(*train) : nullptr;
  std::map<int64_t, int64_t> start_end;  // epoch -> end of its start
  if (train_info) {
    for (const LoaderStart& st : loader_starts(m, *train_info)) start_end[st.epoch] = st.end_ns;
  }
  for (const NextCall& c : m.next_calls) {
    Interval clipped{std::max(c.start_ns, window.begin), std::min(c.end_ns, window.end)};
    const bool first_of_epoch = !seen_epoch[{c.loader, c.epoch}];
    if (train && c.loader == *train && first_of_epoch && start_end.count(c.epoch) != 0) {
      clipped.begin = std::min(clipped.end, std::max(clipped.begin, start_end[c.epoch]));
    }
    seen_epoch[{c.loader, c.epoch}] = true;
    if (clipped.length() > 0) {
      if (train && c.loader == *train) {
        stall->intervals.push_back(
            StallInterval{clipped.begin, clipped.end, kCauseDataWait, c.loader, c.epoch, c.batch});
        all_waits.push_back(clipped);
      }
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
  const int64_t wait_ns = total_length(merge_intervals(std::move(all_waits)));
  stall->by_cause_s[kCauseDataWait] = seconds(wait_ns);
  int64_t start_ns = 0;
  if (const LoaderInfo* li = train_info) {
    for (const Interval& x : iter_intervals(m, *li, window)) {
      stall->intervals.push_back(
          StallInterval{x.begin, x.end, kCauseLoaderStart, li->id, m.epoch_at(li->id, x.begin), -1});
      start_ns += x.length();
    }
    std::sort(stall->intervals.begin(), stall->intervals.end(),
              [](const StallInterval& a, const StallInterval& b) { return a.start_ns < b.start_ns; });
  }
  stall->by_cause_s[kCauseLoaderStart] = seconds(start_ns);
  return wait_ns + start_ns;
}

// The stall: in CPU mode the loop's waits for its training loader (data_wait, loader_start: by
// cause already); in GPU mode the GPU's idle time in the window, attributed by cause; in light GPU
// mode the part of each next() wait during which the GPU had no work (docs/report.md).
void stall_figures(const Session& s, const DataLoaderModel& m, const Interval& window, int64_t stall_ns, Report* r) {
  r->stall.seconds = seconds(stall_ns);
  r->stall.fraction = window.length() > 0 ? static_cast<double>(stall_ns) / static_cast<double>(window.length()) : 0;
  r->gpu = gpu_stats(s, m, window);
  if (r->gpu.present) {
    r->mode = vocab::kModeGpu;
    attribute_gpu_stalls(s, m, r->gpu, window, &r->stall);
    return;
  }
  r->gpu_light = attribute_light_stalls(s, m, &r->stall);
  if (r->gpu_light.present) {
    r->mode = vocab::kModeGpuLight;
    r->stall.fraction = window.length() > 0 ? r->stall.seconds * 1e9 / static_cast<double>(window.length()) : 0;
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

// Input wait: the training loader's waits (next() and DataLoader.__iter__, where non-persistent
// workers are started), measured on the host in both modes. From it: whether the run is
// data-bound, and the compute time per step: the rest of the window less the time spent in other
// loaders' epochs (evaluation: eval_s, their __iter__ to their last next()).
void input_wait(const DataLoaderModel& m, const Interval& window, int64_t input_wait_ns, Report* r) {
  std::vector<Interval> eval;
  for (const LoaderInfo& li : m.loaders) {
    if (r->main_loader && li.id == *r->main_loader) continue;
    for (const auto& [e, info] : li.epochs) {
      const std::optional<int64_t> b = info.begin_ns ? info.begin_ns : info.first_next_ns;
      if (b && info.last_next_end_ns && *info.last_next_end_ns > *b)
        eval.push_back(Interval{*b, *info.last_next_end_ns});
    }
  }
  const int64_t eval_ns = total_length(intersect(merge_intervals(std::move(eval)), {window}));
  r->eval_s = seconds(eval_ns);
  input_wait_ns = std::min(window.length(), input_wait_ns);
  r->input_wait_fraction =
      window.length() > 0 ? static_cast<double>(input_wait_ns) / static_cast<double>(window.length()) : 0;
  r->data_bound = r->input_wait_fraction >= kDataBoundFraction;
  if (r->steps > 0) {
    r->compute_per_step_ms = static_cast<double>(std::max<int64_t>(0, window.length() - input_wait_ns - eval_ns)) /
                             kNsPerMs / static_cast<double>(r->steps);
  }
}

// The loaders into the report, in id order, with their roles: the training loader (`train`) is
// the main loader, and its samples are the report's; another loader is `eval` when a framework
// made it for evaluation or when the optimizer steps were seen and none trained on its batches,
// else `unknown`. A note for batches of unknown size; samples/s.
void loader_totals(const std::map<int64_t, LoaderStats>& per_loader, const TrainingLoader& train, Report* r) {
  int64_t unknown = 0;
  r->main_loader = train.id;
  r->main_loader_by = train.by;
  for (const auto& [id, ls] : per_loader) {
    LoaderStats l = ls;
    if (train.id && id == *train.id) {
      l.role = "train";
      r->samples += l.samples;
      unknown += l.samples_unknown;
    } else if (l.config.role_hint == std::string("eval") || (train.by == "optimizer_steps" && l.steps == 0)) {
      l.role = "eval";
    } else {
      l.role = "unknown";
    }
    r->loaders.push_back(std::move(l));
  }
  if (unknown > 0) {
    r->notes.push_back(std::to_string(unknown) +
                       " handed batches had no known size (no dl.collate and no batch_size); each was counted as 1 "
                       "sample");
  }
  r->samples_per_s = r->wall_s > 0 ? std::optional<double>(static_cast<double>(r->samples) / r->wall_s) : std::nullopt;
}

// A loop whose wait is mostly its training loader's worker start-up under spawn or forkserver
// (each worker imports torch and the script anew) gets a note: a one-off cost with persistent
// workers, paid again at every epoch without them.
void note_spawn_start(const Report& r, const std::vector<WorkerStats>& workers, std::vector<std::string>* notes) {
  const LoaderStats* l = r.loader();
  if (!l || !l->config.start_method || *l->config.start_method == "fork" || r.stall.seconds <= 0) return;
  auto it = r.stall.by_cause_s.find(kCauseLoaderStart);
  const double start = it == r.stall.by_cause_s.end() ? 0 : it->second;
  if (start < 0.5 * r.stall.seconds) return;
  double startup = 0;
  int n = 0;
  for (const WorkerStats& w : workers) {
    if (w.loader == l->id && w.ready_seen) {
      startup += w.startup_s;
      ++n;
    }
  }
  const double per_epoch = l->epochs > 0 ? start / static_cast<double>(l->epochs) : start;
  std::string t = "most of the loop's wait for input is its training loader starting its workers (start method " +
                  *l->config.start_method + "): " + fixed(start, 2) + " s of " + fixed(r.stall.seconds, 2) +
                  " s in DataLoader.__iter__ (loader_start)";
  if (n > 0) {
    t += "; a worker took " + fixed(startup / n, 2) +
         " s on average to start (importing torch and the script's modules in each)";
  }
  t += l->config.persistent_workers.value_or(false)
           ? ". With persistent_workers=True this is a one-off cost of the first epoch"
           : ". It is paid at every epoch while persistent_workers=False (about " + fixed(per_epoch, 2) +
                 " s per epoch here); with persistent_workers=True only once";
  notes->push_back(t);
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

// The training process's CPU use (cores), run-queue delay, CPU in the kernel and minor page faults:
// the means of its proc.cpu, proc.runq_wait, proc.sys_cpu and proc.minor_faults samples inside the
// window; the faults a second times the window, per step.
void train_process_cpu(const Session& s, const DataLoaderModel& m, const Interval& window, Report* r) {
  using vocab::Counter;
  for (const CounterTrackRow& t : s.counter_tracks) {
    const Counter counter = vocab::counter_of(t.name);
    std::optional<double>* into = counter == Counter::kCpu           ? &r->train_cpu_util
                                  : counter == Counter::kRunqWait    ? &r->train_runq_delay_fraction
                                  : counter == Counter::kSysCpu      ? &r->train_sys_cpu
                                  : counter == Counter::kMinorFaults ? &r->train_faults_per_step
                                                                     : nullptr;
    if (t.pid != m.train_pid || into == nullptr) continue;
    auto [b, e] = s.samples(t.id);
    double sum = 0;
    int n = 0;
    for (const CounterRow* c = b; c != e; ++c) {
      if (c->ts_ns >= window.begin && c->ts_ns <= window.end) {
        sum += c->value;
        ++n;
      }
    }
    if (n > 0) *into = sum / n;
  }
  if (r->train_faults_per_step) {
    if (r->steps > 0) {
      *r->train_faults_per_step *= r->wall_s / static_cast<double>(r->steps);
    } else {
      r->train_faults_per_step.reset();
    }
  }
}

// A data-bound run that no speed recommendation explains gets a note, first, with what was
// measured instead: the queue, the workers' busy time, a steady next() and the epoch edges.
void note_unexplained_wait(Report* r) {
  const LoaderStats* main = r->loader();
  bool speed = false;
  for (const Recommendation& rec : r->recommendations) speed |= rec.speed;
  if (!r->data_bound || speed || !main) return;
  const double wait_s = r->input_wait_fraction * r->wall_s;
  if (wait_s < kMinInputWaitS) {
    r->notes.insert(r->notes.begin(), "the loop waits for input " + percent(r->input_wait_fraction) +
                                          " of the window, but " + duration_ms(wait_s * 1e3) +
                                          " in all: too little for a change to the input pipeline to be worth making");
    return;
  }
  if (r->whatif.available) {
    r->notes.insert(r->notes.begin(), "the loop waits for input " + percent(r->input_wait_fraction) +
                                          " of the window, but the what-if model finds no DataLoader setting that "
                                          "gains " +
                                          percent(r->whatif.min_gain - 1, 0) +
                                          " or more; what bounds the loop: " + r->whatif.bound_text);
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
  const int64_t context = saturated_int64(static_cast<double>(len) * pad);
  EvidenceAt e;
  e.t0 = t0 - context;
  e.t1 = t1 + context;
  e.what = std::move(what);
  return e;
}

namespace {

std::string rank_of_pid(const RankSummary& ranks, int64_t pid) {
  for (const RankStats& r : ranks.ranks) {
    if (r.pid == pid) return std::to_string(r.rank);
  }
  return "?";
}

}  // namespace

Report analyze(const Session& s) { return analyze(s, build_dataloader_model(s)); }

Report analyze(const Session& s, const DataLoaderModel& m) {
  Report r;
  describe_recording(s, m, &r);
  if (s.impossible_rows > 0) {
    r.notes.push_back(
        std::to_string(s.impossible_rows) +
        " rows with impossible values (negative durations, times or arguments past 2^60, counters that are "
        "not numbers) were left out: the recording is damaged, the figures come from the rest");
  }
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
      ls.role = li.config.role_hint.value_or("unknown");
      r.loaders.push_back(std::move(ls));
    }
    return r;
  }

  const TrainingLoader train = pick_training_loader(s, m);
  Interval window = training_window(m, train.id);
  // Read from a later point: a next() call that reaches across the cut was read whole, but the
  // figures cover from the cut on (what was before it was not read).
  if (s.loaded_from_ns && window.begin < *s.loaded_from_ns) window.begin = std::min(*s.loaded_from_ns, window.end);
  r.window_start_ns = window.begin;
  r.window_end_ns = window.end;
  r.wall_s = seconds(window.length());
  r.optimizer_steps = m.steps;

  PerLoader loaders = per_loader_figures(m, window);
  const std::vector<int64_t> handoffs = handed_batches(m, train.id, &loaders.stats);
  r.steps = static_cast<int64_t>(handoffs.size());
  r.step_time = step_times(handoffs);
  const int64_t input_wait_ns = next_call_waits(m, window, train.id, &loaders.stats, &r.stall);
  stall_figures(s, m, window, input_wait_ns, &r);
  r.longest_stall = longest_stall(r.stall);
  loader_totals(loaders.stats, train, &r);
  input_wait(m, window, input_wait_ns, &r);
  queue_figures(s, m, loaders, &r);
  train_process_cpu(s, m, window, &r);
  r.whatif = what_if(s, m, r);
  r.recommendations = recommend(r);
  r.actions = plan_actions(r);
  note_unexplained_wait(&r);
  note_spawn_start(r, r.workers, &r.notes);
  r.ranks = analyze_ranks(s);
  if (r.ranks.slowest) {
    // A job goes at the pace of its slowest rank: its report is the job's, the others in Ranks.
    if (std::optional<Session> part = rank_part(s, r.ranks.slowest->rank)) {
      Report slow = analyze(*part);
      slow.source = r.source;
      slow.ranks = std::move(r.ranks);
      slow.notes.push_back("a job of " + std::to_string(slow.ranks.ranks.size()) +
                           " ranks: the figures above are the slowest rank's, rank " +
                           std::to_string(slow.ranks.slowest->rank) + " (the one the others wait for); see Ranks");
      return slow;
    }
  }
  if (!r.ranks.ranks.empty()) {
    r.notes.push_back("a job of " + std::to_string(r.ranks.ranks.size()) + " ranks: the figures above are rank " +
                      rank_of_pid(r.ranks, r.train_pid) + "'s (the process that handed the most batches); see Ranks");
  }
  return r;
}

}  // namespace stallscope::analysis
