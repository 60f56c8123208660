// Recommendations: the speed advice comes from the what-if model (whatif.h): the setting it
// predicts fastest, when the gain clears the model's own error; the other rules (GPU transfers and
// syncs, worker memory) read the Report's figures. Each cites the measured evidence and the
// expected gain; every threshold is named here and documented in docs/report.md.
#include <algorithm>
#include <cmath>
#include <map>

#include "analysis/format.h"
#include "analysis/report.h"
#include "analysis/stats.h"
#include "common/units.h"

namespace stallscope::analysis {
namespace {

// [SECTION] thresholds (docs/report.md, "Recommendations")
constexpr double kStallHigh = 0.30;       // GPU stall share that makes a recommendation "high"
constexpr double kSteadyStallMin = 0.05;  // host-to-device stall worth pinned memory
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

// [SECTION] speed advice from the what-if model (whatif.h)
constexpr double kGainHigh = 1.3;     // predicted gain that makes a recommendation "high"
constexpr double kGainMedium = 1.1;   // ... "medium"
constexpr double kNoticeable = 1.01;  // a gain worth printing beside an argument
constexpr double kTieMargin = 0.02;   // predictions this close count as the same speed (whatif_candidate.cc)
constexpr double kRunqHigh = 0.20;    // workers runnable but not running this share of the time

std::string gain_severity(double g) {
  return g >= kGainHigh ? vocab::kSeverityHigh : (g >= kGainMedium ? vocab::kSeverityMedium : vocab::kSeverityLow);
}

// "129.3 -> 250.1 samples/s (1.93x), stall 66% -> 8%"
std::string prediction(const WhatIfCandidate& from, const WhatIfCandidate& to) {
  return fixed(from.samples_per_s, 1) + " -> " + fixed(to.samples_per_s, 1) + " samples/s (" +
         speedup(to.samples_per_s / from.samples_per_s) + "), stall " + percent(from.stall, 0) + " -> " +
         percent(to.stall, 0);
}

Json model_evidence(const Report& r, const WhatIf& w) {
  Json e = Json::object();
  const WhatIfInputs& in = w.inputs;
  e["stall_fraction"] = r.data_wait_fraction();
  e["num_workers"] = w.recorded.num_workers;
  e["usable_cores"] = in.usable_cores;
  e["torch_threads"] = in.torch_threads;
  e["compute_ms"] = in.compute_ms;
  e["compute_cpu_ms"] = in.compute_cpu_ms;
  e["fetch_ms"] = in.fetch_ms;
  e["fetch_cpu_ms"] = in.fetch_cpu_ms;
  e["others_cpu_ms"] = in.others_cpu_ms;
  e["predicted_samples_per_s"] = w.best ? w.candidates[*w.best].samples_per_s : 0.0;
  e["recorded_predicted_samples_per_s"] = w.predicted_recorded_samples_per_s;
  e["measured_samples_per_s"] = w.measured_samples_per_s;
  e["model_fit_error"] = w.fit_error;
  e["confidence"] = w.confidence;
  e["ideal_speedup"] = ideal_speedup(r.data_wait_fraction());
  return e;
}

// The model's inputs in one sentence: what one step and one batch cost, where.
std::string model_basis(const WhatIf& w) {
  const WhatIfInputs& in = w.inputs;
  return "Measured: a step computes " + duration_ms(in.compute_ms) + " (" + duration_ms(in.compute_cpu_ms) +
         " of CPU, torch on " + std::to_string(in.torch_threads) + (in.torch_threads == 1 ? " thread" : " threads") +
         "), a batch takes " + duration_ms(in.fetch_ms) + " to fetch (" + duration_ms(in.fetch_cpu_ms) +
         " of CPU), on " + std::to_string(in.usable_cores) + " usable " + (in.usable_cores == 1 ? "core" : "cores") +
         ". The what-if model (confidence " + w.confidence + ", fit " + fixed(100 * w.fit_error, 1) +
         "% on the recorded setting) predicts ";
}

// The best setting the model found, as recommendations: one per DataLoader argument it changes
// (with no workers recorded, one: start workers, with their settings). Returns whether any.
// No gain worth a change, but fewer workers are predicted to keep up as well (within the tie
// margin): fewer processes and less memory at no cost in speed. Not a speed recommendation.
// Given only when the workers were measured waiting for a CPU (run-queue delay of at least
// kRunqHigh on average): evidence of too many of them beside the model's. On the model alone it
// advised 0 workers for 2 on a compute-bound loop twice, at fits of -5.2 % and -4.2 %, and 0 measured
// 5 % and 17 % slower (bench/advice_bench.py): how much a worker slows a parallel step beside it
// is the model's least sure part.
void fewer_workers(const Report& r, const WhatIf& w, std::vector<Recommendation>* out) {
  if (!w.available || !w.best) return;
  const WhatIfCandidate& rec = w.candidates.front();
  const WhatIfCandidate& best = w.candidates[*w.best];
  const int64_t from = w.recorded.num_workers, to = best.setting.num_workers;
  if (to >= from || best.samples_per_s < rec.samples_per_s * (1 - kTieMargin)) return;
  double runq = 0;
  int n = 0;
  for (const WorkerStats& ws : r.workers) {
    if (r.main_loader && ws.loader == *r.main_loader && ws.runq_delay_fraction) {
      runq += *ws.runq_delay_fraction;
      ++n;
    }
  }
  const bool waiting = n > 0 && runq / n >= kRunqHigh;
  if (!waiting) return;
  Recommendation x;
  x.id = vocab::kRecReduceNumWorkers;
  x.speed = false;
  x.severity = vocab::kSeverityLow;
  x.action = "set num_workers=" + std::to_string(to) + " (as fast, " + std::to_string(from - to) + " fewer processes)";
  x.message = std::to_string(to) + (to == 1 ? " worker keeps" : " workers keep") + " up as well as " +
              std::to_string(from) + "; what bounds the loop: " + w.bound_text + " (the workers waited for a CPU " +
              percent(runq / n) + " of the time)" + ". " + model_basis(w) + fixed(best.samples_per_s, 1) +
              " samples/s with " + best.setting.arguments() + " against " + fixed(rec.samples_per_s, 1) +
              " as recorded. Fewer workers use less memory and leave their cores to "
              "the training process.";
  x.evidence = model_evidence(r, w);
  x.evidence["suggested"] = best.setting.arguments();
  x.evidence["suggested_num_workers"] = to;
  x.evidence["predicted_gain"] = w.best_gain;
  out->push_back(std::move(x));
}

// The DataLoader change advised: the model's best setting, with what each argument gains alone;
// or, where torch on one intra-op thread is advised beside workers that keep more threads runnable
// than there are cores (WhatIf::best_beside_busy_workers), the one-thread candidate's DataLoader
// setting, advised together with it. On all the intra-op threads the best setting's figure rests on
// how the scheduler places those threads beside the workers (WhatIfCandidate::uncertain): on a
// Lightning loop, before the model priced the threads' wait, it predicted 1.20x and measured 0.81x,
// slower than no workers, while the two together measured 1.31x (docs/decisions.md, "The DataLoader
// advice beside busy workers goes with one intra-op thread").
struct LoaderAdvice {
  const WhatIfCandidate* to = nullptr;
  double gain = 1;  // the whole setting's predicted gain over the recorded one
  // Each argument changed alone (1 where not known: together with one thread, only the whole is).
  double g_workers = 1, g_prefetch = 1, g_persistent = 1;
  bool with_one_thread = false;
};

LoaderAdvice loader_advice(const WhatIf& w) {
  LoaderAdvice a;
  if (!w.available || !w.best) return a;
  if (loader_with_one_thread(w)) {
    a.to = &w.thread_candidates[*w.threads_best];
    const double rec = w.candidates.front().samples_per_s;
    a.gain = rec > 0 ? a.to->samples_per_s / rec : 1;
    a.with_one_thread = true;
    return a;
  }
  a.to = &w.candidates[*w.best];
  a.gain = w.best_gain;
  a.g_workers = w.gain_num_workers;
  a.g_prefetch = w.gain_prefetch_factor;
  a.g_persistent = w.gain_persistent_workers;
  return a;
}

bool model_settings(const Report& r, const WhatIf& w, std::vector<Recommendation>* out) {
  const LoaderAdvice a = loader_advice(w);
  if (a.to == nullptr || a.gain < w.min_gain || (!a.with_one_thread && !w.loader_advised)) return false;
  const WhatIfCandidate& rec = w.candidates.front();
  const WhatIfCandidate& best = *a.to;
  const LoaderSetting& from = w.recorded;
  LoaderSetting to = best.setting;
  to.torch_threads = from.torch_threads;  // the DataLoader arguments alone
  if (to == from) return false;
  const std::string predicted = prediction(rec, best);
  // Together with one thread: why the DataLoader setting that is best on all the threads is not
  // advised on its own.
  const WhatIfCandidate& alone_best = w.candidates[*w.best];
  const std::string threads_s = std::to_string(w.inputs.torch_threads);
  const std::string alone_text =
      !a.with_one_thread ? std::string()
      : alone_best.recorded
          ? "with torch's " + threads_s +
                " intra-op threads no other DataLoader setting is predicted faster than the "
                "recorded one."
          : "with torch's " + threads_s + " intra-op threads the model's best is " + alone_best.setting.arguments() +
                " (" + fixed(alone_best.samples_per_s, 1) +
                " samples/s), a figure that rests on the scheduler: beside workers that keep more threads runnable "
                "than there are cores, the threads wait for each other at every parallel region for as long as "
                "it decides, and such a setting has made a loop slower than no workers.";
  const std::string bound = " The ideal bound, if all input wait vanished, is 1/(1-" +
                            fixed(r.data_wait_fraction(), 2) + ") = " + speedup(ideal_speedup(r.data_wait_fraction())) +
                            "; with the advice, what bounds the loop: " + w.bound_text + ".";
  // One recommendation per argument changed, each with what it gains alone; the message gives
  // the whole advised setting and what it gains.
  auto make = [&](const char* id, double alone, std::string action, std::string why) {
    Recommendation x;
    x.id = id;
    const double g = std::max(alone, 1.0);
    x.severity = gain_severity(g);
    x.expected_speedup = g;
    // "alone" only beside one argument of several; starting workers is the whole setting.
    const bool whole = from.num_workers == 0;
    if (a.with_one_thread) {
      x.action = std::move(action) + " with torch.set_num_threads(1) (predicted " + speedup(a.gain) + " together)";
      x.message = std::move(why) + " " + model_basis(w) + predicted + " with " + to.arguments() +
                  " and torch.set_num_threads(1) (limit_torch_threads). Not without it: " + alone_text + bound;
    } else {
      x.action =
          std::move(action) + (alone >= kNoticeable ? " (predicted " + speedup(alone) + (whole ? ")" : " alone)") : "");
      x.message = std::move(why) + " " + model_basis(w) + predicted + " with " + to.arguments() + "." + bound;
    }
    x.evidence = model_evidence(r, w);
    x.evidence["suggested"] = to.arguments();
    x.evidence["suggested_num_workers"] = to.num_workers;
    x.evidence["predicted_gain_alone"] = a.with_one_thread ? Json() : Json(alone);
    x.evidence["predicted_gain"] = a.gain;
    x.evidence["predicted_samples_per_s"] = best.samples_per_s;
    x.evidence["with_torch_threads"] = a.with_one_thread ? Json(1) : Json();
    return x;
  };
  if (from.num_workers == 0) {
    out->push_back(make(vocab::kRecIncreaseNumWorkers, a.gain, "set " + to.arguments(),
                        "With num_workers=0 every batch is loaded inside next(), so loading and training never "
                        "overlap."));
    return true;
  }
  if (to.num_workers != from.num_workers) {
    const bool more = to.num_workers > from.num_workers;
    const double g = a.with_one_thread ? a.gain : a.g_workers;
    std::string why;
    if (more) {
      why = (from.num_workers == 1 ? std::string("The one worker cannot")
                                   : "The " + std::to_string(from.num_workers) + " workers cannot") +
            " keep the queue full, and the cores have room for more.";
    } else if (to.num_workers == 0) {
      const WhatIfInputs& in = w.inputs;
      // Persistent workers start once: then what they cost is handing every batch over.
      if (!from.persistent_workers) {
        why = "Starting the workers costs " + fixed(in.startup_s, 2) + " s per epoch" +
              (in.fork_step_s > 0 ? ", and the first step after forking them " + fixed(in.fork_step_s, 2) +
                                        " s more (copying the memory it writes, shared with them since the fork)"
                                  : std::string()) +
              ", more than fetching the batches inside the loop (" + duration_ms(in.fetch_ms) + " each) costs.";
      }
      if (from.persistent_workers || in.share_cpu_ms > 0) {
        why += std::string(why.empty() ? "" : " ") + "Handing a batch over from a worker costs the training thread " +
               duration_ms(in.recv_cpu_ms) + " of CPU to receive it and the worker " + duration_ms(in.put_cpu_ms) +
               " to put it" +
               (in.share_cpu_ms > 0 ? " and about " + duration_ms(in.share_cpu_ms) +
                                          " more to collate it into shared memory, a segment for each of its " +
                                          std::to_string(in.batch_tensors) + " tensors"
                                    : std::string()) +
               ", against " + duration_ms(in.fetch_ms) + " to fetch it.";
      }
    } else if (g >= kNoticeable) {
      why = "The " + std::to_string(from.num_workers) +
            " workers compete with the training step for the cores: " + std::to_string(to.num_workers) +
            " deliver batches as fast and give the step its CPU back.";
    } else {
      why = std::to_string(to.num_workers) + (to.num_workers == 1 ? " worker keeps" : " workers keep") +
            " up as well as " + std::to_string(from.num_workers) +
            " at the advised setting: fewer processes, less memory.";
    }
    out->push_back(make(more ? vocab::kRecIncreaseNumWorkers : vocab::kRecReduceNumWorkers, g,
                        "set num_workers=" + std::to_string(to.num_workers), why));
  }
  if (to.prefetch_factor > from.prefetch_factor) {
    out->push_back(make(vocab::kRecIncreasePrefetchFactor, a.with_one_thread ? a.gain : a.g_prefetch,
                        "set prefetch_factor=" + std::to_string(to.prefetch_factor),
                        "Fetch times vary (p99 " + or_dash(r.loader()->fetch_p99_ms, duration_ms) + " vs p50 " +
                            or_dash(r.loader()->fetch_p50_ms, duration_ms) +
                            "): a deeper queue lets slow batches hide behind ready ones."));
  }
  if (to.persistent_workers && !from.persistent_workers) {
    out->push_back(make(
        vocab::kRecEnablePersistentWorkers, a.with_one_thread ? a.gain : a.g_persistent, "set persistent_workers=True",
        "Workers are re-created at every epoch (" + fixed(w.inputs.startup_s, 2) + " s each time to start, " +
            fixed(w.inputs.shutdown_s, 2) + " s to stop" +
            (w.inputs.fork_step_s > 0 ? ", and the first step after forking them " + fixed(w.inputs.fork_step_s, 2) +
                                            " s more, copying the memory it writes"
                                      : std::string()) +
            ")."));
  }
  return true;
}

// torch's intra-op threads beside the workers (whatif.h, thread_candidates): the model predicts
// the loop with the step on one thread, beside the workers at that count's best setting, faster
// than the best DataLoader setting alone by min_gain. The step's whole recorded CPU is put on the
// one thread, so the gain is a floor as far as the step goes; the intra-op threads' waiting for each
// other beside busy workers, which one thread removes, the model prices only by an assumption
// (docs/decisions.md, "The intra-op threads beside busy workers: no gain from the threads").
void limit_torch_threads(const Report& r, const WhatIf& w, std::vector<Recommendation>* out) {
  if (!w.available || !w.best || !w.threads_best) return;
  const WhatIfCandidate& rec = w.candidates.front();
  const WhatIfCandidate& best = w.candidates[*w.best];
  const WhatIfCandidate& t = w.thread_candidates[*w.threads_best];
  const std::string args = t.setting.arguments();
  const bool same = t.setting.num_workers == best.setting.num_workers &&
                    t.setting.prefetch_factor == best.setting.prefetch_factor &&
                    t.setting.persistent_workers == best.setting.persistent_workers;
  Recommendation x;
  x.id = vocab::kRecLimitTorchThreads;
  x.severity = gain_severity(w.threads_gain);
  x.expected_speedup = w.threads_gain;
  // Below min_gain it was advised because the one-thread floor reaches the DataLoader setting's
  // uncertain figure (whatif_candidate.cc): at least as fast, not a predicted gain; or because its own
  // figure ties with that one: about as fast.
  const bool by_floor = w.threads_basis == "floor";
  const bool by_tie = w.threads_basis == "tie";
  const bool together = loader_with_one_thread(w);
  const bool measured = w.inputs.parallel_ms >= 0;  // the step's parallel regions (dl.parallel)
  x.action = "call torch.set_num_threads(1) in the training process" + (same ? std::string() : ", with " + args) +
             (by_floor ? " (predicted at least as fast as the DataLoader setting alone)"
              : by_tie ? " (predicted about as fast as the DataLoader setting alone, whose figure is uncertain)"
                       : " (predicted " + speedup(w.threads_gain) + " over the DataLoader setting alone)");
  // Recorded beside workers, the regions' wall shows the waiting itself: the work inside them
  // (all threads' bodies) shared by the threads would take body / T; the rest of the wall is the
  // threads waiting for each other (docs/decisions.md, "The intra-op threads' wait beside busy
  // workers, measured").
  const double threads = static_cast<double>(std::max<int64_t>(1, w.inputs.torch_threads));
  const double region_wait_ms = measured ? w.inputs.parallel_ms - w.inputs.parallel_body_ms / threads : 0;
  const bool wait_seen = measured && rec.setting.num_workers > 0 && region_wait_ms >= 0.5 * w.inputs.parallel_ms;
  const std::string seen =
      wait_seen ? "In this recording, beside " + std::to_string(rec.setting.num_workers) +
                      " workers, torch's parallel regions held each step for " + duration_ms(w.inputs.parallel_ms) +
                      " of wall for " + duration_ms(w.inputs.parallel_body_ms) + " of work inside them on " +
                      std::to_string(w.inputs.torch_threads) + " threads: about " + duration_ms(region_wait_ms) +
                      " a step of the threads waiting for each other. "
                : std::string();
  x.message = "torch runs the training step on " + std::to_string(w.inputs.torch_threads) +
              " intra-op threads, which spin in next() (" + duration_ms(w.inputs.others_cpu_ms) +
              " of CPU per call) and need every core at once for each parallel region: beside busy workers on " +
              std::to_string(w.inputs.usable_cores) +
              " usable cores they take CPU from the workers and wait for "
              "each other. " +
              seen + model_basis(w) + prediction(rec, t) + " with " + args + " and torch.set_num_threads(1), " +
              (measured ? "the step's part outside torch's parallel regions and their work (" +
                              duration_ms(w.inputs.parallel_body_ms) + ", measured inside them) on one thread"
                        : "the step's " + duration_ms(w.inputs.compute_cpu_ms) + " of CPU all on one thread") +
              ", against " + fixed(best.samples_per_s, 1) + " samples/s with " + best.setting.arguments() + " alone." +
              (by_floor ? std::string(" That second figure rests on the scheduler, the threads' waiting for each "
                                      "other beside busy workers, and ") +
                              (measured ? "even the step's whole recorded CPU put on one thread (a floor) reaches it"
                                        : "the first is a floor, the step's whole recorded CPU put on one thread") +
                              ": one thread should be at least as fast."
               : by_tie ? std::string(" That second figure rests on the scheduler, the threads' waiting for each "
                                      "other beside busy workers, and the first is within ") +
                              percent(kTieMargin, 0) + " of it: a tie, which goes to one thread."
               : together ? std::string(" That second figure rests on the scheduler, the threads' waiting for "
                                        "each other beside busy workers.")
                          : std::string()) +
              (together ? " So the DataLoader setting is advised with one thread, not without it." : std::string()) +
              " Set it before the training loop; the workers already run torch on one thread. `stallscope tune` "
              "measures it (`torch_threads=1` in its runs) without editing the script.";
  x.evidence = model_evidence(r, w);
  x.evidence["suggested"] = args;
  x.evidence["suggested_num_workers"] = t.setting.num_workers;
  x.evidence["suggested_torch_threads"] = 1;
  x.evidence["predicted_samples_per_s"] = t.samples_per_s;
  x.evidence["predicted_gain"] = w.threads_gain;
  if (measured) {
    x.evidence["parallel_region_ms"] = w.inputs.parallel_ms;
    x.evidence["parallel_work_ms"] = w.inputs.parallel_body_ms;
    x.evidence["parallel_wait_ms"] = std::max(0.0, region_wait_ms);
  }
  out->push_back(std::move(x));
}

// Data-bound with no setting that helps: the fetch itself must get cheaper, and the model says
// what half the fetch time would be worth.
void slow_dataset_getitem(const Report& r, const WhatIf& w, std::vector<Recommendation>* out) {
  if (!w.available || !w.best || !r.data_bound) return;
  const WhatIfCandidate& best = w.candidates[*w.best];
  if (best.stall < kDataBoundFraction || w.bound == "compute" || w.bound == "start-up") return;
  const double gain = best.samples_per_s > 0 ? w.cheaper_fetch_samples_per_s / best.samples_per_s : 1;
  if (gain < w.min_gain) return;
  const LoaderStats* l = r.loader();
  const int64_t bs = l ? l->config.batch_size.value_or(0) : 0;
  Recommendation rec;
  rec.id = vocab::kRecSlowDatasetGetitem;
  rec.severity = gain_severity(gain);
  rec.expected_speedup = gain;
  rec.action = "make Dataset.__getitem__ cheaper (fetch " + duration_ms(w.inputs.fetch_ms) +
               " per batch; half of it: predicted " + speedup(gain) + ")";
  rec.message = "No DataLoader setting makes this loop faster. What bounds it: " + w.bound_text + ". " +
                model_basis(w) + fixed(best.samples_per_s, 1) + " samples/s at best (" + best.setting.arguments() +
                "), and " + fixed(w.cheaper_fetch_samples_per_s, 1) +
                " samples/s if fetching a batch took half the time" +
                (bs > 0 ? " (" + duration_ms(w.inputs.fetch_ms / 2 / static_cast<double>(bs)) +
                              " per sample instead of " + duration_ms(w.inputs.fetch_ms / static_cast<double>(bs)) + ")"
                        : std::string()) +
                ": decode or augment less on the CPU, cache preprocessed samples, move augmentation to the GPU, "
                "fetch whole batches with __getitems__.";
  rec.evidence = model_evidence(r, w);
  rec.evidence["cheaper_fetch_samples_per_s"] = w.cheaper_fetch_samples_per_s;
  out->push_back(std::move(rec));
}

void enable_pin_memory(const Report& r, const LoaderStats& l, std::vector<Recommendation>* out) {
  // Pinned memory only matters for host-to-device copies: GPU mode only (transfer stalls
  // measured there); a CPU-mode report never suggests it.
  if (r.mode != vocab::kModeGpu || l.config.pin_memory.value_or(false)) return;
  const double h2d = r.cause_fraction(kCauseH2d);
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
  rec.evidence = Json::object();
  rec.evidence["stall_fraction"] = r.data_wait_fraction();
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
  rec.action = "workers' private memory grew by up to " + bytes_text(max_one) + " each";
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
                   bytes_text(static_cast<double>(baseline)) +
                   " of its own (importing torch and the script's modules, and the unpickled dataset), which is not "
                   "counted here. What grows is allocated in the worker: caches, buffers, Python objects kept per "
                   "sample; bound or drop them.";
  rec.message = "Worker private memory grew by up to " + bytes_text(max_one) + " per worker (pid " +
                std::to_string(max_pid) + "), " + bytes_text(peak) + " across the " + std::to_string(peak_workers) +
                " workers running together" + (method ? " (start method " + *method + ")" : std::string()) + why +
                " Expected: about " + bytes_text(peak) +
                " less memory, and room to add workers without running out of memory.";
  rec.evidence = Json::object();
  rec.evidence["max_private_growth_bytes"] = saturated_int64(max_one);
  rec.evidence["max_growth_pid"] = max_pid;
  rec.evidence["concurrent_private_growth_bytes"] = saturated_int64(peak);
  rec.evidence["concurrent_workers"] = peak_workers;
  rec.evidence["start_method"] = method;
  out->push_back(std::move(rec));
}

// [SECTION] page faults of the training process (docs/report.md, "Page faults in the training step")
constexpr double kKernelShareMin = 0.10;    // share of the training process's CPU spent in the kernel
constexpr double kFaultsPerStepMin = 1024;  // minor faults a step: 4 MiB of fresh pages or more
constexpr double kPageBytes = 4096;

// A step that faults in thousands of fresh pages while the process spends a good part of its CPU in
// the kernel: the allocator hands the step's big blocks (gradients, activations) back to the kernel
// when they are freed and gets them back zero-filled, a fault per page, the next step. glibc's
// malloc does so for blocks above its mmap threshold, which moves with what was freed last: the
// same step then flips between fast and slow phases (docs/decisions.md, "Page faults in the
// training step"). With workers the training process also faults in each batch's shared memory as
// it reads it, which no allocator keeps: a page per 4 KiB of the batch (dl.batch) is taken out, and
// the kernel's share with it in proportion; without the batch's bytes there is no advice.
void allocator_page_faults(const Report& r, std::vector<Recommendation>* out) {
  const LoaderStats* l = r.loader();
  if (!l || r.steps <= 0) return;
  if (!r.train_cpu_util || !r.train_sys_cpu || !r.train_faults_per_step || *r.train_cpu_util <= 0) return;
  const bool workers = l->num_workers.value_or(0) > 0;
  const int64_t batch_bytes = r.whatif.inputs.batch_bytes;
  if (workers && batch_bytes < 0) return;
  const double all_faults = *r.train_faults_per_step;
  if (all_faults <= 0) return;
  const double batch_pages = workers ? std::ceil(static_cast<double>(batch_bytes) / kPageBytes) : 0.0;
  const double faults = std::max(0.0, all_faults - batch_pages);
  const double share = std::min(1.0, *r.train_sys_cpu / *r.train_cpu_util) * faults / all_faults;
  if (share < kKernelShareMin || faults < kFaultsPerStepMin) return;
  const double kernel_ms = share * *r.train_cpu_util * r.wall_s * 1e3 / static_cast<double>(r.steps);
  Recommendation rec;
  rec.id = vocab::kRecAllocatorPageFaults;
  rec.expected_speedup = ideal_speedup(share);
  rec.severity = gain_severity(rec.expected_speedup);
  // The dashboard's heat strip shows a process's CPU (the kernel's part is in it; proc.sys_cpu has
  // no strip of its own).
  rec.where = window_evidence(r, "CPU of the training process (pid " + std::to_string(r.train_pid) + "), " +
                                     percent(share, 0) + " of it in the kernel for page faults");
  rec.where.pid = r.train_pid;
  rec.where.counter = vocab::Counter::kCpu;
  rec.action = "keep freed memory in the process: preload tcmalloc (" + grouped(static_cast<int64_t>(faults)) +
               " page faults a step)";
  rec.message = "About " + percent(share, 0) + " of the training process's CPU goes to the kernel for page faults (" +
                duration_ms(kernel_ms) + " a step): it takes " + grouped(static_cast<int64_t>(faults)) +
                " minor page faults a step, " + bytes_text(faults * kPageBytes) + " of fresh pages" +
                (workers ? " (beyond the " + grouped(static_cast<int64_t>(batch_pages)) +
                               " pages of the batch received from a worker, not counted)"
                         : std::string()) +
                ": the memory allocator returns the step's large blocks (gradients, activations) to "
                "the kernel when they are freed and gets them back zero-filled, a fault per page, the next step. "
                "Keep them in the process: preload tcmalloc, e.g. "
                "`LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 stallscope run ...` (Debian and "
                "Ubuntu: libtcmalloc-minimal4). jemalloc 5 returns blocks over 8 MiB at once unless "
                "MALLOC_CONF=dirty_decay_ms:-1; with glibc's malloc alone, MALLOC_MMAP_THRESHOLD_=33554432 "
                "MALLOC_TRIM_THRESHOLD_=4294967296 keep blocks of up to 32 MiB. Expected: about " +
                speedup(rec.expected_speedup) +
                ", the kernel's share taken out of the training process's CPU: an estimate, not a bound (a warm "
                "block also spares the step the cache misses of fresh pages, and part of the kernel time may be "
                "other system calls); `stallscope tune` measures it with the allocator preloaded.";
  rec.evidence = Json::object();
  rec.evidence["kernel_cpu_share"] = share;
  rec.evidence["kernel_cpu_ms_per_step"] = kernel_ms;
  rec.evidence["minor_faults_per_step"] = faults;
  rec.evidence["process_cpu_cores"] = *r.train_cpu_util;
  rec.evidence["expected_speedup_bound"] = rec.expected_speedup;
  rec.evidence["batch_pages_per_step"] = batch_pages;
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
  rec.message = "Host-to-device copies come from pageable memory: " + bytes_text(static_cast<double>(pg.bytes)) +
                " in " + std::to_string(pg.count) + " copies" + rate +
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
  if (l != nullptr && r.data_bound && r.steps > 0 && r.input_wait_fraction * r.wall_s >= kMinInputWaitS) {
    if (!model_settings(r, r.whatif, &out)) {
      // Fewer workers is a DataLoader setting alone; together with one thread it is not advised.
      if (!loader_with_one_thread(r.whatif)) fewer_workers(r, r.whatif, &out);
      if (!r.whatif.threads_best) slow_dataset_getitem(r, r.whatif, &out);
    }
    limit_torch_threads(r, r.whatif, &out);
    enable_pin_memory(r, *l, &out);
  }
  if (r.mode == vocab::kModeGpu) {
    pageable_h2d(r, &out);
    host_sync(r, &out);
    move_transforms_to_gpu(r, &out);
  }
  worker_memory_growth(r, &out);
  allocator_page_faults(r, &out);
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
