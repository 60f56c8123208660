// The recommendations as one plan of actions (action.h). The figures are the recommendations' own
// (recommend.cc) and the what-if model's (whatif.h); what is new here is the grouping, the typed
// line, the range of an uncertain prediction and the short why. docs/report.md ("What to do").
#include "analysis/action.h"

#include <algorithm>
#include <cmath>

#include "analysis/format.h"
#include "analysis/report.h"
#include "analysis/tune.h"
#include "common/units.h"

namespace stallscope::analysis {
namespace {

// [SECTION] how sure a prediction is (docs/report.md, "What to do"; docs/decisions.md)
// The least relative error a prediction carries: the what-if model's noise floor (kMinGain in
// whatif_candidate.cc), used where its fit on the recorded setting was closer still.
constexpr double kFitSpreadMin = 0.05;
// A setting whose workers keep more threads runnable than there are cores beside torch's intra-op
// threads (WhatIfCandidate::uncertain): such predictions were measured from -12 to +14 % off on a
// 2-core VM (whatif.cc's assumption, docs/decisions.md).
constexpr double kBesideBusySpread = 0.14;
// torch on one intra-op thread where the step's parallel regions were measured: the one-thread
// step came out within -18 to +22 % of the step measured on one thread (whatif.cc's assumption).
constexpr double kOneThreadSpread = 0.22;
// The model's confidence below which, or a fit error above which, a prediction is a range.
constexpr double kFitUncertain = 0.05;

std::string times(double g) { return (g >= 10 ? fixed(g, 0) : g >= 2 ? fixed(g, 1) : fixed(g, 2)) + "x"; }

bool is(const Recommendation& rec, const char* id) { return rec.id == id; }

// The DataLoader's own recommendations from the what-if model (recommend.cc, model_settings).
bool loader_rule(const Recommendation& rec) {
  return rec.speed && (is(rec, vocab::kRecIncreaseNumWorkers) || is(rec, vocab::kRecReduceNumWorkers) ||
                       is(rec, vocab::kRecIncreasePrefetchFactor) || is(rec, vocab::kRecEnablePersistentWorkers));
}

std::string command_of(const Report& r) { return r.command.empty() ? " python train.py ..." : " " + r.command; }

// A model prediction's gain, range and words: `to` over the recorded setting's prediction.
void model_gain(const Report& r, const WhatIfCandidate& to, double gain, bool one_thread, Action* a) {
  const WhatIf& w = r.whatif;
  a->basis = "model";
  a->speedup = gain;
  a->confidence = w.confidence;
  const double fit = std::abs(w.fit_error);
  const bool measured_regions = w.inputs.parallel_ms >= 0;
  std::vector<std::string> reasons;
  double spread = std::max(fit, kFitSpreadMin);
  if (w.confidence != "high" || fit > kFitUncertain) {
    reasons.push_back("model fit " + std::string(w.fit_error >= 0 ? "+" : "") + fixed(100 * w.fit_error, 0) + "%");
  }
  if (to.uncertain) {
    spread += kBesideBusySpread;
    reasons.push_back("threads beside busy workers");
  }
  bool floor = false;
  if (one_thread) {
    if (measured_regions) {
      spread += kOneThreadSpread;
      reasons.push_back("one-thread step estimated");
    } else {
      floor = true;  // the step's whole recorded CPU on one thread
      reasons.push_back("one-thread step a floor");
    }
  }
  a->uncertain = !reasons.empty();
  if (!a->uncertain) {
    a->gain_text = times(gain) + " (confidence " + w.confidence + ")";
    return;
  }
  std::string why;
  for (const std::string& s : reasons) why += (why.empty() ? "" : ", ") + s;
  a->speedup_low = gain * (1 - spread);
  if (floor) {
    a->gain_text = "at least " + times(*a->speedup_low) + " (uncertain: " + why + ")";
    return;
  }
  a->speedup_high = gain * (1 + spread);
  a->gain_text = times(*a->speedup_low) + "-" + times(*a->speedup_high) + " (uncertain: " + why + ")";
}

// [SECTION] the DataLoader setting, with torch on one intra-op thread where advised
// Why the DataLoader setting changes, in one line: the worker count's reason first, else
// persistence's, else prefetch's.
std::string loader_why(const Report& r, const LoaderSetting& from, const LoaderSetting& to) {
  const WhatIfInputs& in = r.whatif.inputs;
  if (from.num_workers == 0 && to.num_workers > 0) {
    return "With num_workers=0 each batch is loaded inside next() (" + duration_ms(in.fetch_ms) +
           "), so loading and the step (" + duration_ms(in.compute_ms) + ") never overlap.";
  }
  if (to.num_workers == 0 && from.num_workers > 0) {
    if (!from.persistent_workers) {
      return "Starting the " + std::to_string(from.num_workers) + " workers costs " + fixed(in.startup_s, 2) +
             " s an epoch" +
             (in.fork_step_s >= 0.001 ? " (+" + duration_ms(in.fork_step_s * 1e3) + " on the step after the fork)"
                                      : std::string()) +
             ", more than fetching in the loop (" + duration_ms(in.fetch_ms) + " a batch).";
    }
    return "Handing a batch over from a worker costs " + duration_ms(in.recv_cpu_ms + in.put_cpu_ms) +
           " of CPU, against " + duration_ms(in.fetch_ms) + " to fetch it in the loop.";
  }
  if (to.num_workers > from.num_workers) {
    return "The " + std::to_string(from.num_workers) + (from.num_workers == 1 ? " worker" : " workers") +
           " cannot keep the queue full (" + duration_ms(in.fetch_ms) + " a batch, " + duration_ms(in.compute_ms) +
           " a step); the cores have room for more.";
  }
  if (to.num_workers < from.num_workers) {
    return "The " + std::to_string(from.num_workers) + " workers compete with the step for the " +
           std::to_string(in.usable_cores) + " cores; " + std::to_string(to.num_workers) + " deliver as fast.";
  }
  if (to.persistent_workers && !from.persistent_workers) {
    return "Workers are re-created every epoch: " + fixed(in.startup_s, 2) + " s to start, " + fixed(in.shutdown_s, 2) +
           " s to stop.";
  }
  if (to.prefetch_factor > from.prefetch_factor) {
    const LoaderStats* l = r.loader();
    return "Fetch times vary (p99 " + (l ? or_dash(l->fetch_p99_ms, duration_ms) : std::string("-")) + ", p50 " +
           (l ? or_dash(l->fetch_p50_ms, duration_ms) : std::string("-")) + "): a deeper queue hides the slow batches.";
  }
  return "";
}

std::string threads_why(const WhatIf& w) {
  const WhatIfInputs& in = w.inputs;
  return "torch's " + std::to_string(in.torch_threads) + " intra-op threads spin in next() (" +
         duration_ms(in.others_cpu_ms) + " of CPU a call) and wait for each other beside busy workers on " +
         std::to_string(in.usable_cores) + (in.usable_cores == 1 ? " core." : " cores.");
}

// The model's DataLoader recommendations, limit_torch_threads and a fewer-workers note, as one
// action: the setting they advise together, once.
Action loader_action(const Report& r, bool threads, bool loader, bool fewer) {
  const WhatIf& w = r.whatif;
  Action a;
  const WhatIfCandidate& rec = w.candidates.front();
  // With one thread: the one-thread candidate's setting (recommend.cc gives it with the thread,
  // whether as the DataLoader advice itself or beside it). Else the model's advised setting.
  const WhatIfCandidate& to = threads ? w.thread_candidates[*w.threads_best] : w.candidates[*w.best];
  LoaderSetting dl = to.setting;
  dl.torch_threads = w.recorded.torch_threads;
  std::vector<std::string> parts;
  if (!(dl == w.recorded)) parts.push_back("DataLoader(..., " + dl.arguments() + ")");
  if (threads) parts.push_back("torch.set_num_threads(1)");
  for (const std::string& p : parts) a.line += (a.line.empty() ? "" : " + ") + p;
  const double gain = rec.samples_per_s > 0 ? to.samples_per_s / rec.samples_per_s : 1;
  if (loader || threads) {
    model_gain(r, to, gain, threads, &a);
  } else {
    a.basis = "same";
    a.gain_text = "as fast, " + std::to_string(w.recorded.num_workers - dl.num_workers) + " fewer processes";
  }
  if (!(dl == w.recorded)) {
    std::string why = loader_why(r, w.recorded, dl);
    if (fewer && !loader && !threads) {
      why = std::to_string(dl.num_workers) + (dl.num_workers == 1 ? " worker keeps" : " workers keep") +
            " up as well as " + std::to_string(w.recorded.num_workers) +
            ", and they waited for a CPU: fewer processes, less memory.";
    }
    if (!why.empty()) a.why.push_back(why);
  }
  if (threads) a.why.push_back(threads_why(w));
  LoaderSetting applied = to.setting;
  applied.torch_threads = threads ? 1 : 0;
  a.why.push_back(a.uncertain ? "Measure it first: stallscope tune --" + command_of(r)
                              : "Try it unedited: stallscope run --loader-args \"" + loader_args_text(applied) +
                                    "\" --" + command_of(r));
  return a;
}

// [SECTION] the other rules, one action each (pin_memory's two rules are one)
Action other_action(const Report& r, const Recommendation& rec) {
  Action a;
  a.basis = rec.speed ? "bound" : "memory";
  a.speedup = rec.speed ? rec.expected_speedup : 1;
  if (rec.speed) a.gain_text = "up to " + times(rec.expected_speedup) + " (a bound)";
  const Json& e = rec.evidence;
  auto num = [&e](const char* k) {
    return e.is_object() && e.contains(k) && e[k].is_number() ? e[k].get<double>() : 0.0;
  };
  if (is(rec, vocab::kRecEnablePinMemory) || is(rec, vocab::kRecPageableH2d)) {
    a.line = "DataLoader(..., pin_memory=True) + batch.to(device, non_blocking=True)";
    a.why.push_back("Copies from pageable memory stall the GPU " + percent(r.cause_fraction(kCauseH2d)) +
                    " of the window and cannot overlap compute.");
  } else if (is(rec, vocab::kRecHostSync)) {
    a.line = "read loss.item() / .cpu() every N steps, not every step; drop torch.cuda.synchronize()";
    a.why.push_back("The loop blocks on the GPU " + percent(r.cause_fraction(kCauseSync)) +
                    " of the window, and the GPU runs dry meanwhile.");
  } else if (is(rec, vocab::kRecMoveTransformsToGpu)) {
    a.line = "transforms on the GPU: torchvision.transforms.v2 on CUDA tensors, or DALI";
    a.why.push_back("The GPU is busy " + percent(r.gpu.busy_fraction) + " of the window; the workers compute " +
                    fixed(num("worker_fetch_cpu_cores"), 2) + " cores each while they fetch.");
  } else if (is(rec, vocab::kRecAllocatorPageFaults)) {
    // The kernel's share is an estimate, not a bound: on JPEG pipelines tcmalloc gained more
    // (docs/decisions.md, "The allocator's figure is an estimate").
    a.basis = "estimate";
    a.gain_text = "about " + times(rec.expected_speedup) + " (an estimate: tune measures it)";
    a.line = "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 stallscope run ...";
    a.why.push_back(grouped(static_cast<int64_t>(num("minor_faults_per_step"))) +
                    " page faults a step: " + percent(num("kernel_cpu_share"), 0) +
                    " of the process's CPU in the kernel, as freed blocks go back to it.");
    a.why.push_back("Debian and Ubuntu: apt install libtcmalloc-minimal4 (jemalloc or glibc settings: --explain).");
    a.why.push_back("The gain is the kernel's share given back, an estimate; to measure it: stallscope tune --" +
                    command_of(r));
  } else if (is(rec, vocab::kRecWorkerMemoryGrowth)) {
    const Json& m = e.is_object() && e.contains("start_method") ? e["start_method"] : Json();
    const bool forked = !m.is_string() || m.get<std::string>() == "fork";
    a.line = forked ? "Dataset: per-sample metadata in numpy arrays or tensors, not Python lists and dicts"
                    : "Dataset: bound the caches and per-sample objects the workers keep";
    a.gain_text = "about " + bytes_text(num("concurrent_private_growth_bytes")) + " less memory";
    a.why.push_back("The workers' private memory grew by up to " + bytes_text(num("max_private_growth_bytes")) +
                    " each" + (forked ? ": copy-on-write of the dataset's Python objects." : "."));
  } else if (is(rec, vocab::kRecSlowDatasetGetitem)) {
    const WhatIf& w = r.whatif;
    a.line = "Dataset.__getitem__: cheaper than its " + duration_ms(w.inputs.fetch_ms) +
             " a batch (cache, decode or augment less, __getitems__)";
    model_gain(r, w.candidates[*w.best], rec.expected_speedup, false, &a);
    a.gain_text = "at half the fetch " + a.gain_text;
    a.why.push_back("No DataLoader setting makes the loop faster; what bounds it: " + w.bound_text + ".");
  } else {
    a.line = rec.action.empty() ? rec.id : rec.action;
  }
  if (a.gain_text.empty()) a.gain_text = rec.speed ? times(rec.expected_speedup) : "not a speed change";
  return a;
}

}  // namespace

std::vector<Action> plan_actions(const Report& r) {
  std::vector<Action> out;
  const std::vector<Recommendation>& recs = r.recommendations;
  const WhatIf& w = r.whatif;
  const bool model = w.available && w.best.has_value();
  bool threads = false, loader = false, fewer = false;
  for (const Recommendation& rec : recs) {
    threads |= is(rec, vocab::kRecLimitTorchThreads);
    loader |= loader_rule(rec);
    fewer |= is(rec, vocab::kRecReduceNumWorkers) && !rec.speed;
  }
  threads &= model && w.threads_best.has_value();
  loader &= model;
  fewer &= model;
  std::optional<size_t> loader_at;  // the combined DataLoader action's index in `out`
  std::optional<size_t> pin_at;
  for (size_t i = 0; i < recs.size(); ++i) {
    const Recommendation& rec = recs[i];
    const bool joins_loader = (threads || loader || fewer) && model &&
                              (loader_rule(rec) || is(rec, vocab::kRecLimitTorchThreads) ||
                               (is(rec, vocab::kRecReduceNumWorkers) && !rec.speed));
    const bool pin = is(rec, vocab::kRecEnablePinMemory) || is(rec, vocab::kRecPageableH2d);
    std::optional<size_t>* slot = joins_loader ? &loader_at : pin ? &pin_at : nullptr;
    if (slot && *slot) {
      Action& a = out[**slot];
      a.ids.push_back(rec.id);
      a.recommendations.push_back(i);
      if (pin && rec.expected_speedup > a.speedup) {  // the larger bound of the two pin rules
        a.speedup = rec.expected_speedup;
        a.gain_text = "up to " + times(rec.expected_speedup) + " (a bound)";
      }
      continue;
    }
    Action a = joins_loader ? loader_action(r, threads, loader, fewer) : other_action(r, rec);
    if (a.why.size() > kMaxWhyLines) a.why.resize(kMaxWhyLines);
    a.ids.push_back(rec.id);
    a.recommendations.push_back(i);
    if (slot) *slot = out.size();
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace stallscope::analysis
