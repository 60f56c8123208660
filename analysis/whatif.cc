// The what-if model (whatif.h): what_if() reads the inputs (whatif_inputs.cc), tries the
// candidate settings (whatif_candidate.cc) on the simulation (whatif_sim.cc), and writes the
// advice: what bounds the loop at the advised setting, what a cheaper fetch is worth, the
// confidence and the assumptions. docs/report.md ("What-if model").
#include "analysis/whatif.h"

#include <algorithm>
#include <cmath>

#include "analysis/dataloader.h"
#include "analysis/format.h"
#include "analysis/report.h"
#include "analysis/whatif_model.h"

namespace stallscope::analysis {

using whatif_detail::build_inputs;
using whatif_detail::Built;
using whatif_detail::handed_batches;
using whatif_detail::predict;
using whatif_detail::Predicted;

bool loader_with_one_thread(const WhatIf& w) {
  return w.available && w.best && w.threads_best && w.best_beside_busy_workers;
}

namespace {

// WhatIf::advised and about_the_same (whatif.h). A one-thread candidate stands for its setting with
// torch on one thread; a DataLoader candidate for its setting on the recorded threads.
void about_the_same(WhatIf* out) {
  WhatIf& w = *out;
  if (w.threads_best) {
    w.advised = w.thread_candidates[*w.threads_best];
  } else if (w.loader_advised) {
    w.advised = w.candidates[*w.best];
  } else {
    w.advised = w.candidates.front();
  }
  w.about_the_same_within = w.min_gain - 1;
  const double a = w.advised.samples_per_s;
  if (a <= 0) return;
  for (const auto* list : {&w.candidates, &w.thread_candidates}) {
    for (const WhatIfCandidate& c : *list) {
      if (c.setting == w.advised.setting) continue;
      if (std::abs(c.samples_per_s / a - 1) <= w.about_the_same_within) w.about_the_same.push_back(c);
    }
  }
  std::stable_sort(
      w.about_the_same.begin(), w.about_the_same.end(),
      [](const WhatIfCandidate& x, const WhatIfCandidate& y) { return x.samples_per_s > y.samples_per_s; });
}

}  // namespace

WhatIf what_if(const Session& s, const DataLoaderModel& m, const Report& r) {
  WhatIf w;
  const LoaderStats* l = r.loader();
  const LoaderInfo* li = l ? m.loader(l->id) : nullptr;
  if (!l || !li || r.steps < 4) {
    w.why_not = "no training loop with steps was recorded";
    return w;
  }
  if (l->config.kind == vocab::kLoaderReference) {
    w.why_not = "the reference loader: its threads share the training process, which the model does not cover";
    return w;
  }
  Built b = build_inputs(s, m, r, *l, *li);
  if (!b.why_not.empty()) {
    w.why_not = b.why_not;
    return w;
  }
  w.inputs = std::move(b.in);
  const WhatIfInputs& in = w.inputs;
  const int64_t n_rec = l->num_workers.value_or(0);
  w.recorded.num_workers = n_rec;
  w.recorded.prefetch_factor = n_rec > 0 ? l->config.prefetch_factor.value_or(2) : 2;
  w.recorded.persistent_workers = l->config.persistent_workers.value_or(false);
  w.recorded.pin_memory = l->config.pin_memory.value_or(false);

  whatif_detail::search_candidates(&w, r.wall_s);
  const double samples = in.samples_per_step;
  const double cores = static_cast<double>(in.usable_cores);
  const size_t pick = *w.best;
  const int64_t gang = std::clamp<int64_t>(in.torch_threads, 1, in.usable_cores);
  const bool gang_beside_busy_workers = w.best_beside_busy_workers;
  w.available = true;
  about_the_same(&w);

  // What bounds the loop at the advised setting: together with one intra-op thread, the one-thread
  // candidate's, whose step is its part outside torch's parallel regions and their work on one
  // thread where they were measured (else the step's whole recorded CPU), with no threads spinning.
  const bool one_thread = loader_with_one_thread(w);
  const WhatIfCandidate& bc = one_thread ? w.thread_candidates[*w.threads_best] : w.candidates[pick];
  const double step_ms = bc.steady_step_ms;
  const double step_cpu_ms =
      !one_thread ? in.compute_cpu_ms
      : in.parallel_ms >= 0
          ? std::min(in.compute_cpu_ms, std::max(0.0, in.compute_ms - in.parallel_ms) + in.parallel_body_ms)
          : in.compute_cpu_ms;
  const double spin_ms = one_thread ? 0 : in.others_cpu_ms;
  const double fetch_alone_ms =
      in.fetch_cpu_ms - (n_rec > 0 ? in.put_cpu_ms : 0) - (bc.setting.num_workers == 0 ? in.share_cpu_ms : 0);
  const double cpu_per_step =
      step_cpu_ms + fetch_alone_ms + (bc.setting.num_workers > 0 ? in.put_cpu_ms + in.recv_cpu_ms + spin_ms : 0);
  const double busy = step_ms > 0 ? cpu_per_step / (cores * step_ms) : 0;
  // The fetch the text quotes is the advised setting's: without workers, a recorded worker's put
  // and its collate into shared memory are not part of it.
  const bool drop_handoff = bc.setting.num_workers == 0;
  const double quoted_fetch_cpu_ms = drop_handoff ? std::max(0.0, fetch_alone_ms) : in.fetch_cpu_ms;
  const double quoted_fetch_ms =
      drop_handoff ? std::max(quoted_fetch_cpu_ms, in.fetch_ms - (in.fetch_cpu_ms - quoted_fetch_cpu_ms)) : in.fetch_ms;
  const std::string cores_s = std::to_string(in.usable_cores) + (in.usable_cores == 1 ? " core" : " cores");
  if (bc.stall < kDataBoundFraction) {
    w.bound = "compute";
    w.bound_text = "the training step itself: at " + bc.setting.arguments() + " the loop waits for input only " +
                   percent(bc.stall) + " of the window";
  } else if (busy >= 0.85) {
    w.bound = "cpu";
    w.bound_text = "the " + cores_s + (in.usable_cores == 1 ? " is" : " are") + " busy: loading (" +
                   duration_ms(quoted_fetch_cpu_ms) + " of CPU per batch) and training (" + duration_ms(step_cpu_ms) +
                   (one_thread ? " per step on one thread" : " per step") +
                   ") share them, so more workers take CPU from the step they feed";
  } else if (in.startup_s > 0 && bc.setting.num_workers > 0 && !bc.setting.persistent_workers &&
             in.startup_s * static_cast<double>(in.epochs) > 0.3 * (in.other_s + in.train_s)) {
    w.bound = "start-up";
    w.bound_text = "starting the workers: " + fixed(in.startup_s, 2) + " s per epoch" +
                   (in.startup_estimated ? " (estimated; " + in.startup_method + ")" : "");
  } else {
    w.bound = "fetch";
    w.bound_text = "fetching: one batch takes " + duration_ms(quoted_fetch_ms) + " (" +
                   duration_ms(quoted_fetch_cpu_ms) + " of it on a CPU) against " +
                   duration_ms(one_thread ? step_cpu_ms : in.compute_ms) +
                   (one_thread ? " of compute per step on one thread" : " of compute per step");
  }

  {
    WhatIfInputs half = in;
    for (Demand& d : half.fetches) {
      d.cpu_s /= 2;
      d.wait_s /= 2;
      d.share_cpu_s /= 2;
      if (d.one_cpu_s > 0) d.one_cpu_s /= 2;
    }
    const Predicted p = predict(half, bc.setting, n_rec);
    const double window = in.other_s + p.train_s;
    w.cheaper_fetch_samples_per_s = window > 0 ? handed_batches(in) * samples / window : 0;
  }

  const double err = std::abs(w.fit_error);
  w.confidence = err <= 0.05 && b.from_marks ? "high" : (err <= 0.15 ? "medium" : "low");
  w.assumptions.push_back(
      "the training step's work and the batches' fetch times stay as recorded; only the "
      "DataLoader settings change");
  w.assumptions.push_back("the " + cores_s + " are shared evenly among runnable threads; torch's " +
                          std::to_string(in.torch_threads) +
                          " intra-op thread(s) advance together, as fast as the slowest, while no more threads are "
                          "runnable than there are cores");
  if (gang_beside_busy_workers) {
    w.assumptions.push_back(
        "beside busy workers, torch's " + std::to_string(gang) +
        " intra-op threads wait for each other longer than an even share of the cores gives: a parallel region "
        "needs all of them at once, and the scheduler does not run them together. The model takes the regions "
        "to gain nothing from the threads there (their work done at one thread's share); the wait itself was "
        "measured from none to many times the region, so the predictions with such workers may be off either "
        "way (on a 2-core VM from -12 to +14 %, docs/decisions.md); torch.set_num_threads(1) removes the wait");
  }
  if (gang > 1 && in.parallel_ms >= 0) {
    w.assumptions.push_back(
        "with torch on one intra-op thread (torch.set_num_threads(1)), the step runs its part outside torch's "
        "parallel regions (" +
        duration_ms(std::max(0.0, in.compute_ms - in.parallel_ms)) + " of its " + duration_ms(in.compute_ms) +
        ") and then the regions' work that " + std::to_string(gang) + " threads shared (" +
        duration_ms(in.parallel_body_ms) +
        ", measured inside the regions); on a 2-core VM that came out within -18 to +22 % of the step measured "
        "on one thread (docs/decisions.md); `stallscope tune` measures one thread");
  } else if (gang > 1) {
    w.assumptions.push_back(
        "with torch on one intra-op thread (torch.set_num_threads(1)), the step's whole recorded CPU runs on that "
        "thread: a floor on its speed, for the " +
        std::to_string(gang) +
        " threads' waiting for each other is recorded as CPU too; `stallscope tune` measures one thread");
  }
  if (in.fetch_one_cpu_ms >= 0) {
    w.assumptions.push_back("a worker runs torch on one thread, so it runs the fetch's own parallel regions on one: " +
                            duration_ms(in.fetch_one_cpu_ms) +
                            " of CPU a batch (its part outside the regions and their work, measured "
                            "inside them), against the " +
                            duration_ms(in.fetch_cpu_ms) + " the training thread spent on " +
                            std::to_string(in.torch_threads) +
                            "; so does the training thread at torch.set_num_threads(1)");
  }
  if (in.spin_window_s > 0 && in.torch_threads > 1) {
    w.assumptions.push_back(
        "torch's intra-op threads spin " + duration_ms(in.spin_window_s * 1e3) +
        " of CPU each after the step's parallel work (as measured in next()), through the rest of the step and "
        "the next(), until the next step's: where batches are ready they do not sleep, and workers share the "
        "cores with them");
  } else if (in.others_cpu_ms >= 0.05 * std::max(in.fetch_cpu_ms, in.compute_cpu_ms)) {
    w.assumptions.push_back(
        "the training process's other threads stay busy in next() as recorded (" + duration_ms(in.others_cpu_ms) +
        " of CPU per call: torch's intra-op threads spinning after the step): workers share the cores with them");
  }
  if (in.wake_s > 0) {
    w.assumptions.push_back(
        "torch's intra-op threads sleep after " + duration_ms(in.spin_window_s * 1e3) +
        " of spinning in next(), and some steps waited to wake them (" + duration_ms(in.wake_s * 1e3) +
        " on average after such a next()): a setting that keeps batches ready does not pay that wait");
  }
  if (in.fork_step_s > 0 || in.fork_first_step_s > 0) {
    const bool differ = std::abs(in.fork_step_s - in.fork_first_step_s) > 0.05 * in.fork_step_s;
    w.assumptions.push_back(
        "the first step after the workers were forked took " + duration_ms(in.fork_step_s * 1e3) +
        (differ ? " (" + duration_ms(in.fork_first_step_s * 1e3) + " at the first epoch)" : std::string()) +
        " more than a steady step (the training process's memory, shared with them since the fork, copied as the "
        "step first writes it): paid at every epoch whose workers are forked, once with persistent_workers=True, "
        "never without workers");
  }
  if (!b.from_marks) {
    w.assumptions.push_back("no dl.cpu events: CPU and waiting are split by the /proc CPU means, not per batch");
  }
  if (n_rec == 0) {
    const std::string layout = in.batch_tensors >= 0 ? " (a batch of " + std::to_string(in.batch_tensors) +
                                                           (in.batch_tensors == 1 ? " tensor, " : " tensors, ") +
                                                           fixed(static_cast<double>(in.batch_bytes) / 1e6, 2) + " MB)"
                                                     : " (the batch's layout was not recorded)";
    w.assumptions.push_back(
        "recorded without workers: handing a batch over is taken to cost the training thread " +
        duration_ms(in.recv_cpu_ms) + " of CPU to receive it and the worker " + duration_ms(in.put_cpu_ms) +
        " to put it" + layout + ", and starting the workers to take " + duration_ms(in.startup_s * 1e3) + " per epoch" +
        (in.startup_per_worker_s > 0 ? " at " + std::to_string(in.startup_workers) + " workers, " +
                                           duration_ms(in.startup_per_worker_s * 1e3) + " more for each one more"
                                     : std::string()) +
        " (" + in.startup_method + "; estimates, not measured)");
  } else if (in.share_cpu_ms > 0) {
    w.assumptions.push_back("recorded with workers: without them, a batch's collate is taken to cost " +
                            duration_ms(in.share_cpu_ms) + " of CPU less than in a worker, which puts each of its " +
                            std::to_string(in.batch_tensors) + (in.batch_tensors == 1 ? " tensor" : " tensors") +
                            " in shared memory of its own (an estimate from the layout, " +
                            fixed(static_cast<double>(in.batch_bytes) / 1e6, 2) + " MB, held to the recorded collate)");
  }
  return w;
}

}  // namespace stallscope::analysis
