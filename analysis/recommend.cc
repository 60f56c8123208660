// Recommendations: rules over the Report's figures. Each rule cites the measured evidence and the
// expected gain; every threshold is named here and documented in docs/report.md.
#include <algorithm>
#include <cmath>
#include <map>

#include "analysis/format.h"
#include "analysis/loader_tuning.h"
#include "analysis/report.h"

namespace stallscope::analysis {
namespace {

// [SECTION] thresholds (docs/report.md, "Recommendations")
constexpr double kRunqHigh = 0.20;        // workers oversubscribed: runnable, not running
constexpr double kRunqVeryHigh = 0.40;    // ... badly
constexpr double kBusyHigh = 0.80;        // workers saturated: fetching this share of the time
constexpr double kStallHigh = 0.30;       // stall share that makes a speed recommendation "high"
constexpr double kWorkerHeadroom = 1.5;   // workers suggested = ceil(headroom x fetch / compute)
constexpr double kIoBoundCpu = 0.5;       // fetching uses less than half a core: it mostly waits
constexpr double kSteadyStallMin = 0.05;  // steady-state stall worth a deeper prefetch
constexpr double kSteadyStallMedium = 0.15;
constexpr double kBurstRatio = 2.5;   // fetch p99 / p50 that counts as bursty
constexpr double kRespawnMin = 0.03;  // respawn cost worth persistent workers (of window)
constexpr double kRespawnMedium = 0.05;
constexpr double kRespawnHigh = 0.15;
constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGrowthMin = 128 * kMiB;  // per worker private memory growth worth a mention
constexpr double kGrowthMediumOne = 512 * kMiB, kGrowthMediumAll = 2048 * kMiB;
constexpr double kGrowthHighOne = 1024 * kMiB, kGrowthHighAll = 4096 * kMiB;

std::string speedup(double x) { return fixed(x, 2) + "x"; }

// Ideal speed-up if a share `f` of the window vanished: 1 / (1 - f).
double ideal_speedup(double f) { return f >= 0.999 ? 1000.0 : 1.0 / (1.0 - f); }

// [SECTION] where the evidence is on the timeline
// The training window, a little wider.
EvidenceAt window_evidence(const Report& r, std::string what) {
  return evidence_around(r.window_start_ns, r.window_end_ns, 0.02, std::move(what));
}
// The longest stall (else the window): what a speed rule points at unless it knows better.
EvidenceAt stall_evidence(const Report& r) {
  return r.longest_stall ? *r.longest_stall : window_evidence(r, "the training window");
}

std::string stall_severity(double s) { return s >= kStallHigh ? vocab::kSeverityHigh : vocab::kSeverityMedium; }

struct Inputs {
  Inputs(const Report& report, const LoaderStats& loader) : r(report), l(loader) {}
  const Report& r;
  const LoaderStats& l;
  int64_t n = 0;                         // num_workers
  double s = 0;                          // stall fraction
  double c_ms = 0;                       // compute per step
  std::optional<double> f_ms, f50, f99;  // fetch mean / p50 / p99
  std::optional<double> busy;            // workers busy fraction
  std::optional<double> runq;            // mean run-queue delay of the loader's workers
  std::optional<double> cpu_per_worker;  // mean cores per worker
  std::optional<double> empty;           // queue empty fraction
  // CPU used while fetching, in cores (workers: their CPU time over their fetch time; main
  // process with num_workers=0: its CPU over the window); io_bound when known and < 0.5.
  std::optional<double> fetch_cpu;
  bool io_bound = false;
  bool oversubscribed = false, saturated = false, cpu_full = false;
  std::string cpu_full_why;
  double steady_stall = 0;  // stall outside each epoch's first next()
};

// The ready queue is empty ..., the loop waits ...: a sentence on the stall and its ideal gain.
std::string gain_sentence(const Inputs& in) {
  return "The loop waits for data " + percent(in.s) +
         " of the window; if that wait vanished the ideal speed-up is 1/(1-" + fixed(in.s, 2) +
         ") = " + speedup(ideal_speedup(in.s)) +
         (in.r.samples_per_s ? " (" + fixed(*in.r.samples_per_s, 1) + " -> " +
                                   fixed(*in.r.samples_per_s * ideal_speedup(in.s), 1) + " samples/s)"
                             : std::string()) +
         ".";
}

Json base_evidence(const Inputs& in) {
  Json e = Json::object();
  e["stall_fraction"] = in.s;
  e["num_workers"] = in.n;
  e["compute_per_step_ms"] = in.c_ms;
  e["fetch_mean_ms"] = in.f_ms;
  e["fetch_p50_ms"] = in.f50;
  e["fetch_p99_ms"] = in.f99;
  return e;
}

// How many workers to suggest, and what capped the number ("" when nothing did).
struct WorkerSuggestion {
  int64_t k = 0;
  std::string cap;
};

WorkerSuggestion suggested_workers(const Inputs& in) {
  const int64_t lo = in.n == 0 ? 2 : in.n + 1;
  const bool cpu_cap = in.r.cpu_count && !in.io_bound;
  // With fetching on the CPU, the cap of a tuned loader (loader_tuning.h): what `--loader tuned`
  // runs is what this rule advises.
  const int64_t hi = cpu_cap ? std::max<int64_t>(lo, worker_cap(*in.r.cpu_count))
                             : std::max<int64_t>(lo, 2 * std::max<int64_t>(in.n, 2));
  int64_t want = hi;
  if (in.f_ms && in.c_ms > 0) want = static_cast<int64_t>(std::ceil(kWorkerHeadroom * *in.f_ms / in.c_ms));
  WorkerSuggestion w;
  w.k = std::clamp(want, lo, hi);
  if (want > hi) {
    w.cap = cpu_cap ? "capped at " + std::to_string(*in.r.cpu_count) + " CPUs - 1 = " + std::to_string(hi) +
                          ", as fetching needs a CPU"
                    : "capped at " + std::to_string(hi) + " for this try: measure again before going further";
  }
  return w;
}

void increase_num_workers(const Inputs& in, std::vector<Recommendation>* out) {
  if (!(in.n == 0 || (in.saturated && !in.cpu_full))) return;
  if (in.n == 0 && in.r.cpu_count && *in.r.cpu_count <= 1 && !in.io_bound) return;
  const WorkerSuggestion ws = suggested_workers(in);
  const int64_t k = ws.k;
  Recommendation rec;
  rec.id = vocab::kRecIncreaseNumWorkers;
  rec.action = "set num_workers=" + std::to_string(k) + " (ideal speed-up " + speedup(ideal_speedup(in.s)) + ")";
  rec.severity = stall_severity(in.s);
  rec.expected_speedup = ideal_speedup(in.s);
  std::string why;
  if (in.n == 0) {
    why = "With num_workers=0 every batch is loaded inside next() (" + or_dash(in.f50, duration_ms) +
          " per batch, p50), so loading and training never overlap.";
  } else {
    why = "The " + std::to_string(in.n) + " workers are fetching " + percent(*in.busy) +
          " of the time, so they cannot keep the queue full, and the CPUs have room (" +
          (in.runq ? "run-queue delay " + percent(*in.runq) : std::string("no run-queue pressure recorded")) + ").";
  }
  rec.message =
      gain_sentence(in) + " " + why + " The loop computes " + duration_ms(in.c_ms) + " per step and one batch takes " +
      or_dash(in.f_ms, duration_ms) + " to fetch (mean), so " + fixed(kWorkerHeadroom, 1) +
      " x fetch/compute workers (rounded up; 1.5 leaves headroom for slow batches) keep it fed" +
      (in.io_bound ? ", and fetching mostly waits rather than computes, so workers can outnumber the CPUs" : "") +
      ": set num_workers=" + std::to_string(k) + (ws.cap.empty() ? "" : " (" + ws.cap + ")") + ".";
  rec.evidence = base_evidence(in);
  rec.evidence["workers_busy_fraction"] = in.busy;
  rec.evidence["runq_delay_fraction"] = in.runq;
  rec.evidence["fetch_cpu_cores"] = in.fetch_cpu;
  rec.evidence["cpu_count"] = in.r.cpu_count;
  rec.evidence["suggested_num_workers"] = k;
  rec.evidence["ideal_speedup"] = rec.expected_speedup;
  out->push_back(std::move(rec));
}

void reduce_num_workers(const Inputs& in, std::vector<Recommendation>* out) {
  if (!in.oversubscribed || in.n < 2) return;
  // One worker per CPU, leaving one to the training process when it uses one; without a CPU count,
  // the cores the workers actually got between them.
  int64_t k = in.n / 2;
  if (in.r.cpu_count) {
    k = *in.r.cpu_count - (in.r.train_cpu_util && *in.r.train_cpu_util >= 0.5 ? 1 : 0);
  } else if (in.cpu_per_worker) {
    k = std::llround(*in.cpu_per_worker * static_cast<double>(in.n));
  }
  k = std::clamp<int64_t>(k, 1, in.n - 1);
  Recommendation rec;
  rec.id = vocab::kRecReduceNumWorkers;
  // Evidence: the worker that waited for a CPU the most, with its run-queue strip.
  const WorkerStats* most = nullptr;
  for (const WorkerStats& w : in.r.workers) {
    if (w.runq_delay_fraction && (!most || *w.runq_delay_fraction > *most->runq_delay_fraction)) most = &w;
  }
  if (most) {
    rec.where =
        window_evidence(in.r, "worker " + std::to_string(most->worker_id) + " (pid " + std::to_string(most->pid) +
                                  ") waited for a CPU " + percent(*most->runq_delay_fraction, 0) + " of its life");
    rec.where.pid = most->pid;
    rec.where.counter = vocab::Counter::kRunqWait;
  }
  rec.action =
      "set num_workers=" + std::to_string(k) + " (workers wait for a CPU " + percent(*in.runq) + " of the time)";
  rec.severity = *in.runq >= kRunqVeryHigh ? vocab::kSeverityHigh : vocab::kSeverityMedium;
  rec.expected_speedup = ideal_speedup(in.s);
  rec.message =
      "Workers are oversubscribed: runnable but waiting for a CPU " + percent(*in.runq) +
      " of the time (run-queue delay), and the " + std::to_string(in.n) + " workers get " +
      (in.cpu_per_worker ? fixed(*in.cpu_per_worker * static_cast<double>(in.n), 1) + " cores between them"
                         : std::string("less than a core each")) +
      ". Set num_workers=" + std::to_string(k) +
      (in.r.cpu_count
           ? " (one per CPU of " + std::to_string(*in.r.cpu_count) +
                 (in.r.train_cpu_util && *in.r.train_cpu_util >= 0.5 ? ", one left to the training process)" : ")")
           : std::string(" (the cores they actually get)")) +
      ": fewer context switches, less memory, and the training process gets its CPU back. " + gain_sentence(in);
  rec.evidence = base_evidence(in);
  rec.evidence["runq_delay_fraction"] = in.runq;
  rec.evidence["cpu_util_per_worker"] = in.cpu_per_worker;
  rec.evidence["cpu_count"] = in.r.cpu_count;
  rec.evidence["suggested_num_workers"] = k;
  rec.evidence["ideal_speedup"] = rec.expected_speedup;
  out->push_back(std::move(rec));
}

void slow_dataset_getitem(const Inputs& in, std::vector<Recommendation>* out) {
  if (!in.saturated || !in.cpu_full) return;
  Recommendation rec;
  rec.id = vocab::kRecSlowDatasetGetitem;
  rec.action = "make Dataset.__getitem__ cheaper (fetch p50 " + or_dash(in.f50, duration_ms) + " per batch)";
  rec.severity = stall_severity(in.s);
  rec.expected_speedup = ideal_speedup(in.s);
  const std::optional<int64_t> bs = in.l.config.batch_size;
  std::optional<double> needed;
  if (in.f_ms && in.c_ms > 0) needed = *in.f_ms / (static_cast<double>(in.n) * in.c_ms);
  rec.message = "Fetching dominates: the " + std::to_string(in.n) + " workers are busy " + percent(*in.busy) +
                " of the time and the CPUs are saturated (" + in.cpu_full_why +
                "), so more workers cannot help. One batch takes " + or_dash(in.f50, duration_ms) + " (p50" +
                (bs && *bs > 0 && in.f50 ? ", " + duration_ms(*in.f50 / static_cast<double>(*bs)) + " per sample"
                                         : std::string()) +
                "); " + std::to_string(in.n) + " workers deliver one every " +
                (in.f_ms ? duration_ms(*in.f_ms / static_cast<double>(in.n)) : std::string("-")) +
                " while the loop needs one every " + duration_ms(in.c_ms) + ". Make __getitem__ cheaper" +
                (needed && *needed > 1 ? " (about " + speedup(*needed) + ")" : std::string()) +
                ": decode or augment less on the CPU, cache preprocessed samples, move augmentation to the GPU, fetch "
                "whole batches with __getitems__. " +
                gain_sentence(in);
  rec.evidence = base_evidence(in);
  rec.evidence["workers_busy_fraction"] = in.busy;
  rec.evidence["runq_delay_fraction"] = in.runq;
  rec.evidence["cpu_count"] = in.r.cpu_count;
  rec.evidence["fetch_speedup_needed"] = needed;
  rec.evidence["ideal_speedup"] = rec.expected_speedup;
  out->push_back(std::move(rec));
}

void increase_prefetch_factor(const Inputs& in, std::vector<Recommendation>* out) {
  if (in.n < 1 || in.saturated || in.oversubscribed || !in.busy || !in.f50 || !in.f99 || *in.f50 <= 0) return;
  const double steady = in.steady_stall;
  const double burst = *in.f99 / *in.f50;
  const int64_t pf = in.l.config.prefetch_factor.value_or(2);
  // The prefetch covers pf x N batches, i.e. pf x N steps of the loop: a batch is sent that long
  // before it is needed. A slow batch that takes longer than that drains the queue.
  const double lead_ms = static_cast<double>(pf * in.n) * in.c_ms;
  if (steady < kSteadyStallMin || burst < kBurstRatio || *in.f99 <= lead_ms) return;
  // Deep enough that a batch is sent one slow fetch (p99) before the loop needs it.
  int64_t k = 2 * pf;
  if (in.c_ms > 0)
    k = std::max<int64_t>(k, static_cast<int64_t>(std::ceil(*in.f99 / (static_cast<double>(in.n) * in.c_ms))));
  Recommendation rec;
  rec.id = vocab::kRecIncreasePrefetchFactor;
  rec.action = "set prefetch_factor=" + std::to_string(k);
  rec.severity = steady >= kSteadyStallMedium ? vocab::kSeverityMedium : vocab::kSeverityLow;
  rec.expected_speedup = ideal_speedup(steady);
  rec.message = "Workers keep up on average (busy " + percent(*in.busy) + " of the time) yet the loop still waits " +
                percent(steady) + " of the window outside epoch starts and ends: fetch times are bursty (p99 " +
                duration_ms(*in.f99) + " vs p50 " + duration_ms(*in.f50) +
                "), and a slow batch takes longer than the " + std::to_string(pf * in.n) +
                " prefetched batches last (" + std::to_string(pf * in.n) + " steps x " + duration_ms(in.c_ms) + " = " +
                duration_ms(lead_ms) + "), so the loop catches up with it and waits" +
                (in.empty && *in.empty >= 0.25 ? " (the ready queue is empty " + percent(*in.empty) + " of the time)"
                                               : std::string()) +
                ". Raise prefetch_factor from " + std::to_string(pf) + " to " + std::to_string(k) + " (" +
                std::to_string(k * in.n) + " batches buffered, at the cost of their memory)" +
                (in.l.config.in_order.value_or(false) ? "; in_order=False also lets ready batches pass a slow one"
                                                      : std::string()) +
                ". Expected: up to 1/(1-" + fixed(steady, 2) + ") = " + speedup(rec.expected_speedup) +
                " if the steady-state wait vanishes.";
  rec.evidence = base_evidence(in);
  rec.evidence["steady_stall_fraction"] = steady;
  rec.evidence["workers_busy_fraction"] = in.busy;
  rec.evidence["queue_empty_fraction"] = in.empty;
  rec.evidence["fetch_p99_over_p50"] = burst;
  rec.evidence["prefetch_lead_ms"] = lead_ms;
  rec.evidence["prefetch_factor"] = pf;
  rec.evidence["suggested_prefetch_factor"] = k;
  rec.evidence["ideal_speedup"] = rec.expected_speedup;
  out->push_back(std::move(rec));
}

void enable_persistent_workers(const Inputs& in, std::vector<Recommendation>* out) {
  if (in.n < 1 || in.l.config.persistent_workers.value_or(false) || in.l.respawned_epochs < 1 || in.r.wall_s <= 0)
    return;
  const double saved = in.l.respawn_excess_s;
  const double frac = saved / in.r.wall_s;
  if (frac < kRespawnMin) return;
  double later_starts = 0;
  for (size_t i = 1; i < in.l.epoch_start_s.size(); ++i) later_starts += in.l.epoch_start_s[i];
  const double avg =
      in.l.epoch_start_s.size() > 1 ? later_starts / static_cast<double>(in.l.epoch_start_s.size() - 1) : 0;
  Recommendation rec;
  rec.id = vocab::kRecEnablePersistentWorkers;
  // Evidence: the slowest start of an epoch after the first (new workers started there).
  const LoaderStats::EpochStart* slowest = nullptr;
  for (const LoaderStats::EpochStart& e : in.l.epoch_starts) {
    if (e.epoch == 0) continue;
    if (!slowest || e.first_batch_ns - e.begin_ns > slowest->first_batch_ns - slowest->begin_ns) slowest = &e;
  }
  if (slowest) {
    rec.where =
        evidence_around(slowest->begin_ns, slowest->first_batch_ns, 0.3,
                        "epoch " + std::to_string(slowest->epoch) + " took " +
                            duration_ms(static_cast<double>(slowest->first_batch_ns - slowest->begin_ns) / 1e6) +
                            " to hand its first batch (new workers started)");
  }
  rec.action = "set persistent_workers=True (saves " + fixed(saved, 2) + " s)";
  rec.severity = frac >= kRespawnHigh     ? vocab::kSeverityHigh
                 : frac >= kRespawnMedium ? vocab::kSeverityMedium
                                          : vocab::kSeverityLow;
  rec.expected_speedup = in.r.wall_s / (in.r.wall_s - std::min(saved, in.r.wall_s * 0.999));
  rec.message =
      "Workers are re-created at every epoch (persistent_workers=False" +
      (in.l.config.start_method ? ", start method " + *in.l.config.start_method : std::string()) +
      "): epochs after the first waited " + duration_ms(avg * 1e3) +
      " on average from epoch start to their first batch, against " + or_dash(in.f50, duration_ms) +
      " to fetch a batch once workers run" +
      (in.l.shutdown_s > 0 ? ", and shutting them down made epoch ends wait " + fixed(in.l.shutdown_s, 2) + " s"
                           : std::string()) +
      "; re-creating them " + std::to_string(in.l.respawned_epochs) +
      (in.l.respawned_epochs == 1 ? " time" : " times") + " cost " + fixed(saved, 2) + " s (" + percent(frac) +
      " of the window). Set persistent_workers=True. Expected speed-up T/(T-saved) = " + speedup(rec.expected_speedup) +
      ".";
  rec.evidence = base_evidence(in);
  rec.evidence["respawned_epochs"] = in.l.respawned_epochs;
  rec.evidence["mean_epoch_start_s"] = avg;
  rec.evidence["respawn_cost_s"] = saved;
  rec.evidence["shutdown_s"] = in.l.shutdown_s;
  rec.evidence["respawn_fraction"] = frac;
  rec.evidence["wall_s"] = in.r.wall_s;
  rec.evidence["ideal_speedup"] = rec.expected_speedup;
  out->push_back(std::move(rec));
}

void enable_pin_memory(const Inputs& in, std::vector<Recommendation>* out) {
  // Pinned memory only matters for host-to-device copies: GPU mode only (transfer stalls
  // measured there); a CPU-mode report never suggests it.
  if (in.r.mode != vocab::kModeGpu || in.l.config.pin_memory.value_or(false)) return;
  const double h2d = in.r.wall_s > 0 ? [&] {
    auto it = in.r.stall.by_cause_s.find(kCauseH2d);
    return it == in.r.stall.by_cause_s.end() ? 0.0 : it->second / in.r.wall_s;
  }()
                                     : 0.0;
  if (h2d < kSteadyStallMin) return;
  Recommendation rec;
  rec.id = vocab::kRecEnablePinMemory;
  rec.action = "set pin_memory=True";
  rec.severity = h2d >= kStallHigh ? vocab::kSeverityHigh : vocab::kSeverityMedium;
  rec.expected_speedup = ideal_speedup(h2d);
  rec.message =
      "Host-to-device copies stall the GPU " + percent(h2d) +
      " of the window from pageable memory. Set pin_memory=True and copy with .to(device, non_blocking=True). "
      "Expected: up to " +
      speedup(rec.expected_speedup) + ".";
  rec.evidence = base_evidence(in);
  rec.evidence["h2d_stall_fraction"] = h2d;
  out->push_back(std::move(rec));
}

void worker_memory_growth(const Report& r, std::vector<Recommendation>* out) {
  double max_one = 0;
  int64_t max_pid = 0;
  std::map<std::pair<int64_t, int64_t>, std::pair<double, int>> by_generation;  // (loader, start epoch)
  for (const WorkerStats& w : r.workers) {
    if (!w.private_growth_bytes) continue;
    const double g = static_cast<double>(*w.private_growth_bytes);
    if (g > max_one) {
      max_one = g;
      max_pid = w.pid;
    }
    auto& gen = by_generation[{w.loader, w.start_epoch}];
    gen.first += std::max(0.0, g);
    ++gen.second;
  }
  if (max_one < kGrowthMin) return;
  double peak = 0;
  int peak_workers = 0;
  for (const auto& [key, g] : by_generation) {
    if (g.first > peak) {
      peak = g.first;
      peak_workers = g.second;
    }
  }
  const LoaderStats* l = r.loader();
  const std::optional<std::string> method = l ? l->config.start_method : std::nullopt;
  Recommendation rec;
  rec.id = vocab::kRecWorkerMemoryGrowth;
  rec.speed = false;
  rec.where = window_evidence(r, "memory of worker pid " + std::to_string(max_pid) + " over the run");
  rec.where.pid = max_pid;
  rec.where.counter = vocab::Counter::kRss;
  rec.action = "workers' private memory grew by up to " + bytes(max_one) + " each";
  rec.severity = max_one >= kGrowthHighOne || peak >= kGrowthHighAll       ? vocab::kSeverityHigh
                 : max_one >= kGrowthMediumOne || peak >= kGrowthMediumAll ? vocab::kSeverityMedium
                                                                           : vocab::kSeverityLow;
  // Copy-on-write needs pages shared with the parent: only forked workers have them. A spawned or
  // forkserver worker starts from a fresh interpreter; its baseline (imports) is not growth.
  const bool forked = !method || *method == "fork";
  int64_t baseline = 0;
  for (const WorkerStats& w : r.workers) {
    if (w.pid == max_pid && w.private_first_bytes) baseline = *w.private_first_bytes;
  }
  const std::string why =
      forked ? ": copy-on-write, as reading the dataset's Python objects (lists, dicts) touches their reference counts "
               "and turns pages shared with the parent into private copies. Keep per-sample metadata in numpy arrays, "
               "torch tensors or Arrow instead of Python lists and dicts, or open data lazily inside each worker."
             : " while fetching. Not copy-on-write: " + *method +
                   " workers share no pages with the training process; each started with " +
                   bytes(static_cast<double>(baseline)) +
                   " of its own (importing torch and the script's modules, and the unpickled dataset), which is not "
                   "counted here. What grows is allocated in the worker: caches, buffers, Python objects kept per "
                   "sample; bound or drop them.";
  rec.message = "Worker private memory grew by up to " + bytes(max_one) + " per worker (pid " +
                std::to_string(max_pid) + "), " + bytes(peak) + " across the " + std::to_string(peak_workers) +
                " workers running together" + (method ? " (start method " + *method + ")" : std::string()) + why +
                " Expected: about " + bytes(peak) +
                " less memory, and room to add workers without running out of memory.";
  rec.evidence = Json::object();
  rec.evidence["max_private_growth_bytes"] = static_cast<int64_t>(max_one);
  rec.evidence["max_growth_pid"] = max_pid;
  rec.evidence["concurrent_private_growth_bytes"] = static_cast<int64_t>(peak);
  rec.evidence["concurrent_workers"] = peak_workers;
  rec.evidence["start_method"] = method;
  out->push_back(std::move(rec));
}

// [SECTION] GPU mode (docs/report.md, "GPU mode")
constexpr double kGpuCauseMin = 0.05;     // share of the window a GPU stall cause must reach
constexpr double kGpuBusyLow = 0.50;      // GPU idle at least half the time
constexpr double kWorkerCpuBound = 0.70;  // cores a worker uses while it fetches: CPU-bound

Json gpu_evidence(const Report& r) {
  Json e = Json::object();
  e["gpu_busy_fraction"] = r.gpu.busy_fraction;
  e["gpu_stall_fraction"] = r.stall.fraction;
  for (const auto& [cause, s] : r.stall.by_cause_s) e[cause + "_fraction"] = r.wall_s > 0 ? s / r.wall_s : 0.0;
  return e;
}

void pageable_h2d(const Report& r, std::vector<Recommendation>* out) {
  const CopyStats& pg = r.gpu.h2d_pageable;
  const double h2d = r.cause_fraction(kCauseH2d);
  const double copy_share = r.wall_s > 0 ? pg.seconds / r.wall_s : 0;
  if (pg.count == 0 || (h2d < kGpuCauseMin && copy_share < kGpuCauseMin)) return;
  Recommendation rec;
  rec.id = vocab::kRecPageableH2d;
  rec.action = "pin host memory: pin_memory=True and .to(device, non_blocking=True)";
  rec.severity = h2d >= kStallHigh ? vocab::kSeverityHigh : vocab::kSeverityMedium;
  rec.expected_speedup = ideal_speedup(h2d);
  std::string rate = pg.gbps ? " at " + fixed(*pg.gbps, 2) + " GB/s" : "";
  if (r.gpu.h2d_pinned.gbps) rate += " (pinned copies in this run: " + fixed(*r.gpu.h2d_pinned.gbps, 2) + " GB/s)";
  rec.message = "Host-to-device copies come from pageable memory: " + bytes(static_cast<double>(pg.bytes)) + " in " +
                std::to_string(pg.count) + " copies" + rate +
                ". A pageable copy is staged through a driver buffer "
                "while the host waits, and it cannot overlap compute; the GPU sat idle in transfers " +
                percent(h2d) +
                " of the window. Pin the batches (DataLoader pin_memory=True, or tensor.pin_memory()) and copy with "
                ".to(device, non_blocking=True). Expected: up to " +
                speedup(rec.expected_speedup) + ".";
  rec.evidence = gpu_evidence(r);
  rec.evidence["pageable_h2d_bytes"] = pg.bytes;
  rec.evidence["pageable_h2d_copies"] = pg.count;
  rec.evidence["pageable_h2d_gbps"] = pg.gbps;
  rec.evidence["pinned_h2d_gbps"] = r.gpu.h2d_pinned.gbps;
  out->push_back(std::move(rec));
}

void host_sync(const Report& r, std::vector<Recommendation>* out) {
  const double sync = r.cause_fraction(kCauseSync);
  if (sync < kGpuCauseMin) return;
  Recommendation rec;
  rec.id = vocab::kRecHostSync;
  rec.action = "remove per-step synchronisations (.item(), .cpu(), torch.cuda.synchronize())";
  rec.severity = sync >= kStallHigh ? vocab::kSeverityHigh : vocab::kSeverityMedium;
  rec.expected_speedup = ideal_speedup(sync);
  rec.message =
      "The training loop blocks on the GPU (stream/device synchronisation or a copy back to the host) "
      "and the GPU then runs dry: " +
      percent(sync) +
      " of the window. Typical causes are loss.item() or "
      "tensor.cpu() every step, and explicit torch.cuda.synchronize(); accumulate on the GPU and read values "
      "every N steps. Expected: up to " +
      speedup(rec.expected_speedup) + ".";
  rec.evidence = gpu_evidence(r);
  out->push_back(std::move(rec));
}

void move_transforms_to_gpu(const Report& r, std::vector<Recommendation>* out) {
  const LoaderStats* l = r.loader();
  const double data = r.data_wait_fraction();
  if (l == nullptr || data < kDataBoundFraction || r.gpu.busy_fraction >= kGpuBusyLow) return;
  // The workers' fetch must be CPU work (transforms), not waiting on storage.
  double cpu_time = 0, busy_time = 0;
  for (const WorkerStats& w : r.workers) {
    if (w.loader != l->id || !w.cpu_util) continue;
    cpu_time += *w.cpu_util * w.life_s;
    busy_time += w.busy_s;
  }
  if (busy_time <= 0 || cpu_time / busy_time < kWorkerCpuBound) return;
  const double fetch_cpu = cpu_time / busy_time;
  Recommendation rec;
  rec.id = vocab::kRecMoveTransformsToGpu;
  rec.action = "run decoding/augmentation on the GPU (torchvision.transforms.v2 on CUDA tensors, DALI)";
  rec.severity = data >= kStallHigh ? vocab::kSeverityHigh : vocab::kSeverityMedium;
  rec.expected_speedup = ideal_speedup(data);
  rec.message = "The GPU is busy only " + percent(r.gpu.busy_fraction) + " of the window and waits for data " +
                percent(data) + " of it, while the workers spend their fetch time computing (" + fixed(fetch_cpu, 2) +
                " cores per fetching worker): CPU transforms in __getitem__ are the bottleneck. Move the heavy "
                "transforms to the GPU after the copy, on whole batches. Expected: up to " +
                speedup(rec.expected_speedup) + ".";
  rec.evidence = gpu_evidence(r);
  rec.evidence["worker_fetch_cpu_cores"] = fetch_cpu;
  out->push_back(std::move(rec));
}

}  // namespace

std::vector<Recommendation> recommend(const Report& r) {
  std::vector<Recommendation> out;
  const LoaderStats* l = r.loader();
  if (l != nullptr && r.data_bound && r.steps > 0) {
    Inputs in(r, *l);
    in.n = l->num_workers.value_or(0);
    in.s = r.data_wait_fraction();  // GPU mode: only the idle time spent waiting for data
    in.c_ms = r.compute_per_step_ms;
    in.f_ms = l->fetch_mean_ms;
    in.f50 = l->fetch_p50_ms;
    in.f99 = l->fetch_p99_ms;
    in.busy = l->workers_busy_fraction;
    in.empty = r.queue.empty_fraction;
    double runq_sum = 0, cpu_sum = 0, cpu_time = 0, busy_time = 0;
    int runq_n = 0, cpu_n = 0;
    for (const WorkerStats& w : r.workers) {
      if (w.loader != l->id) continue;
      if (w.runq_delay_fraction) {
        runq_sum += *w.runq_delay_fraction;
        ++runq_n;
      }
      if (w.cpu_util) {
        cpu_sum += *w.cpu_util;
        ++cpu_n;
        cpu_time += *w.cpu_util * w.life_s;
        busy_time += w.busy_s;
      }
    }
    if (runq_n > 0) in.runq = runq_sum / runq_n;
    if (cpu_n > 0) in.cpu_per_worker = cpu_sum / cpu_n;
    if (in.n > 0 && busy_time > 0) {
      in.fetch_cpu = cpu_time / busy_time;
      in.io_bound = *in.fetch_cpu < kIoBoundCpu;
    } else if (in.n == 0 && r.train_cpu_util) {
      // The process both fetches and computes; when it waits for data most of the window and
      // still uses little CPU, the fetch is waiting (I/O, sleep), not computing.
      in.fetch_cpu = r.train_cpu_util;
      in.io_bound = *r.train_cpu_util < kIoBoundCpu && in.s >= 0.5;
    }
    in.oversubscribed = in.n > 0 && in.runq && *in.runq >= kRunqHigh;
    in.saturated = in.n > 0 && in.busy && *in.busy >= kBusyHigh;
    if (in.oversubscribed) {
      in.cpu_full = true;
      in.cpu_full_why = "run-queue delay " + percent(*in.runq);
    } else if (r.cpu_count && in.n + 1 >= *r.cpu_count && !in.io_bound) {
      in.cpu_full = true;
      in.cpu_full_why =
          std::to_string(in.n) + " workers + the training process on " + std::to_string(*r.cpu_count) + " CPUs";
    }
    in.steady_stall = r.wall_s > 0 ? std::max(0.0, l->wait_s - l->edge_wait_s) / r.wall_s : 0;

    reduce_num_workers(in, &out);
    increase_num_workers(in, &out);
    slow_dataset_getitem(in, &out);
    increase_prefetch_factor(in, &out);
    enable_persistent_workers(in, &out);
    enable_pin_memory(in, &out);
  }
  if (r.mode == vocab::kModeGpu) {
    pageable_h2d(r, &out);
    host_sync(r, &out);
    move_transforms_to_gpu(r, &out);
  }
  worker_memory_growth(r, &out);
  for (Recommendation& rec : out) {
    if (rec.where.what.empty()) rec.where = stall_evidence(r);
  }
  std::stable_sort(out.begin(), out.end(), [](const Recommendation& a, const Recommendation& b) {
    if (vocab::severity_rank(a.severity) != vocab::severity_rank(b.severity)) {
      return vocab::severity_rank(a.severity) < vocab::severity_rank(b.severity);
    }
    return a.expected_speedup > b.expected_speedup;
  });
  return out;
}

}  // namespace stallscope::analysis
