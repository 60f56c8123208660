// The what-if model: inputs from the recording, the event-by-event simulation of the loader and the
// training loop, and the candidate settings. See whatif.h and docs/report.md ("What-if model").
#include "analysis/whatif.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "analysis/format.h"
#include "analysis/report.h"
#include "analysis/stats.h"
#include "common/json.h"

namespace stallscope::analysis {
namespace {

constexpr double kNs = 1e9;
// Candidates whose predicted samples/s lie within this share of the best count as tied; among
// them the advice takes the one that costs least (fewest workers, the recorded prefetch and
// persistence, the smallest prefetch): a setting is not worth more processes for a gain the model
// cannot tell from noise.
constexpr double kTie = 0.02;
// The least gain worth advising, before the model's own fit error is added: below it a rerun's
// noise on a busy machine hides the change (docs/report.md).
constexpr double kMinGain = 0.05;
// What each worker beyond the usable cores must gain to be advised, when the fetch is all CPU work
// (scaled by the fetch's CPU share: waiting workers need no core).
constexpr double kOversubscribedPrice = 0.05;
// Steps of one epoch simulated step by step (the recorded steps, cycled); a longer epoch's other
// steps go at the simulated steady rate. Enough that the ends of an epoch are a small part, few
// enough that a report stays fast.
constexpr int64_t kMaxDirect = 1500;
// Recorded without workers, what starting them costs was not seen: per epoch whose workers start,
// the model takes these, lower than measured on a 2-core VM (torch 2.13, an empty dataset: 45-50 ms
// to the first batch for 1-2 forked workers; 1.7-2.8 s spawned or from a forkserver, which import
// torch afresh). A loop whose epochs are shorter than this is not advised workers
// (docs/decisions.md, "Starting workers that were not recorded").
constexpr double kForkStartupS = 0.03;
constexpr int64_t kForkStartupWorkers = 2;  // kForkStartupS is for this many workers
// Forked workers are created one after another in __iter__ (fork, then the Process's own
// bookkeeping), so each one more adds to the start-up; 4.1 ms apart on a fast day of the same VM
// (8 workers, a process of torch 2.13), priced a little above (docs/decisions.md, "Starting forked
// workers: one after another"). Recorded with 2 or more forked workers, the spacing of their
// births is measured instead.
constexpr double kForkPerWorkerS = 0.005;
constexpr double kFreshStartupS = 1.0;
// Recorded without workers, what handing a batch over costs was not seen either: the training
// thread receiving it (unpickling it, fetching each tensor's shared memory from the worker over its
// own connection and mapping it) and the worker putting it (pickling it, sharing each tensor). Both
// follow the batch's tensors and bytes (dl.batch), and the machine: on the same 2-core VM, with
// workers computing beside them, a batch of 2 tensors took 1.45-1.95 ms to receive and 1.6-2.9 ms
// more in the worker on a slow day, 0.45-0.55 and 0.18-0.26 ms on a fast one. The figures below lie
// between the two, within about 2x of each, so that neither kind of machine is told its workers
// cost several times what they do. docs/decisions.md, "Handing a batch over, priced by its layout"
// and "The hand-off's price between a slow and a fast machine". A loop without dl.batch (recorded
// before it) takes the receive below and no put, as before.
constexpr double kRecvPerTensorS = 0.0004;
constexpr double kRecvPerMbS = 0.0001;
constexpr double kPutPerTensorS = 0.0004;
constexpr double kRecvEstimateS = 0.0002;
// Recorded with workers, what a worker's collate costs beyond the same collate in the training
// process: torch's default_collate gives each output tensor a shared-memory segment of its own
// there (made, sized, mapped, its pages touched). bench/collate_cost.py measured 0.11-0.18 ms per
// output tensor for small tensors and 1.2-1.6 ms per MB for large ones on a 2-core VM
// (docs/decisions.md, "A worker's collate into shared memory, taken off for no workers"). The
// estimate is held to the collate recorded in the worker, so that a faster machine's smaller cost
// is overstated by no more than what the collate itself costs in the training process.
constexpr double kSharePerTensorS = 0.00015;
constexpr double kSharePerMbS = 0.0012;

double mean_of(const std::vector<double>& v) { return mean(v).value_or(0); }

// Batches the training loader handed in the window's epochs.
double handed_batches(const WhatIfInputs& in) {
  double n = 0;
  for (int64_t b : in.batches_per_epoch) n += static_cast<double>(b);
  return n;
}

// [SECTION] simulation
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
            set(&consumer_, Phase::kCpu, std::max(0.0, f.cpu_s - f.share_cpu_s));
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
        set(&a, Phase::kCpu, d.cpu_s + d.put_cpu_s);
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

// [SECTION] inputs from the recording
struct CpuMark {
  int64_t ts = 0;
  int64_t in_us = 0, before_us = -1;
  int64_t others_us = 0;  // training thread only: the process's other threads inside next()
};

// dl.parallel on the training thread: torch's parallel regions in the step before a marked call.
struct ParMark {
  int64_t ts = 0;
  int64_t body_us = 0, wall_us = 0;
};

// dl.cpu instants by pid (worker processes) and on the training thread; dl.parallel on the latter.
struct CpuMarks {
  std::vector<CpuMark> train;
  std::unordered_map<int64_t, std::vector<CpuMark>> by_pid;
  std::vector<ParMark> par;
};

CpuMarks cpu_marks(const Session& s, const DataLoaderModel& m) {
  CpuMarks out;
  for (const InstantRow& in : s.instants) {
    const vocab::Event e = s.event(in.name_id);
    if (e == vocab::Event::kDlParallel && in.thread_id == m.train_thread_id && in.arg0 && in.arg1 && *in.arg0 >= 0 &&
        *in.arg1 >= 0) {
      out.par.push_back({in.ts_ns, *in.arg0, *in.arg1});
      continue;
    }
    if (e != vocab::Event::kDlCpu || !in.arg1) continue;
    CpuMark mark{in.ts_ns, *in.arg1, in.arg2.value_or(-1)};
    if (in.thread_id == m.train_thread_id) {
      mark.others_us = std::max<int64_t>(0, in.arg0.value_or(0));
      out.train.push_back(mark);
    } else {
      out.by_pid[s.pid_of_thread(in.thread_id)].push_back(mark);
    }
  }
  return out;
}

// The mark written right after a span that ended at `end` (and before `limit`), if any: a dl.cpu
// (CpuMark) or the dl.parallel written right after one (ParMark).
template <class Mark>
const Mark* mark_after(const std::vector<Mark>& marks, int64_t end, int64_t limit) {
  auto it = std::lower_bound(marks.begin(), marks.end(), end, [](const Mark& c, int64_t t) { return c.ts < t; });
  if (it == marks.end() || it->ts > limit) return nullptr;
  return &*it;
}

// One step of the training loop between two next() calls of the training loader (seconds).
struct RawStep {
  double gap = 0, gap_cpu = -1, next_wall = 0, next_cpu = -1, next_others = 0;
  // torch's parallel regions in the step (dl.parallel): their wall and their bodies' time (-1: not
  // measured; 0: none ran, where the recording measures them).
  double par_wall = -1, par_body = -1;
  double prev_wall = 0, prev_others = -1;  // the next() before the step, its other threads' CPU
  bool beside_startup = false;             // a worker of the loader was starting meanwhile
  bool after_fork = false;                 // the first step of an epoch whose workers were forked
  bool first_fork = false;                 // that epoch is the loader's first (its first workers)
};

// Steps that began by waking torch's intra-op threads (docs/decisions.md, "A step after a long
// next() wakes the intra-op threads"). After a parallel region those threads spin, then sleep; a
// next() that outlasts their spin (its other threads' CPU well under its wall) leaves them asleep,
// and the next step's first parallel region waits, spinning on the training thread, until they
// run again. On a 2-core VM that took 10-24 ms in a quarter to over half of such steps, against
// 1-2 ms for the rest. Such a step is told by its CPU: one thread's worth (the intra-op threads did
// not run beside it) and a wall over twice the median of the steps after a sleep that did not
// wait, the excess being the wake. With batches ready, the threads still spin when the step begins and it is not paid.
void find_wakes(const std::vector<RawStep>& raw, int64_t threads, WhatIfInputs* in) {
  if (threads < 2 || raw.size() != in->steps.size()) return;
  const double k = static_cast<double>(threads - 1);
  std::vector<double> spins, gaps;
  std::vector<bool> slept(raw.size(), false);
  for (size_t j = 0; j < raw.size(); ++j) {
    const RawStep& st = raw[j];
    if (st.prev_others < 0) continue;
    const double spin = st.prev_others / k;
    if (st.prev_wall > 1.5 * spin + 0.0005) {
      slept[j] = true;
      spins.push_back(spin);
      gaps.push_back(st.gap);
    }
  }
  // Only where sleeping between steps is the rule: a few long calls tell too little.
  if (spins.size() < 5 || spins.size() * 5 < raw.size()) return;
  std::sort(spins.begin(), spins.end());
  std::sort(gaps.begin(), gaps.end());
  const double window = percentile(spins, 50).value_or(0);
  // The steps after a sleep in two groups, split where the spread of log(wall) within them is
  // least (Otsu's threshold): those that did not wait and those that did. Wakes were from a
  // quarter to over half of such steps in three recordings, so neither a median nor a fixed
  // quantile finds the steps that did not wait.
  std::vector<double> lg;
  for (double g : gaps) lg.push_back(std::log(std::max(g, 1e-7)));
  const size_t n = lg.size();
  double total = 0;
  for (double x : lg) total += x;
  double best = -1, head = 0;
  size_t split = 0;  // gaps[0, split) did not wait
  for (size_t i = 1; i < n; ++i) {
    head += lg[i - 1];
    const double a = static_cast<double>(i), b = static_cast<double>(n - i);
    const double d = head / a - (total - head) / b;
    const double between = a * b * d * d;
    if (between > best) {
      best = between;
      split = i;
    }
  }
  // The lower group must be a real part of the steps (a wake is then a step over twice its median):
  // at least 5 steps and a tenth of them. On a fast day of the same VM 85 % of the steps after a
  // sleep waited (docs/decisions.md, "The hand-off's price between a slow and a fast machine").
  if (split < 5 || split * 10 < n) return;
  std::vector<double> low(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(split));
  const double typical = percentile(low, 50).value_or(0);
  if (window <= 0 || typical <= 0) return;
  double sum = 0;
  int64_t after_sleep = 0;
  for (size_t j = 0; j < raw.size(); ++j) {
    after_sleep += slept[j] ? 1 : 0;
    const RawStep& st = raw[j];
    const bool one_thread = st.gap_cpu >= 0 && st.gap_cpu <= 1.15 * st.gap;
    if (!slept[j] || !one_thread || st.gap <= 2 * typical) continue;
    StepDemand& d = in->steps[j];
    d.wake_s = std::min(d.serial_cpu_s, st.gap - typical);
    sum += d.wake_s;
  }
  in->spin_window_s = window;
  in->wake_s = sum / static_cast<double>(after_sleep);
}

struct Built {
  WhatIfInputs in;
  bool from_marks = true;  // CPU split from dl.cpu (else from /proc means)
  std::string why_not;
};

// The consumer's steps and the batches' fetches of loader `l`, as demands.
Built build_inputs(const Session& s, const DataLoaderModel& m, const Report& r, const LoaderStats& l,
                   const LoaderInfo& li) {
  Built b;
  WhatIfInputs& in = b.in;
  const int64_t n_rec = l.num_workers.value_or(0);
  in.usable_cores = r.usable_cores.value_or(r.cpu_count.value_or(1));
  in.torch_threads = json::get_int(l.config.doc, "torch_threads").value_or(in.usable_cores);
  const CpuMarks marks = cpu_marks(s, m);
  b.from_marks = !marks.train.empty();

  // The training thread's next() calls in time order, and which are this loader's.
  std::vector<const NextCall*> calls;
  for (const NextCall& c : m.next_calls) {
    if (c.ended) calls.push_back(&c);
  }
  const double train_cpu = r.train_cpu_util.value_or(1.0);
  // The loader's workers' start-ups (birth to ready): a step beside one is not a steady step. The
  // first batch of an epoch can come from one worker while another still starts (spawned workers
  // import torch for seconds), and the steps then share the cores with it; the model prices
  // start-up apart, per epoch.
  std::vector<Interval> starting;
  for (const WorkerInfo& w : m.workers) {
    if (w.loader == l.id && w.thread_id == 0 && w.ready_ns) starting.push_back({w.start_ns, *w.ready_ns});
  }
  starting = merge_intervals(std::move(starting));  // disjoint, in time order
  auto beside_startup = [&](int64_t a, int64_t b) {
    // The first start-up that ends after a: it overlaps [a, b) if it begins before b.
    auto it =
        std::upper_bound(starting.begin(), starting.end(), a, [](int64_t t, const Interval& iv) { return t < iv.end; });
    return it != starting.end() && it->begin < b;
  };
  // The first step after forking workers: the fork left the training process's memory shared with
  // them, copy-on-write, and the step's first writes to each page of its weights, gradients and
  // optimizer state copy it (docs/decisions.md, "The first step after forking workers"). Not a
  // steady step: its excess is priced per epoch whose workers are forked (predict()).
  const std::string method = l.config.worker_start_method.value_or("fork");
  const bool forked = method != "spawn" && method != "forkserver";
  std::vector<bool> first_of_epoch(calls.size(), false);
  {
    std::set<int64_t> seen;
    for (size_t k = 0; k < calls.size(); ++k) {
      if (calls[k]->loader == l.id) first_of_epoch[k] = seen.insert(calls[k]->epoch).second;
    }
  }
  auto workers_started_in = [&](int64_t epoch) {
    const auto it = li.epochs.find(epoch);
    return it != li.epochs.end() && it->second.workers_started > 0;
  };
  std::vector<RawStep> raw;
  for (size_t k = 1; k < calls.size(); ++k) {
    const NextCall& c = *calls[k];
    const NextCall& prev = *calls[k - 1];
    if (c.loader != l.id || prev.loader != l.id || !c.handed() || !prev.handed() || c.epoch != prev.epoch) continue;
    if (c.start_ns < r.window_start_ns || c.end_ns > r.window_end_ns) continue;
    RawStep st;
    st.beside_startup = beside_startup(prev.end_ns, c.start_ns);
    st.after_fork = forked && n_rec > 0 && first_of_epoch[k - 1] && workers_started_in(prev.epoch);
    st.first_fork = st.after_fork && prev.epoch == 0;
    st.gap = static_cast<double>(c.start_ns - prev.end_ns) / kNs;
    st.next_wall = static_cast<double>(c.end_ns - c.start_ns) / kNs;
    const int64_t limit = k + 1 < calls.size() ? calls[k + 1]->start_ns : std::numeric_limits<int64_t>::max();
    st.prev_wall = static_cast<double>(prev.end_ns - prev.start_ns) / kNs;
    if (const CpuMark* mk = mark_after(marks.train, prev.end_ns, c.start_ns)) {
      st.prev_others = static_cast<double>(mk->others_us) / 1e6;
    }
    if (const CpuMark* mk = mark_after(marks.train, c.end_ns, limit)) {
      st.next_cpu = static_cast<double>(mk->in_us) / 1e6;
      st.next_others = static_cast<double>(mk->others_us) / 1e6;
      if (mk->before_us >= 0) {
        st.gap_cpu = static_cast<double>(mk->before_us) / 1e6;
        // dl.parallel follows its dl.cpu when regions ran over the same stretch (the step).
        if (!marks.par.empty()) {
          const ParMark* p = mark_after(marks.par, mk->ts, limit);
          st.par_wall = p != nullptr ? static_cast<double>(p->wall_us) / 1e6 : 0;
          st.par_body = p != nullptr ? static_cast<double>(p->body_us) / 1e6 : 0;
        }
      }
    }
    raw.push_back(st);
  }
  // Left out unless too few steps remain.
  if (std::count_if(raw.begin(), raw.end(), [](const RawStep& st) { return !st.beside_startup; }) >= 3) {
    std::erase_if(raw, [](const RawStep& st) { return st.beside_startup; });
  }
  // The first steps after forking workers, apart: what each took beyond the steady steps' mean
  // (which the simulation gives each step it stands for, so the recorded total is kept).
  if (std::count_if(raw.begin(), raw.end(), [](const RawStep& st) { return !st.after_fork; }) >= 3) {
    std::vector<double> steady;
    for (const RawStep& st : raw) {
      if (!st.after_fork) steady.push_back(st.gap);
    }
    const double typical = mean_of(steady);
    // The loader's first workers are forked before the first step has made the gradients and the
    // optimizer's state: less memory to copy than at the later epochs' forks.
    std::vector<double> first, later;
    for (const RawStep& st : raw) {
      if (st.after_fork) (st.first_fork ? first : later).push_back(std::max(0.0, st.gap - typical));
    }
    in.fork_first_step_s = mean_of(first.empty() ? later : first);
    in.fork_step_s = mean_of(later.empty() ? first : later);
    std::erase_if(raw, [](const RawStep& st) { return st.after_fork; });
  }
  if (raw.size() < 3) {
    b.why_not = "fewer than 3 steady steps of the training loader were recorded";
    return b;
  }
  // Loops faster than the hooks' mark gap are sampled (about one marked next() per millisecond,
  // hooks/_main.py): a step without a mark takes the marked steps' CPU per second of wall time,
  // the call's and the step's apart.
  double marked_wall = 0, marked_cpu = 0, marked_others = 0, gap_wall = 0, gap_cpu = 0;
  double par_gap = 0, par_wall = 0, par_body = 0;  // steps whose parallel regions were measured
  for (const RawStep& st : raw) {
    if (st.par_wall >= 0) {
      par_gap += st.gap;
      par_wall += st.par_wall;
      par_body += st.par_body;
    }
    if (st.next_cpu >= 0) {
      marked_wall += st.next_wall;
      marked_cpu += st.next_cpu;
      marked_others += st.next_others;
    }
    if (st.gap_cpu >= 0) {
      gap_wall += st.gap;
      gap_cpu += st.gap_cpu;
    }
  }
  for (RawStep& st : raw) {
    if (st.next_cpu < 0 && marked_wall > 0) {
      st.next_cpu = st.next_wall * marked_cpu / marked_wall;
      st.next_others = st.next_wall * marked_others / marked_wall;
    }
    if (st.gap_cpu < 0 && gap_wall > 0) st.gap_cpu = st.gap * gap_cpu / gap_wall;
    if (st.par_wall < 0 && par_gap > 0) {
      st.par_wall = st.gap * par_wall / par_gap;
      st.par_body = st.gap * par_body / par_gap;
    }
  }

  // Contention from the loader's own workers while recording: the training process's run-queue
  // delay (its threads summed, per second) spread over its compute, per thread; the simulation
  // adds back what the candidate's workers cause. Without workers the delay comes from elsewhere
  // (the process's own threads, other programs) and is left in: it will be there again.
  double gap_total = 0;
  for (const RawStep& st : raw) gap_total += st.gap;
  const double runq = n_rec > 0 ? r.train_runq_delay_fraction.value_or(0) * r.wall_s : 0.0;
  const int64_t T = std::clamp<int64_t>(in.torch_threads, 1, in.usable_cores);

  // The batch's layout (dl.batch). Handing a batch over, recorded without workers, is estimated
  // from it; recorded with workers, so is the collate into shared memory (below).
  double recv_estimate = kRecvEstimateS, put_estimate = 0;
  if (li.batch_tensors && li.batch_bytes) {
    in.batch_tensors = *li.batch_tensors;
    in.batch_bytes = *li.batch_bytes;
  }
  if (n_rec == 0) {
    in.handoff_estimated = true;
    if (in.batch_tensors >= 0) {  // the layout, read above
      const double t = static_cast<double>(in.batch_tensors), mb = static_cast<double>(in.batch_bytes) / 1e6;
      recv_estimate = kRecvPerTensorS * t + kRecvPerMbS * mb;
      put_estimate = kPutPerTensorS * t;
    }
  }

  std::vector<double> c_ms, ccpu_ms, recv_ms, others_ms;
  for (const RawStep& st : raw) {
    const double c = st.gap;
    double w = st.gap_cpu >= 0 ? st.gap_cpu : c * train_cpu;
    const double par = c > 0 ? std::max(1.0, w / c) : 1.0;
    const double q = gap_total > 0 ? std::min(0.9, runq / gap_total / par) : 0.0;
    const double c0 = std::max(w / static_cast<double>(T), c * (1 - q));
    StepDemand d;
    if (w >= c0 && T > 1) {
      const double x = std::clamp((w - c0) / static_cast<double>(T - 1), 0.0, c0);
      d.gang_s = x;
      d.serial_cpu_s = c0 - x;
      // Measured inside torch's parallel regions: what fewer threads would run. The threads spin
      // between regions, so the CPU above the wall (x) takes the whole step for parallel work when
      // steps follow each other closely (docs/decisions.md, "The wide-MLP loops' misses in the
      // advice bench"); the regions' own figures, scaled as the step is, do not.
      if (st.par_wall >= 0 && c > 0) {
        const double k = c0 / c;
        const double region = std::clamp(st.par_wall * k, 0.0, c0);
        d.fewer_serial_s = c0 - region;
        // The bodies are timed by the wall clock, and a thread preempted inside one counts the
        // wait: the work is at most the step's recorded CPU, which holds the spinning instead.
        d.fewer_gang_work_s = std::clamp(st.par_body * k, 0.0, std::max(0.0, w - d.fewer_serial_s));
      }
    } else {
      w = std::min(w, c0);
      d.serial_cpu_s = w;
      d.wait_s = c0 - w;
    }
    d.recv_cpu_s = n_rec > 0 ? (st.next_cpu >= 0 ? std::min(st.next_cpu, st.next_wall) : 0) : recv_estimate;
    // At most every other thread busy for the whole call.
    d.others_cpu_s = std::min(st.next_others, st.next_wall * static_cast<double>(std::max<int64_t>(1, T - 1)));
    in.steps.push_back(d);
    others_ms.push_back(d.others_cpu_s * 1e3);
    c_ms.push_back(c * 1e3);
    ccpu_ms.push_back(st.gap_cpu >= 0 ? st.gap_cpu * 1e3 : c * train_cpu * 1e3);
    recv_ms.push_back(d.recv_cpu_s * 1e3);
  }
  find_wakes(raw, T, &in);
  if (par_gap > 0) {
    std::vector<double> pw, pb;
    for (const RawStep& st : raw) {
      pw.push_back(st.par_wall * 1e3);
      pb.push_back(st.par_body * 1e3);
    }
    in.parallel_ms = mean_of(pw);
    in.parallel_body_ms = mean_of(pb);
  }
  in.compute_ms = mean_of(c_ms);
  in.compute_cpu_ms = mean_of(ccpu_ms);
  in.recv_cpu_ms = mean_of(recv_ms);
  in.others_cpu_ms = mean_of(others_ms);

  // Fetches: the main thread's next() calls (no workers), else the workers' dl.fetch spans with
  // their dl.cpu marks, less the run-queue delay the worker saw while fetching.
  std::vector<double> f_ms, fcpu_ms, put_ms, share_ms;
  if (n_rec == 0) {
    for (const RawStep& st : raw) {
      Demand d;
      const double cpu = st.next_cpu >= 0 ? st.next_cpu : st.next_wall * std::min(1.0, train_cpu);
      d.cpu_s = std::min(cpu, st.next_wall);
      d.wait_s = st.next_wall - d.cpu_s;
      d.put_cpu_s = put_estimate;
      in.fetches.push_back(d);
      f_ms.push_back(st.next_wall * 1e3);
      fcpu_ms.push_back(d.cpu_s * 1e3);
    }
  } else {
    std::unordered_map<int64_t, double> worker_runq;  // pid -> run-queue seconds per busy second
    std::unordered_map<int64_t, double> worker_cpu;   // pid -> cores while alive (fallback)
    for (const WorkerStats& w : r.workers) {
      if (w.loader != l.id || w.thread) continue;
      if (w.runq_delay_fraction && w.busy_s > 0) {
        worker_runq[w.pid] = std::min(0.9, *w.runq_delay_fraction * w.life_s / w.busy_s);
      }
      if (w.cpu_util && w.busy_s > 0) worker_cpu[w.pid] = std::min(1.0, *w.cpu_util * w.life_s / w.busy_s);
    }
    // In batch order (epoch, batch): the order the sampler hands them out, which the simulation
    // replays; workers finish them in another order.
    std::vector<const FetchInfo*> order;
    for (const FetchInfo& f : m.fetches) order.push_back(&f);
    std::stable_sort(order.begin(), order.end(), [](const FetchInfo* a, const FetchInfo* b) {
      return std::make_pair(a->epoch, a->batch) < std::make_pair(b->epoch, b->batch);
    });
    for (const FetchInfo* fp : order) {
      const FetchInfo& f = *fp;
      if (f.loader != l.id || f.worker_index < 0) continue;
      if (f.start_ns < r.window_start_ns || f.end_ns > r.window_end_ns) continue;
      const WorkerInfo& w = m.workers[static_cast<size_t>(f.worker_index)];
      if (w.thread_id != 0) continue;
      const double wall = static_cast<double>(f.end_ns - f.start_ns) / kNs;
      double cpu = -1, put = 0;
      auto mk = marks.by_pid.find(w.pid);
      if (mk != marks.by_pid.end()) {
        if (const CpuMark* c = mark_after(mk->second, f.end_ns, f.end_ns + 50'000'000)) {
          cpu = static_cast<double>(c->in_us) / 1e6;
          // The CPU between this fetch's end and the worker's next one: its put.
          if (const CpuMark* nx = mark_after(mk->second, c->ts + 1, std::numeric_limits<int64_t>::max());
              nx && nx->before_us >= 0) {
            put = static_cast<double>(nx->before_us) / 1e6;
          }
        }
      }
      if (cpu < 0) {
        auto wc = worker_cpu.find(w.pid);
        cpu = wall * (wc == worker_cpu.end() ? 1.0 : wc->second);
      }
      auto q = worker_runq.find(w.pid);
      const double delay = q == worker_runq.end() ? 0.0 : q->second * wall;
      Demand d;
      d.cpu_s = std::min(cpu, wall);
      d.put_cpu_s = put;
      d.wait_s = std::max(0.0, wall - d.cpu_s - delay);
      if (in.batch_tensors >= 0 && in.batch_bytes >= 0) {  // the collate into shared memory
        const double est = kSharePerTensorS * static_cast<double>(in.batch_tensors) +
                           kSharePerMbS * static_cast<double>(in.batch_bytes) / 1e6;
        const double collate = f.collate_ns ? static_cast<double>(*f.collate_ns) / kNs : d.cpu_s;
        d.share_cpu_s = std::clamp(std::min(est, collate), 0.0, d.cpu_s);
      }
      share_ms.push_back(d.share_cpu_s * 1e3);
      in.fetches.push_back(d);
      f_ms.push_back(wall * 1e3);
      fcpu_ms.push_back((d.cpu_s + d.put_cpu_s) * 1e3);
      put_ms.push_back(put * 1e3);
    }
    if (in.fetches.empty()) {
      b.why_not = "the workers' fetches were not recorded";
      return b;
    }
  }
  in.fetch_ms = mean_of(f_ms);
  in.fetch_cpu_ms = mean_of(fcpu_ms);
  in.put_cpu_ms = n_rec > 0 ? mean_of(put_ms) : put_estimate * 1e3;
  in.share_cpu_ms = mean_of(share_ms);

  // Epochs of the training loader in the window, their batches, and what starting and stopping
  // workers cost per epoch at the recorded num_workers.
  std::map<int64_t, int64_t> first_fetch;  // epoch -> the first dl.fetch start of the loader's workers
  for (const FetchInfo& f : m.fetches) {
    if (f.loader != l.id || f.worker_index < 0) continue;
    auto [it, added] = first_fetch.emplace(f.epoch, f.start_ns);
    if (!added) it->second = std::min(it->second, f.start_ns);
  }
  double startup_sum = 0, shutdown_sum = 0;
  int startups = 0, shutdowns = 0;
  for (const auto& [e, info] : li.epochs) {
    if (!info.begin_ns || !info.last_next_end_ns || *info.begin_ns < r.window_start_ns - 1) {
      // An epoch begun before the window (attach) counts from its first next().
      if (!(info.first_next_ns && info.last_next_end_ns && *info.first_next_ns >= r.window_start_ns)) continue;
    }
    const int64_t begin = info.begin_ns && *info.begin_ns >= r.window_start_ns ? *info.begin_ns : *info.first_next_ns;
    in.train_s += static_cast<double>(*info.last_next_end_ns - begin) / kNs;
    in.batches_per_epoch.push_back(info.handed);
    ++in.epochs;
    // Start-up: from __iter__ to the first fetch of the epoch's new workers (creating them,
    // their boot and imports).
    if (n_rec > 0 && info.workers_started > 0 && info.begin_ns) {
      const auto first = first_fetch.find(e);
      if (first != first_fetch.end()) {
        startup_sum += static_cast<double>(std::max<int64_t>(0, first->second - *info.begin_ns)) / kNs;
        ++startups;
      }
    }
  }
  if (n_rec > 0 && l.shutdown_s > 0) {
    for (const WorkerInfo& w : m.workers) {
      if (w.loader == l.id && w.stop_ns && w.worker_id == 0) ++shutdowns;
    }
    shutdown_sum = l.shutdown_s;
  }
  in.startup_s = startups > 0 ? startup_sum / startups : 0;
  in.startup_workers = n_rec;
  if (n_rec == 0) {
    in.startup_estimated = true;
    in.startup_method = method;
    in.startup_s = forked ? kForkStartupS : kFreshStartupS;
    in.startup_workers = forked ? kForkStartupWorkers : 0;
  }
  if (forked) {
    // The spacing of the births of an epoch's new workers (their processes rows: their
    // dl.worker_start instants come together, once torch's __iter__ has created them all), created
    // in the order of their ids; averaged over the epochs that started two or more.
    std::map<int64_t, std::map<int32_t, int64_t>> births;  // epoch -> worker id -> birth
    for (const WorkerInfo& w : m.workers) {
      if (w.loader == l.id && w.thread_id == 0 && w.birth_ns) births[w.start_epoch][w.worker_id] = *w.birth_ns;
    }
    double spacing = 0;
    int spaced = 0;
    for (const auto& [e, by_id] : births) {
      if (by_id.size() < 2) continue;
      const auto& [first_id, first] = *by_id.begin();
      const auto& [last_id, last] = *by_id.rbegin();
      spacing +=
          static_cast<double>(std::max<int64_t>(0, last - first)) / kNs / static_cast<double>(last_id - first_id);
      ++spaced;
    }
    in.startup_per_worker_s = spaced > 0 ? spacing / spaced : kForkPerWorkerS;
  }
  in.shutdown_s = shutdowns > 0 ? shutdown_sum / shutdowns : 0;
  in.other_s = std::max(0.0, r.wall_s - in.train_s);
  in.samples_per_step =
      l.batches_handed > 0 ? static_cast<double>(l.samples) / static_cast<double>(l.batches_handed) : 1;
  if (in.epochs == 0) b.why_not = "no epoch of the training loader lies in the window";
  return b;
}

// The training loader's time in the window under `st`: per epoch, starting workers (when they
// start), the first batch, the other batches at the steady step time, and stopping workers.
struct Predicted {
  double train_s = 0, wait_s = 0, step_s = 0;
};
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

std::string yes_no(bool b) { return b ? "True" : "False"; }

}  // namespace

std::string LoaderSetting::arguments() const {
  std::string s = "num_workers=" + std::to_string(num_workers);
  if (num_workers > 0) {
    s += ", prefetch_factor=" + std::to_string(prefetch_factor) + ", persistent_workers=" + yes_no(persistent_workers);
  }
  return s;
}

bool loader_with_one_thread(const WhatIf& w) {
  return w.available && w.best && w.threads_best && w.best_beside_busy_workers;
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

SimResult simulate(const WhatIfInputs& in, const LoaderSetting& setting, int64_t steps) {
  if (in.steps.empty() || in.fetches.empty() || steps < 2) return {};
  return Sim(in, setting, steps).run();
}

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
  w.measured_samples_per_s = r.wall_s > 0 ? handed_batches(in) * samples / r.wall_s : 0;
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
  w.available = true;

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
