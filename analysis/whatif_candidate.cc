// The what-if model's candidates: the DataLoader settings it tries (num_workers over a grid, then
// deeper prefetch and persistent workers), the advised one (the cheapest tied with the best, with
// a price on workers beyond the cores), what each argument gains alone, and torch on one intra-op
// thread beside each worker count (whatif.h, WhatIf; docs/report.md, "What-if model").
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "analysis/whatif.h"
#include "analysis/whatif_model.h"

namespace stallscope::analysis {

using whatif_detail::handed_batches;
using whatif_detail::predict;
using whatif_detail::Predicted;

namespace {

// Candidates whose predicted samples/s lie within this share of the best count as tied; among
// them the advice takes the one that costs least (fewest workers, the recorded prefetch and
// persistence, the smallest prefetch): a setting is not worth more processes for a gain the model
// cannot tell from noise.
constexpr double kTie = 0.02;
// The least gain worth advising, before the model's own fit error is added: below it a rerun's
// noise on a busy machine hides the change (docs/report.md).
constexpr double kMinGain = 0.05;
// How far below its figure a setting beside busy workers (WhatIfCandidate::uncertain) was measured:
// from -12 to +14 % on a 2-core VM, and 0.84 of it on a JPEG ImageFolder under Lightning (1.10x
// predicted, 0.92x measured). Advised alone, such a setting's gain must reach min_gain at this low
// end (docs/decisions.md, "An uncertain figure is advised at the low end of its range").
constexpr double kBesideBusyLow = 0.16;
// What each worker beyond the usable cores must gain to be advised, when the fetch is all CPU work
// (scaled by the fetch's CPU share: waiting workers need no core).
constexpr double kOversubscribedPrice = 0.05;

std::string yes_no(bool b) { return b ? "True" : "False"; }

}  // namespace

std::string LoaderSetting::arguments() const {
  std::string s = "num_workers=" + std::to_string(num_workers);
  if (num_workers > 0) {
    s += ", prefetch_factor=" + std::to_string(prefetch_factor) + ", persistent_workers=" + yes_no(persistent_workers);
  }
  return s;
}

WhatIfCandidate what_if_candidate(const WhatIf& w, const LoaderSetting& setting) {
  WhatIfCandidate c;
  c.setting = setting;
  c.recorded = setting == w.recorded;
  if (!w.available) return c;
  const WhatIfInputs& in = w.inputs;
  const Predicted p = predict(in, setting, w.recorded.num_workers);
  const double window = in.other_s + p.train_s;
  c.samples_per_s = window > 0 ? handed_batches(in) * in.samples_per_step / window : 0;
  c.stall = window > 0 ? std::min(1.0, p.wait_s / window) : 0;
  c.steady_step_ms = p.step_s * 1e3;
  return c;
}

namespace whatif_detail {

void search_candidates(WhatIf* out, double wall_s) {
  WhatIf& w = *out;
  const WhatIfInputs& in = w.inputs;
  const int64_t n_rec = w.recorded.num_workers;
  const double samples = in.samples_per_step;
  auto candidate_of = [&](const WhatIfInputs& inputs, const LoaderSetting& st) {
    const Predicted p = predict(inputs, st, n_rec);
    WhatIfCandidate c;
    c.setting = st;
    const double window = in.other_s + p.train_s;
    c.samples_per_s = window > 0 ? handed_batches(in) * samples / window : 0;
    c.stall = window > 0 ? std::min(1.0, p.wait_s / window) : 0;
    c.steady_step_ms = p.step_s * 1e3;
    c.recorded = st == w.recorded;
    return c;
  };
  auto to_candidate = [&](const LoaderSetting& st) { return candidate_of(in, st); };

  // The recorded setting: the model's fit.
  const WhatIfCandidate rec = to_candidate(w.recorded);
  w.measured_samples_per_s = wall_s > 0 ? handed_batches(in) * samples / wall_s : 0;
  w.predicted_recorded_samples_per_s = rec.samples_per_s;
  w.fit_error = w.measured_samples_per_s > 0 ? rec.samples_per_s / w.measured_samples_per_s - 1 : 0;
  w.candidates.push_back(rec);

  // num_workers: 0 to what the fetch's waiting could use (at least twice the cores), recorded
  // prefetch and persistence; then, at the best of those, deeper prefetch and persistent workers.
  const double cores = static_cast<double>(in.usable_cores);
  // The step as it runs with batches ready: without the waits to wake the intra-op threads.
  double ready_compute_ms = in.compute_ms;
  for (const StepDemand& d : in.steps) ready_compute_ms -= d.wake_s * 1e3 / static_cast<double>(in.steps.size());
  const double ratio = ready_compute_ms > 0 ? in.fetch_ms / ready_compute_ms : cores;
  // Clamped before the conversion: a damaged recording's times can make the ratio anything.
  double want = std::ceil(2 * std::max(ratio, cores));
  if (!std::isfinite(want)) want = 2 * cores;
  const int64_t n_max = static_cast<int64_t>(std::clamp(want, 2.0, 64.0));
  std::vector<int64_t> grid;
  for (int64_t n = 0; n <= n_max; n += n < 8 ? 1 : (n < 16 ? 2 : (n < 32 ? 4 : 8))) grid.push_back(n);
  const bool multi_epoch = in.epochs > 1;
  for (int64_t n : grid) {
    LoaderSetting st = w.recorded;
    st.num_workers = n;
    if (n > 0 && n_rec == 0) {
      st.prefetch_factor = 2;
      st.persistent_workers = multi_epoch;  // new workers are not re-created per epoch when advised
    }
    if (st == w.recorded) continue;
    w.candidates.push_back(to_candidate(st));
  }
  auto best_index = [&]() {
    size_t best = 0;
    for (size_t i = 1; i < w.candidates.size(); ++i) {
      if (w.candidates[i].samples_per_s > w.candidates[best].samples_per_s) best = i;
    }
    return best;
  };
  // Deeper prefetch and persistent workers at every worker count up to the best one: a smaller
  // count with a deeper queue may match a larger one.
  LoaderSetting top = w.candidates[best_index()].setting;
  if (top.num_workers == 0) {  // the best with workers: persistent ones may still beat none
    const WhatIfCandidate* with = nullptr;
    for (const WhatIfCandidate& c : w.candidates) {
      if (c.setting.num_workers > 0 && (!with || c.samples_per_s > with->samples_per_s)) with = &c;
    }
    if (with) top = with->setting;
  }
  for (int64_t n : grid) {
    if (n == 0 || n > top.num_workers) continue;
    for (int64_t pf : {int64_t{2}, int64_t{4}, int64_t{8}}) {
      for (bool persistent : {top.persistent_workers, true}) {
        LoaderSetting st = top;
        st.num_workers = n;
        st.prefetch_factor = pf;
        st.persistent_workers = persistent;
        bool have = false;
        for (const WhatIfCandidate& c : w.candidates) have |= c.setting == st;
        if (!have) w.candidates.push_back(to_candidate(st));
      }
    }
  }
  // The advice: the cheapest candidate tied with the best, each scored by its prediction less a
  // price for workers beyond the cores when fetching is CPU work: the model does not see what such
  // workers cost (waking the training thread through a full run queue, each worker's feeder
  // thread, cache), and on 2 cores they were measured slower than it predicts (bench/advice_bench.py,
  // docs/decisions.md).
  const double fetch_cpu_share = in.fetch_ms > 0 ? std::clamp(in.fetch_cpu_ms / in.fetch_ms, 0.0, 1.0) : 1.0;
  auto score = [&](const WhatIfCandidate& c) {
    const double over = std::max<double>(0, static_cast<double>(c.setting.num_workers) - cores) * fetch_cpu_share;
    return c.samples_per_s / std::pow(1 + kOversubscribedPrice, over);
  };
  size_t top_scored = 0;
  for (size_t i = 1; i < w.candidates.size(); ++i) {
    if (score(w.candidates[i]) > score(w.candidates[top_scored])) top_scored = i;
  }
  const double best_score = score(w.candidates[top_scored]);
  size_t pick = top_scored;
  auto cost = [&](const LoaderSetting& st) {
    return std::make_tuple(st.num_workers, st.persistent_workers != w.recorded.persistent_workers,
                           st.num_workers > 0 && st.prefetch_factor != w.recorded.prefetch_factor, st.prefetch_factor);
  };
  for (size_t i = 0; i < w.candidates.size(); ++i) {
    if (score(w.candidates[i]) >= best_score * (1 - kTie) &&
        cost(w.candidates[i].setting) < cost(w.candidates[pick].setting)) {
      pick = i;
    }
  }
  w.best = pick;
  w.best_gain = rec.samples_per_s > 0 ? w.candidates[pick].samples_per_s / rec.samples_per_s : 1;
  w.min_gain = 1 + kMinGain + std::abs(w.fit_error);
  // Recorded with workers and predicted above the measured figure, the model misses part of what the
  // workers cost (the hand-off's waits for a core, docs/decisions.md, "The hand-off's price between a
  // slow and a fast machine"). Advised no workers, that part goes with them: the gain, taken against
  // the too-high figure, is a floor, and needs no margin for the fit.
  if (w.recorded.num_workers > 0 && w.fit_error > 0 && w.candidates[pick].setting.num_workers == 0) {
    w.min_gain = 1 + kMinGain;
  }
  {
    const LoaderSetting& to = w.candidates[pick].setting;
    auto alone = [&](auto change) {
      LoaderSetting st = w.recorded;
      change(st);
      if (st == w.recorded || rec.samples_per_s <= 0) return 1.0;
      for (const WhatIfCandidate& c : w.candidates) {
        if (c.setting == st) return c.samples_per_s / rec.samples_per_s;
      }
      return to_candidate(st).samples_per_s / rec.samples_per_s;
    };
    w.gain_num_workers = alone([&](LoaderSetting& st) {
      st.num_workers = to.num_workers;
      if (w.recorded.num_workers == 0) st = to;  // starting workers comes with their settings
    });
    if (w.recorded.num_workers > 0) {
      w.gain_prefetch_factor = alone([&](LoaderSetting& st) { st.prefetch_factor = to.prefetch_factor; });
      w.gain_persistent_workers = alone([&](LoaderSetting& st) { st.persistent_workers = to.persistent_workers; });
    }
  }
  // torch on one intra-op thread, at each worker count's best DataLoader setting found above.
  const int64_t gang = std::clamp<int64_t>(in.torch_threads, 1, in.usable_cores);
  const int64_t advised_workers = w.candidates[pick].setting.num_workers;
  // The intra-op threads beside workers that keep more threads runnable than there are cores: a
  // figure that rests on how the scheduler places them (WhatIfCandidate::uncertain).
  auto beside_busy = [&](int64_t workers) {
    return gang > 1 && workers > 0 &&
           static_cast<double>(workers) * fetch_cpu_share + static_cast<double>(gang) > cores;
  };
  const bool gang_beside_busy_workers = beside_busy(advised_workers);
  w.best_beside_busy_workers = gang_beside_busy_workers;
  for (WhatIfCandidate& c : w.candidates) c.uncertain = !c.recorded && beside_busy(c.setting.num_workers);
  {
    const WhatIfCandidate& b = w.candidates[pick];
    w.loader_advised =
        !b.recorded && w.best_gain >= w.min_gain && (!b.uncertain || w.best_gain * (1 - kBesideBusyLow) >= w.min_gain);
  }
  if (gang > 1) {
    std::map<int64_t, const WhatIfCandidate*> per_count;
    for (const WhatIfCandidate& c : w.candidates) {
      auto [it, added] = per_count.emplace(c.setting.num_workers, &c);
      if (!added && c.samples_per_s > it->second->samples_per_s) it->second = &c;
    }
    // The floor: the same settings with the step's whole recorded CPU on one thread, where the
    // parallel regions' figures give the candidates themselves.
    WhatIfInputs floor_in;
    const bool measured = in.parallel_ms >= 0;
    if (measured) {
      floor_in = in;
      for (StepDemand& d : floor_in.steps) d.fewer_gang_work_s = d.fewer_serial_s = -1;
    }
    std::vector<WhatIfCandidate> floors;
    for (const auto& [n, c] : per_count) {
      LoaderSetting st = c->setting;
      st.torch_threads = 1;
      w.thread_candidates.push_back(to_candidate(st));
      floors.push_back(measured ? candidate_of(floor_in, st) : w.thread_candidates.back());
    }
    size_t tp = 0;
    for (size_t i = 1; i < w.thread_candidates.size(); ++i) {
      if (score(w.thread_candidates[i]) > score(w.thread_candidates[tp])) tp = i;
    }
    const double tp_score = score(w.thread_candidates[tp]);
    for (size_t i = 0; i < w.thread_candidates.size(); ++i) {
      if (score(w.thread_candidates[i]) >= tp_score * (1 - kTie) &&
          cost(w.thread_candidates[i].setting) < cost(w.thread_candidates[tp].setting)) {
        tp = i;
      }
    }
    const double base = w.candidates[pick].samples_per_s;
    w.threads_gain = base > 0 ? w.thread_candidates[tp].samples_per_s / base : 1;
    w.threads_floor_gain = base > 0 ? floors[tp].samples_per_s / base : 1;
    // Beside workers that keep more threads runnable than there are cores, the advised setting's
    // figure, with all the intra-op threads, rests on the scheduler (their wait for each other,
    // measured from none to many times the region, is priced as no gain from the threads), and the
    // floor is low on the step's side (the step's whole recorded CPU on one thread; the workers'
    // side weighs on both figures alike). One thread has no such wait, so a floor that reaches the
    // two-thread figure needs no margin for noise. Otherwise the one-thread figure
    // itself (the parallel regions' work, where measured: not a floor, docs/decisions.md) must
    // beat the advised setting by min_gain ("One intra-op thread beside busy workers: the floor
    // against the likely-high figure", written before the wait was priced).
    //
    // Beside such workers a tie goes to one thread too, where the advised setting is not the
    // recorded one (whose figure is measured): a one-thread figure within kTie of the uncertain
    // one is no evidence that the intra-op threads help, and one thread keeps fewer
    // threads runnable, as the DataLoader candidates' ties go to the cheaper setting. On the
    // I/O-bound loop (14 workers) the one-thread figure was 0.997 of the two-thread one and its
    // floor 0.996; measured, one thread ran 1.18x ("A tie beside busy workers goes to one intra-op thread").
    if (w.threads_gain >= w.min_gain) {
      w.threads_best = tp;
      w.threads_basis = "gain";
    } else if (gang_beside_busy_workers && w.threads_floor_gain >= 1.0) {
      w.threads_best = tp;
      w.threads_basis = "floor";
    } else if (w.candidates[pick].uncertain && w.threads_gain >= 1 - kTie) {
      w.threads_best = tp;
      w.threads_basis = "tie";
    }
  }
}

}  // namespace whatif_detail
}  // namespace stallscope::analysis
