// The what-if model's simulation: the loader's workers and the training loop, event by event, on
// the usable cores (whatif.h describes the model), and the training loader's time in the window
// under one setting, epoch by epoch (predict).
#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>

#include "analysis/whatif.h"
#include "analysis/whatif_model.h"

namespace stallscope::analysis {
namespace {

// Steps of one epoch simulated step by step (the recorded steps, cycled); a longer epoch's other
// steps go at the simulated steady rate. Enough that the ends of an epoch are a small part, few
// enough that a report stays fast.
constexpr int64_t kMaxDirect = 1500;

enum class Phase : uint8_t { kIdle, kCpu, kGang, kWait, kBlocked };

struct Actor {
  Phase phase = Phase::kIdle;
  double rem = 0;  // seconds of work left in the phase (at full speed)
};

class Sim {
 public:
  Sim(const WhatIfInputs& in, const LoaderSetting& st, int64_t steps)
      : in_(in),
        n_(std::max<int64_t>(0, st.num_workers)),
        limit_(n_ > 0 ? std::max<int64_t>(1, st.prefetch_factor) * n_ : 0),
        steps_(steps),
        cores_(static_cast<double>(std::max<int64_t>(1, in.usable_cores))),
        rec_gang_(static_cast<int>(std::clamp<int64_t>(in.torch_threads, 1, std::max<int64_t>(1, in.usable_cores)))),
        gang_(st.torch_threads > 0 ? static_cast<int>(std::clamp<int64_t>(st.torch_threads, 1, rec_gang_)) : rec_gang_),
        others_k_(std::max(1, gang_ - 1)),
        // Fewer intra-op threads than recorded: the parallel part's work on fewer threads (its
        // recorded wall on all of them, times their count: the CPU it took, spinning included),
        // and only the remaining threads spinning in next().
        gang_scale_(static_cast<double>(rec_gang_) / gang_),
        others_scale_(rec_gang_ > 1 ? static_cast<double>(gang_ - 1) / (rec_gang_ - 1) : 1.0),
        spin_after_gang_(gang_ > 1 && in.spin_window_s > 0),
        workers_(static_cast<size_t>(n_)),
        queues_(static_cast<size_t>(n_)),
        wphase_(static_cast<size_t>(n_), 0),
        wbatch_(static_cast<size_t>(n_), -1),
        ready_(static_cast<size_t>(steps), false),
        hand_(static_cast<size_t>(steps), 0),
        wait_(static_cast<size_t>(steps), 0) {}

  SimResult run() {
    while (sent_ < std::min(limit_, steps_)) send();
    begin_step();
    for (size_t w = 0; w < workers_.size(); ++w) start_worker(w);
    // Bounded: every iteration ends at least one phase, and each step has a bounded number of them.
    for (int64_t guard = 0; handed_ < steps_ && guard < steps_ * (14 + 4 * std::max<int64_t>(n_, 1)); ++guard) {
      if (!advance()) break;
    }
    SimResult r;
    // The last step computes to its end: run the consumer out.
    while (consumer_.phase != Phase::kIdle && advance()) {
    }
    if (handed_ < 2) return r;
    // Steady state: past the start (the queue filling) and before the end (workers run out of
    // batches to fetch, and the last ones come from a full queue).
    int64_t w0 = std::min<int64_t>(handed_ - 2, std::max<int64_t>(limit_ + 2, handed_ / 5));
    int64_t last = std::max<int64_t>(w0 + 1, handed_ - 1 - (limit_ + 2));
    // An epoch too short for a steady state between the two (a queue of prefetch_factor x workers
    // batches that fills for most of it and drains for the rest): the mean over the epoch after
    // its first batch, not a step or two from the drain, where only the step bounds the loop.
    if (handed_ - 1 - (limit_ + 2) <= w0) {
      w0 = 0;
      last = handed_ - 1;
    }
    const double span = hand_[static_cast<size_t>(last)] - hand_[static_cast<size_t>(w0)];
    double waited = 0;
    for (int64_t i = w0 + 1; i <= last; ++i) waited += wait_[static_cast<size_t>(i)];
    r.step_s = span / static_cast<double>(last - w0);
    r.wait_frac = span > 0 ? std::min(1.0, waited / span) : 0;
    r.fill_s = hand_[0];
    r.total_s = now_;
    for (double x : wait_) r.waited_s += x;
    return r;
  }

 private:
  // Consumer phases per step: [fetch cpu, fetch wait] (no workers) or [blocked, recv], then
  // gang, serial cpu, wait. The process's other threads run beside the consumer from the start of
  // next() (others_) until the step begins (with intra-op threads) or their CPU is spent.
  const StepDemand& step_demand(int64_t i) const { return in_.steps[static_cast<size_t>(i) % in_.steps.size()]; }
  const Demand& fetch_demand(int64_t b) const { return in_.fetches[static_cast<size_t>(b) % in_.fetches.size()]; }

  void send() {
    queues_[static_cast<size_t>(sent_ % n_)].push_back(sent_);
    ++sent_;
  }

  void begin_step() {
    cstage_ = 0;
    step_begin_ = now_;
    next_consumer_phase();
  }

  // Moves the consumer to its next phase of the current step (skipping empty ones); at the end of
  // the step, to the next step.
  void next_consumer_phase() {
    while (handed_ < steps_) {
      const StepDemand& d = step_demand(handed_);
      switch (cstage_++) {
        case 0:
          // With the intra-op threads' spin measured, they spin on from the last parallel region
          // (case 5); else the other threads take in next() what they took there when recorded.
          if (!spin_after_gang_) {
            set(&others_, d.others_cpu_s * others_scale_ > 0 ? Phase::kCpu : Phase::kIdle,
                d.others_cpu_s * others_scale_ / others_k_);
          }
          if (n_ == 0) {  // the training thread fetches for itself: no put, no shared memory
            const Demand& f = fetch_demand(handed_);
            // On fewer intra-op threads than recorded, the fetch's parallel regions run on one.
            const double cpu = gang_ < rec_gang_ ? f.on_one_thread() : f.cpu_s;
            set(&consumer_, Phase::kCpu, std::max(0.0, cpu - f.share_cpu_s));
          } else if (!ready_[static_cast<size_t>(handed_)]) {
            consumer_.phase = Phase::kBlocked;
            return;
          } else {
            continue;
          }
          break;
        case 1:
          if (n_ == 0) {
            set(&consumer_, Phase::kWait, fetch_demand(handed_).wait_s);
          } else {
            set(&consumer_, Phase::kCpu, d.recv_cpu_s);
          }
          break;
        case 2: {  // the batch is handed: next() returns
          const size_t i = static_cast<size_t>(handed_);
          hand_[i] = now_;
          wait_[i] = now_ - step_begin_;
          if (n_ > 0 && sent_ < steps_) {
            send();
            for (size_t w = 0; w < workers_.size(); ++w) {
              if (workers_[w].phase == Phase::kIdle) start_worker(w);
            }
          }
          continue;
        }
        case 3:
          // The step begins: its first parallel region ends the intra-op threads' spinning (their
          // spinning inside the step is in the step's recorded CPU) and, if they are asleep,
          // first waits to wake them (the training thread spinning at its barrier). Other threads
          // (T = 1: a pin-memory thread, the user's) go on. With their spin measured, they are
          // asleep when it was spent since the last parallel region; else when next() outlasted
          // it; an unknown spin (0) keeps the step as recorded.
          asleep_ = gang_ > 1 && (spin_after_gang_ ? others_.phase != Phase::kCpu
                                                   : in_.spin_window_s <= 0 || now_ - step_begin_ > in_.spin_window_s);
          if (gang_ > 1) others_.phase = Phase::kIdle;
          // The wake is paid here with the spin measured, else with the serial part (case 5).
          set(&consumer_, Phase::kCpu, spin_after_gang_ && asleep_ ? in_.wake_s : 0);
          break;
        case 4:
          set(&consumer_, Phase::kGang,
              fewer(d) ? d.fewer_gang_work_s / static_cast<double>(gang_) : d.gang_s * gang_scale_);
          break;
        case 5:
          if (spin_after_gang_) {
            // After the parallel region, the intra-op threads spin for their measured spin (CPU)
            // through the rest of the step and the next() after it, until the next step's
            // parallel region: beside workers that keep batches ready they hardly ever sleep, and
            // take cores from them (docs/decisions.md, "The intra-op threads spin on after every
            // step").
            set(&others_, Phase::kCpu, in_.spin_window_s);
          }
          set(&consumer_, Phase::kCpu,
              fewer(d) ? d.fewer_serial_s
                       : d.serial_cpu_s - d.wake_s + (!spin_after_gang_ && asleep_ ? in_.wake_s : 0));
          break;
        case 6: set(&consumer_, Phase::kWait, d.wait_s); break;
        default:
          ++handed_;
          if (handed_ >= steps_) {
            consumer_.phase = Phase::kIdle;
            return;
          }
          cstage_ = 0;
          step_begin_ = now_;
          continue;
      }
      if (consumer_.rem > 0) return;
    }
  }

  static void set(Actor* a, Phase p, double amount) {
    a->phase = p;
    a->rem = std::max(0.0, amount);
  }

  void start_worker(size_t w) {
    while (true) {
      Actor& a = workers_[w];
      if (wbatch_[w] < 0) {
        if (queues_[w].empty()) {
          a.phase = Phase::kIdle;
          return;
        }
        wbatch_[w] = queues_[w].front();
        queues_[w].pop_front();
        wphase_[w] = 0;
      }
      const Demand& d = fetch_demand(wbatch_[w]);
      if (wphase_[w] == 0) {
        set(&a, Phase::kCpu, d.on_one_thread() + d.put_cpu_s);  // a worker runs torch on one thread
      } else if (wphase_[w] == 1) {
        set(&a, Phase::kWait, d.wait_s);
      } else {
        ready_[static_cast<size_t>(wbatch_[w])] = true;
        if (consumer_.phase == Phase::kBlocked && wbatch_[w] == handed_) {
          consumer_.phase = Phase::kIdle;
          pending_consumer_ = true;
        }
        wbatch_[w] = -1;
        continue;
      }
      ++wphase_[w];
      if (a.rem > 0) return;
    }
  }

  // Rates of progress given who is runnable: each of R runnable threads gets min(1, P/R) of a
  // core. Once threads outnumber the cores, the consumer's parallel part gains nothing from its T
  // threads: the scheduler does not run them together, so the part's work (its wall on T threads,
  // times T) is done at one thread's share, P/R, while all T threads hold their shares, those
  // that finished first spinning at the region's barrier (docs/decisions.md, "The intra-op
  // threads beside busy workers: no gain from the threads").
  bool advance() {
    if (pending_consumer_) {
      pending_consumer_ = false;
      next_consumer_phase();
    }
    double runnable = 0;
    auto count = [&](const Actor& a) {
      if (a.phase == Phase::kCpu) runnable += 1;
      if (a.phase == Phase::kGang) runnable += gang_;
    };
    count(consumer_);
    if (others_.phase == Phase::kCpu) runnable += others_k_;
    for (const Actor& a : workers_) count(a);
    const double share = runnable > cores_ ? cores_ / runnable : 1.0;
    const double gang_rate = runnable > cores_ && gang_ > 1 ? share / gang_ : share;
    auto rate = [&](const Actor& a) {
      switch (a.phase) {
        case Phase::kCpu: return share;
        case Phase::kGang: return gang_rate;
        case Phase::kWait: return 1.0;
        default: return 0.0;
      }
    };
    double dt = std::numeric_limits<double>::infinity();
    auto consider = [&](const Actor& a) {
      const double r = rate(a);
      if (r > 0) dt = std::min(dt, a.rem / r);
    };
    consider(consumer_);
    consider(others_);
    for (const Actor& a : workers_) consider(a);
    if (!std::isfinite(dt)) return false;  // nothing can move: a deadlock the model does not have
    now_ += dt;
    auto progress = [&](Actor& a) {
      const double r = rate(a);
      if (r > 0) a.rem -= r * dt;
    };
    progress(consumer_);
    progress(others_);
    for (Actor& a : workers_) progress(a);
    constexpr double kEps = 1e-12;
    if (others_.phase == Phase::kCpu && others_.rem <= kEps) others_.phase = Phase::kIdle;
    for (size_t w = 0; w < workers_.size(); ++w) {
      Actor& a = workers_[w];
      if ((a.phase == Phase::kCpu || a.phase == Phase::kWait) && a.rem <= kEps) start_worker(w);
    }
    const bool consumer_done =
        (consumer_.phase == Phase::kCpu || consumer_.phase == Phase::kGang || consumer_.phase == Phase::kWait) &&
        consumer_.rem <= kEps;
    if (consumer_done || pending_consumer_) {
      pending_consumer_ = false;
      next_consumer_phase();
    }
    return true;
  }

  // Fewer intra-op threads than recorded, and the step's parallel regions measured: its serial
  // part and its regions' work (StepDemand::fewer_*), not its CPU above the wall.
  bool fewer(const StepDemand& d) const { return gang_ < rec_gang_ && d.fewer_gang_work_s >= 0; }

  const WhatIfInputs& in_;
  const int64_t n_, limit_, steps_;
  const double cores_;
  const int rec_gang_;  // intra-op threads recorded
  const int gang_;      // and simulated
  const int others_k_;  // threads the others' CPU is spread over: the intra-op threads but one
  const double gang_scale_, others_scale_;
  // The intra-op threads' spin after a parallel region is known (WhatIfInputs::spin_window_s):
  // others_ is their spin from each region's end, not the recorded CPU of the next() calls.
  const bool spin_after_gang_;
  bool asleep_ = false;  // the current step's intra-op threads were asleep when it began
  Actor consumer_, others_;
  int cstage_ = 0;
  bool pending_consumer_ = false;
  double now_ = 0, step_begin_ = 0;
  int64_t handed_ = 0, sent_ = 0;
  std::vector<Actor> workers_;
  std::vector<std::deque<int64_t>> queues_;
  std::vector<int> wphase_;
  std::vector<int64_t> wbatch_;
  std::vector<bool> ready_;
  std::vector<double> hand_, wait_;
};

}  // namespace

SimResult simulate(const WhatIfInputs& in, const LoaderSetting& setting, int64_t steps) {
  if (in.steps.empty() || in.fetches.empty() || steps < 2) return {};
  return Sim(in, setting, steps).run();
}

namespace whatif_detail {

Predicted predict(const WhatIfInputs& in, const LoaderSetting& st, int64_t n_rec) {
  Predicted p;
  const double cores = static_cast<double>(std::max<int64_t>(1, in.usable_cores));
  // Starting n workers. Forked ones are created one after another in __iter__: each one more adds
  // its creation (WhatIfInputs::startup_per_worker_s). Spawned ones (and a forkserver's) spend their
  // start-up importing torch, side by side on the cores, at most P at once: the recorded start-up
  // scaled to n.
  const double rec_scale = std::max(1.0, static_cast<double>(std::max<int64_t>(1, n_rec)) / cores);
  const double scale = std::max(1.0, static_cast<double>(st.num_workers) / cores);
  double startup = 0;
  if (st.num_workers > 0 && in.startup_per_worker_s > 0) {
    const double more = static_cast<double>(st.num_workers - std::max<int64_t>(1, in.startup_workers));
    startup = std::max(in.startup_per_worker_s, in.startup_s + more * in.startup_per_worker_s);
  } else if (st.num_workers > 0) {
    startup = in.startup_s * scale / rec_scale;
  }
  // An epoch is simulated whole (its first batch, the steady state and the last batches from a
  // full queue); a long one is simulated for kMaxDirect steps and the rest at the steady rate.
  std::map<int64_t, SimResult> by_batches;
  for (size_t e = 0; e < in.batches_per_epoch.size(); ++e) {
    const int64_t batches = in.batches_per_epoch[e];
    if (batches <= 0) continue;
    const int64_t direct = std::min(batches, kMaxDirect);
    auto it = by_batches.find(direct);
    if (it == by_batches.end()) it = by_batches.emplace(direct, simulate(in, st, std::max<int64_t>(direct, 2))).first;
    const SimResult& sim = it->second;
    const double rest = static_cast<double>(batches - direct);
    const bool starts = st.num_workers > 0 && (e == 0 || !st.persistent_workers);
    const double fork_step = e == 0 ? in.fork_first_step_s : in.fork_step_s;
    const double edge =
        (starts ? startup + fork_step : 0) + (st.num_workers > 0 && !st.persistent_workers ? in.shutdown_s : 0);
    p.train_s += edge + sim.total_s + rest * sim.step_s;
    p.wait_s += edge + sim.waited_s + rest * sim.step_s * sim.wait_frac;
    p.step_s = sim.step_s;
  }
  return p;
}

}  // namespace whatif_detail
}  // namespace stallscope::analysis
