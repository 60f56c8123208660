// MetricsState: one pass over a live recording's new rows per update, and the exposition text.
#include "export/metrics.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <tuple>

#include "common/json.h"
#include "stallscope/version.h"

namespace stallscope::metrics {
namespace {

constexpr int64_t kSecond = 1000000000;
// Caps that keep the state bounded when a program makes loaders, batches or processes without end.
constexpr size_t kMaxLoaders = 64;
constexpr size_t kMaxPendingBatches = 4096;
constexpr size_t kMaxProcesses = 1024;
constexpr size_t kMaxConfigs = 256;

int64_t arg(const std::optional<int64_t>& a, int64_t fallback = 0) { return a ? *a : fallback; }

// Prometheus label values: backslash, double quote and newline escaped.
std::string escape(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

class Text {
 public:
  explicit Text(const Labels& l)
      : base_("job=\"" + escape(l.job) + "\",rank=\"" + escape(l.rank) + "\",host=\"" + escape(l.host) + "\"") {}
  void family(const char* name, const char* type, const char* help) {
    out_ += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void sample(const char* name, double v, const std::string& extra = "") {
    out_ += std::string(name) + "{" + base_ + (extra.empty() ? "" : "," + extra) + "} " + number(v) + "\n";
  }
  std::string take() { return std::move(out_); }

 private:
  std::string base_;
  std::string out_;
};

std::string label(const char* key, const std::string& value) { return std::string(key) + "=\"" + escape(value) + "\""; }

}  // namespace

Status MetricsState::update(Reader& r) {
  Reader::Snapshot snapshot(r);
  auto heads = r.heads();
  if (!heads.ok()) return heads.status();
  if (Status s = r.for_each_string(last_string_,
                                   [this](uint32_t id, std::string text) {
                                     names_.add(id, text);
                                     last_string_ = std::max<int64_t>(last_string_, id);
                                     if (!text.empty() && text[0] == '{' &&
                                         text.find("\"batch_size\"") != std::string::npos &&
                                         configs_.size() < kMaxConfigs) {
                                       configs_[id] = std::move(text);
                                     }
                                   });
      !s.ok()) {
    return s;
  }
  auto processes = r.processes();
  if (!processes.ok()) return processes.status();
  process_pid_.clear();
  for (const ProcessRow& p : *processes) process_pid_[p.id] = p.pid;
  auto threads = r.threads();
  if (!threads.ok()) return threads.status();
  threads_.clear();
  for (const ThreadRow& t : *threads) {
    auto it = process_pid_.find(t.process_id);
    threads_[t.id] = {t.process_id, it == process_pid_.end() ? 0 : it->second};
  }
  auto tracks = r.counter_tracks();
  if (!tracks.ok()) return tracks.status();
  tracks_.clear();
  for (const CounterTrackRow& t : *tracks) tracks_[t.id] = {vocab::counter_of(t.name), t.pid};

  const TableHeads& h = *heads;
  if (Status s = r.for_each_instant(last_.instants, h.instants,
                                    [this](const InstantRow& i) {
                                      on_instant(i);
                                      last_.instants = i.id;
                                    });
      !s.ok()) {
    return s;
  }
  if (Status s = r.for_each_span(last_.spans, h.spans,
                                 [this](const SpanRow& sp) {
                                   on_span(sp);
                                   last_.spans = sp.id;
                                 });
      !s.ok()) {
    return s;
  }
  if (Status s = r.for_each_counter(last_.counters, h.counters, [this](const CounterRow& c) { on_counter(c); });
      !s.ok()) {
    return s;
  }
  if (Status s = r.for_each_gpu_activity(last_.gpu_activities, h.gpu_activities,
                                         [this](const GpuActivityRow& g) {
                                           on_gpu(g);
                                           last_.gpu_activities = g.id;
                                         });
      !s.ok()) {
    return s;
  }
  // Each table's position moves row by row (a read that fails half-way is not counted twice);
  // counter samples are latest values, so reading some of them again is harmless.
  last_ = h;
  auto flush = r.last_flush();
  if (!flush.ok()) return flush.status();
  if (*flush) dropped_ = (*flush)->dropped_total;

  // Processes that ended leave the state (their series go stale in Prometheus); a pid reused by a
  // live process stays.
  std::set<int64_t> live, ended;
  for (const ProcessRow& p : *processes) {
    (p.end_ns ? ended : live).insert(p.pid);
    if (auto it = procs_.find(p.pid); it != procs_.end() && p.ppid) it->second.ppid = *p.ppid;
  }
  for (int64_t pid : ended) {
    if (live.count(pid) != 0) continue;
    procs_.erase(pid);
    worker_loader_.erase(pid);
    worker_index_.erase(pid);
  }
  ++updates_;
  return Status::Ok();
}

int64_t MetricsState::pid_of_thread(int64_t thread_id) const {
  auto it = threads_.find(thread_id);
  return it == threads_.end() ? 0 : it->second.second;
}

// A DataLoader worker process: any process of the recording other than the training process
// (the reference loader's threads live in the training process and write its layout).
bool MetricsState::in_worker(int64_t thread_id) const {
  const int64_t pid = pid_of_thread(thread_id);
  return train_pid_ != 0 ? pid != train_pid_ : worker_loader_.count(pid) != 0;
}

MetricsState::Loader& MetricsState::loader(int64_t id) {
  auto it = loaders_.find(id);
  if (it == loaders_.end()) {
    if (loaders_.size() >= kMaxLoaders) {
      auto oldest = std::min_element(loaders_.begin(), loaders_.end(),
                                     [](const auto& a, const auto& b) { return a.second.touched < b.second.touched; });
      loaders_.erase(oldest);
    }
    it = loaders_.emplace(id, Loader{}).first;
  }
  it->second.touched = updates_;
  return it->second;
}

MetricsState::Bucket& MetricsState::bucket(Loader& l, int64_t ts_ns) {
  static thread_local Bucket discard;
  const int64_t second = ts_ns / kSecond;
  Bucket& b = l.buckets[static_cast<size_t>(second % static_cast<int64_t>(l.buckets.size()))];
  if (b.second == second) return b;
  if (b.second > second) {  // older than the ring holds
    discard = Bucket{};
    return discard;
  }
  b = Bucket{second, 0, 0, 0};
  return b;
}

void MetricsState::add_wait(Loader& l, int64_t start_ns, int64_t end_ns) {
  const int64_t ring = static_cast<int64_t>(l.buckets.size()) * kSecond;
  for (int64_t t = std::max(start_ns, end_ns - ring); t < end_ns;) {
    const int64_t next = std::min(end_ns, (t / kSecond + 1) * kSecond);
    bucket(l, t).wait_ns += next - t;
    t = next;
  }
}

void MetricsState::add_samples(Loader& l, int64_t ts_ns, int64_t samples) {
  Bucket& b = bucket(l, ts_ns);
  b.samples += samples;
  ++b.handed;
}

void MetricsState::on_instant(const InstantRow& i) {
  const vocab::Event e = names_.event(i.name_id);
  switch (e) {
    case vocab::Event::kDlConfig: {
      auto it = configs_.find(static_cast<uint32_t>(arg(i.arg1)));
      if (it == configs_.end()) break;
      if (auto doc = json::parse(it->second); doc.ok()) {
        if (auto bs = json::get_int(*doc, "batch_size"); bs && *bs > 0) loader(arg(i.arg0)).batch_size = *bs;
      }
      configs_.erase(it);
      break;
    }
    case vocab::Event::kDlEpochBegin: {
      Loader& l = loader(arg(i.arg0));
      l.epoch = arg(i.arg1);
      l.epoch_begin_ns = i.ts_ns;
      l.sent = l.put = l.handed_in_epoch = 0;
      if (arg(i.arg2) > 0) l.has_workers = true;
      if (l.first_ns < 0) l.first_ns = i.ts_ns;
      break;
    }
    case vocab::Event::kDlEpochEnd: {
      Loader& l = loader(arg(i.arg0));
      l.last_ns = std::max(l.last_ns, i.ts_ns);
      break;
    }
    case vocab::Event::kDlSent: {
      Loader& l = loader(arg(i.arg0));
      ++l.sent;
      l.has_workers = true;
      break;
    }
    case vocab::Event::kDlPut: {
      int64_t id = 0;
      if (in_worker(i.thread_id)) {
        auto it = worker_loader_.find(pid_of_thread(i.thread_id));
        if (it == worker_loader_.end()) break;
        id = it->second;
      } else {
        id = arg(i.arg0);
      }
      ++loader(id).put;
      break;
    }
    case vocab::Event::kDlWorkerStart:
      if (worker_loader_.size() >= kMaxProcesses) {
        worker_loader_.clear();
        worker_index_.clear();
      }
      worker_loader_[arg(i.arg2)] = arg(i.arg0);
      worker_index_[arg(i.arg2)] = arg(i.arg1);
      break;
    case vocab::Event::kDlStep:
      ++optimizer_steps_;
      if (arg(i.arg0, -1) >= 0) ++loader(*i.arg0).steps;
      break;
    default: break;
  }
}

void MetricsState::on_span(const SpanRow& s) {
  const vocab::Event e = names_.event(s.name_id);
  if (e == vocab::Event::kDlCollate) {
    int64_t id = 0, batch = 0, samples = 0;
    if (in_worker(s.thread_id)) {
      auto it = worker_loader_.find(pid_of_thread(s.thread_id));
      if (it == worker_loader_.end()) return;
      id = it->second;
      batch = arg(s.arg0);
      samples = arg(s.arg1);
    } else {
      id = arg(s.arg0);
      batch = arg(s.arg1);
      samples = arg(s.arg2);
    }
    if (samples <= 0) return;
    if (batch_samples_.size() >= kMaxPendingBatches) batch_samples_.clear();
    batch_samples_[{id, batch}] = samples;
    return;
  }
  if (e != vocab::Event::kDlNext || !s.dur_ns) return;
  const int64_t pid = pid_of_thread(s.thread_id);
  if (train_pid_ == 0) train_pid_ = pid;
  if (pid != train_pid_) return;
  const int64_t id = arg(s.arg0), batch = arg(s.arg1, -1), epoch = arg(s.arg2, -1);
  const int64_t end = s.start_ns + *s.dur_ns;
  Loader& l = loader(id);
  if (l.first_ns < 0) l.first_ns = s.start_ns;
  if (l.epoch_begin_ns >= 0 && s.start_ns >= l.epoch_begin_ns) {  // the epoch's __iter__: loader_start
    l.start_ns += s.start_ns - l.epoch_begin_ns;
    add_wait(l, l.epoch_begin_ns, s.start_ns);
  }
  l.epoch_begin_ns = -1;
  l.wait_ns += *s.dur_ns;
  add_wait(l, s.start_ns, end);
  l.last_ns = std::max(l.last_ns, end);
  if (batch < 0) return;  // StopIteration
  ++l.handed;
  if (epoch == l.epoch || l.epoch < 0) ++l.handed_in_epoch;
  int64_t samples = l.batch_size.value_or(0);
  if (auto it = batch_samples_.find({id, batch}); it != batch_samples_.end()) {
    samples = it->second;
    batch_samples_.erase(it);
  }
  l.samples += samples;
  add_samples(l, end, samples);
}

void MetricsState::on_counter(const CounterRow& c) {
  auto t = tracks_.find(c.track_id);
  if (t == tracks_.end()) return;
  const auto [counter, pid] = t->second;
  if (counter != vocab::Counter::kCpu && counter != vocab::Counter::kRunqWait &&
      counter != vocab::Counter::kPrivateDirty && counter != vocab::Counter::kSysCpu &&
      counter != vocab::Counter::kMinorFaults) {
    return;
  }
  auto it = procs_.find(pid);
  if (it == procs_.end()) {
    if (procs_.size() >= kMaxProcesses) return;
    it = procs_.emplace(pid, Proc{}).first;
    it->second.pid = pid;
  }
  Proc& p = it->second;
  if (counter == vocab::Counter::kCpu) {
    p.cpu = c.value;
  } else if (counter == vocab::Counter::kRunqWait) {
    p.runq = c.value;
  } else if (counter == vocab::Counter::kSysCpu) {
    p.sys = c.value;
  } else if (counter == vocab::Counter::kMinorFaults) {
    p.faults = c.value;
  } else {
    if (!p.private_first) p.private_first = c.value;
    p.private_last = c.value;
  }
}

void MetricsState::on_gpu(const GpuActivityRow& g) {
  if (g.kind != "kernel" && g.kind != "memcpy" && g.kind != "memset") return;
  const int64_t start = g.start_ns, end = g.start_ns + std::max<int64_t>(0, g.dur_ns);
  if (!gpu_seen_) {
    gpu_seen_ = true;
    gpu_first_ns_ = gpu_covered_until_ = start;
  }
  // Activities arrive about in time order: the union of their intervals, counted once.
  gpu_first_ns_ = std::min(gpu_first_ns_, start);
  if (end > gpu_covered_until_) {
    gpu_busy_ns_ += end - std::max(start, gpu_covered_until_);
    gpu_covered_until_ = end;
  }
}

const std::pair<const int64_t, MetricsState::Loader>* MetricsState::training_loader() const {
  // As the report finds it: the loader whose batches the optimizer steps trained on, else the one
  // that handed the most batches.
  const std::pair<const int64_t, Loader>* best = nullptr;
  for (const auto& entry : loaders_) {
    const Loader& l = entry.second;
    if (l.first_ns < 0 || l.last_ns < 0) continue;
    if (best == nullptr || l.steps > best->second.steps ||
        (l.steps == best->second.steps && l.handed > best->second.handed)) {
      best = &entry;
    }
  }
  return best;
}

Figures MetricsState::figures() const {
  Figures f;
  f.optimizer_steps = optimizer_steps_;
  f.dropped_events = dropped_;
  if (const auto* entry = training_loader()) {
    const Loader* l = &entry->second;
    f.training_seen = true;
    f.training_loader = entry->first;
    f.training_end_ns = l->last_ns;
    f.training_s = static_cast<double>(l->last_ns - l->first_ns) / 1e9;
    f.stall_by_cause_s[vocab::kCauseDataWait] = static_cast<double>(l->wait_ns) / 1e9;
    f.stall_by_cause_s[vocab::kCauseLoaderStart] = static_cast<double>(l->start_ns) / 1e9;
    f.stall_s = static_cast<double>(l->wait_ns + l->start_ns) / 1e9;
    f.stall_fraction = f.training_s > 0 ? std::min(1.0, f.stall_s / f.training_s) : 0.0;
    f.steps = l->handed;
    f.samples = l->samples;
    const int64_t now_second = l->last_ns / kSecond;
    const int64_t from_second = now_second - (kRecentSeconds - 1);
    const int64_t from_ns = std::max(from_second * kSecond, l->first_ns);
    if (l->last_ns > from_ns) {
      int64_t wait = 0, samples = 0, handed = 0;
      for (const Bucket& b : l->buckets) {
        if (b.second >= from_second && b.second <= now_second) {
          wait += b.wait_ns;
          samples += b.samples;
          handed += b.handed;
        }
      }
      const double span_s = static_cast<double>(l->last_ns - from_ns) / 1e9;
      f.recent_stall_fraction = std::min(1.0, static_cast<double>(wait) / 1e9 / span_s);
      f.samples_per_s = static_cast<double>(samples) / span_s;
      if (handed > 0) f.recent_step_ms = span_s * 1e3 / static_cast<double>(handed);
    }
    if (l->has_workers) {
      f.queue_seen = true;
      f.batches_in_flight = std::max<int64_t>(0, l->sent - l->put);
      f.batches_ready = std::max<int64_t>(0, l->put - l->handed_in_epoch);
    }
  }
  // Each live process into its place (see Figures::Process): role, then loader and worker index.
  std::map<std::tuple<int, int64_t, int64_t>, Figures::Process> places;
  auto add = [](std::optional<double>& to, const std::optional<double>& v) {
    if (v) to = to.value_or(0) + *v;
  };
  for (const auto& [pid, p] : procs_) {
    const bool worker = worker_loader_.count(pid) != 0 || (train_pid_ != 0 && p.ppid == train_pid_);
    const int role = pid == train_pid_ ? 0 : worker ? 1 : 2;
    std::optional<int64_t> loader, index;
    if (role == 1) {
      if (auto l = worker_loader_.find(pid); l != worker_loader_.end()) loader = l->second;
      if (auto w = worker_index_.find(pid); w != worker_index_.end()) index = w->second;
    }
    Figures::Process& out = places[{role, loader.value_or(-1), index.value_or(-1)}];
    out.pids = out.role.empty() ? 1 : out.pids + 1;
    out.role = role == 0 ? "train" : role == 1 ? "worker" : "other";
    out.loader = loader;
    out.worker = index;
    out.pid = std::max(out.pid, pid);
    add(out.cpu_cores, p.cpu);
    add(out.runq_wait_ratio, p.runq);
    add(out.sys_cpu_cores, p.sys);
    add(out.minor_faults_per_s, p.faults);
    if (p.private_first && p.private_last) {
      out.private_growth_bytes =
          out.private_growth_bytes.value_or(0) + static_cast<int64_t>(*p.private_last - *p.private_first);
    }
  }
  for (auto& [key, out] : places) f.processes.push_back(std::move(out));
  if (gpu_seen_ && gpu_covered_until_ > gpu_first_ns_) {
    f.gpu_busy_fraction = static_cast<double>(gpu_busy_ns_) / static_cast<double>(gpu_covered_until_ - gpu_first_ns_);
  }
  return f;
}

std::string MetricsState::render(const Figures& f, const Labels& labels, bool up) {
  Text t(labels);
  t.family("stallscope_up", "gauge", "1 when stallscope could read the recording at this scrape, else 0.");
  t.sample("stallscope_up", up ? 1 : 0);
  t.family("stallscope_build_info", "gauge", "Always 1; the version of stallscope in the label version.");
  t.sample("stallscope_build_info", 1, label("version", STALLSCOPE_VERSION));
  t.family("stallscope_training_seconds", "gauge",
           "Length of the training window so far: the training loader's first __iter__ to its latest event.");
  t.sample("stallscope_training_seconds", f.training_s);
  t.family("stallscope_stall_fraction", "gauge",
           "Share of the training window the loop waited for its data loader (data_wait + loader_start).");
  t.sample("stallscope_stall_fraction", f.stall_fraction);
  t.family("stallscope_stall_recent_fraction", "gauge", "The same over the latest 10 s of the training window.");
  if (f.recent_stall_fraction) t.sample("stallscope_stall_recent_fraction", *f.recent_stall_fraction);
  t.family("stallscope_stall_seconds_total", "counter", "Time the training loop stalled, by cause.");
  for (const char* cause : {vocab::kCauseDataWait, vocab::kCauseLoaderStart}) {
    auto it = f.stall_by_cause_s.find(cause);
    t.sample("stallscope_stall_seconds_total", it == f.stall_by_cause_s.end() ? 0.0 : it->second,
             label("cause", cause));
  }
  t.family("stallscope_stall_cause_fraction", "gauge", "Share of the training window stalled, by cause.");
  for (const char* cause : {vocab::kCauseDataWait, vocab::kCauseLoaderStart}) {
    auto it = f.stall_by_cause_s.find(cause);
    const double s = it == f.stall_by_cause_s.end() ? 0.0 : it->second;
    t.sample("stallscope_stall_cause_fraction", f.training_s > 0 ? std::min(1.0, s / f.training_s) : 0.0,
             label("cause", cause));
  }
  t.family("stallscope_steps_total", "counter", "Batches the training loader handed to the training loop.");
  t.sample("stallscope_steps_total", static_cast<double>(f.steps));
  t.family("stallscope_optimizer_steps_total", "counter", "Optimizer steps (torch.optim step hook).");
  t.sample("stallscope_optimizer_steps_total", static_cast<double>(f.optimizer_steps));
  t.family("stallscope_samples_total", "counter", "Samples in the batches handed to the training loop.");
  t.sample("stallscope_samples_total", static_cast<double>(f.samples));
  t.family("stallscope_samples_per_second", "gauge", "Samples handed per second over the latest 10 s of training.");
  if (f.samples_per_s) t.sample("stallscope_samples_per_second", *f.samples_per_s);
  t.family("stallscope_batches_ready", "gauge",
           "Batches put by the workers and not yet handed to the loop (the training loader's queue depth).");
  t.family("stallscope_batches_in_flight", "gauge", "Batches sent to the workers and not yet put.");
  if (f.queue_seen) {
    t.sample("stallscope_batches_ready", static_cast<double>(f.batches_ready));
    t.sample("stallscope_batches_in_flight", static_cast<double>(f.batches_in_flight));
  }
  // One gauge family per /proc figure, a sample per live process that has it.
  auto per_process = [&](const char* name, const char* help, auto value) {
    t.family(name, "gauge", help);
    for (const Figures::Process& p : f.processes) {
      if (const auto v = value(p)) {
        std::string place = label("role", p.role);
        if (p.role == "worker") {
          place += "," + label("loader", p.loader ? std::to_string(*p.loader) : "?") + "," +
                   label("worker", p.worker ? std::to_string(*p.worker) : "?");
        }
        t.sample(name, static_cast<double>(*v), place);
      }
    }
  };
  using P = Figures::Process;
  per_process("stallscope_process_cpu_cores", "CPU time per wall second of a process (/proc sampler).",
              [](const P& p) { return p.cpu_cores; });
  per_process("stallscope_process_runq_wait_ratio",
              "Time a process was runnable but waited for a CPU, per wall second (schedstat).",
              [](const P& p) { return p.runq_wait_ratio; });
  per_process("stallscope_process_sys_cpu_cores",
              "CPU time in the kernel per wall second of a process (/proc/PID/stat stime), part of the CPU cores.",
              [](const P& p) { return p.sys_cpu_cores; });
  per_process("stallscope_process_minor_faults_per_second",
              "Minor page faults per second of a process (/proc/PID/stat minflt): fresh pages mapped without I/O.",
              [](const P& p) { return p.minor_faults_per_s; });
  per_process("stallscope_process_private_growth_bytes",
              "Growth of a process's private dirty memory since its first sample (copy-on-write growth).",
              [](const P& p) { return p.private_growth_bytes; });
  t.family("stallscope_dropped_events_total", "counter", "Events the collector dropped because a buffer was full.");
  t.sample("stallscope_dropped_events_total", static_cast<double>(f.dropped_events));
  t.family("stallscope_gpu_busy_fraction", "gauge",
           "Share of the time since the first GPU activity that a kernel, copy or memset ran.");
  if (f.gpu_busy_fraction) t.sample("stallscope_gpu_busy_fraction", *f.gpu_busy_fraction);
  return t.take();
}

}  // namespace stallscope::metrics
