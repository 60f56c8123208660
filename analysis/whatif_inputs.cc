// The what-if model's inputs, read from the recording: the training loop's steps and the
// batches' fetches as demands of CPU and waiting (dl.cpu, dl.parallel, the /proc means), the
// workers' start-up and shutdown per epoch, and the estimates for what was not recorded
// (WhatIfInputs in whatif.h; docs/report.md, "What-if model").
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

#include "analysis/dataloader.h"
#include "analysis/format.h"
#include "analysis/report.h"
#include "analysis/stats.h"
#include "analysis/whatif_model.h"
#include "common/json.h"

namespace stallscope::analysis {
namespace {

constexpr double kNs = 1e9;
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

// dl.cpu instants by pid (worker processes) and on the training thread; dl.parallel and
// dl.parallel_next (the regions inside a marked call) on the latter.
struct CpuMarks {
  std::vector<CpuMark> train;
  std::unordered_map<int64_t, std::vector<CpuMark>> by_pid;
  std::vector<ParMark> par, par_next;
};

CpuMarks cpu_marks(const Session& s, const DataLoaderModel& m) {
  CpuMarks out;
  for (const InstantRow& in : s.instants) {
    const vocab::Event e = s.event(in.name_id);
    if ((e == vocab::Event::kDlParallel || e == vocab::Event::kDlParallelNext) && in.thread_id == m.train_thread_id &&
        in.arg0 && in.arg1 && *in.arg0 >= 0 && *in.arg1 >= 0) {
      (e == vocab::Event::kDlParallel ? out.par : out.par_next).push_back({in.ts_ns, *in.arg0, *in.arg1});
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
  // The same inside the next() call (dl.parallel_next): the fetch's regions without workers.
  double next_par_wall = -1, next_par_body = -1;
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

}  // namespace

namespace whatif_detail {

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
    // The regions inside a marked call (dl.parallel_next, written right after its dl.cpu and
    // dl.parallel; none: 0 where the recording measures them, -1 where it does not).
    auto regions_in = [&](const CpuMark& mk, int64_t until) {
      if (marks.par_next.empty()) return ParMark{0, -1, -1};
      const ParMark* p = mark_after(marks.par_next, mk.ts, until);
      return p != nullptr ? *p : ParMark{0, 0, 0};
    };
    // The other threads' CPU inside a call, less what of the regions' bodies ran beyond the
    // training thread's part (work, not spinning): beside workers they only spin there.
    auto others_spin = [](const CpuMark& mk, const ParMark& p) {
      const int64_t work = p.wall_us >= 0 ? std::max<int64_t>(0, p.body_us - p.wall_us) : 0;
      return static_cast<double>(std::max<int64_t>(0, mk.others_us - work)) / 1e6;
    };
    if (const CpuMark* mk = mark_after(marks.train, prev.end_ns, c.start_ns)) {
      st.prev_others = others_spin(*mk, regions_in(*mk, c.start_ns));
    }
    if (const CpuMark* mk = mark_after(marks.train, c.end_ns, limit)) {
      st.next_cpu = static_cast<double>(mk->in_us) / 1e6;
      const ParMark p = regions_in(*mk, limit);
      st.next_others = others_spin(*mk, p);
      if (p.wall_us >= 0) {
        st.next_par_wall = static_cast<double>(p.wall_us) / 1e6;
        st.next_par_body = static_cast<double>(p.body_us) / 1e6;
      }
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
  double par_gap = 0, par_wall = 0, par_body = 0;       // steps whose parallel regions were measured
  double npar_wall = 0, npar_rwall = 0, npar_body = 0;  // calls whose parallel regions were measured
  for (const RawStep& st : raw) {
    if (st.next_par_wall >= 0) {
      npar_wall += st.next_wall;
      npar_rwall += st.next_par_wall;
      npar_body += st.next_par_body;
    }
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
    if (st.next_par_wall < 0 && npar_wall > 0) {
      st.next_par_wall = st.next_wall * npar_rwall / npar_wall;
      st.next_par_body = st.next_wall * npar_body / npar_wall;
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
  std::vector<double> f_ms, fcpu_ms, put_ms, share_ms, one_ms;
  bool any_regions = false;
  if (n_rec == 0) {
    for (const RawStep& st : raw) {
      Demand d;
      const double cpu = st.next_cpu >= 0 ? st.next_cpu : st.next_wall * std::min(1.0, train_cpu);
      d.cpu_s = std::min(cpu, st.next_wall);
      d.wait_s = st.next_wall - d.cpu_s;
      d.put_cpu_s = put_estimate;
      if (st.next_par_wall > 0) {
        // On one thread: the part outside the regions, then their bodies (timed by the wall clock,
        // so at most the CPU of every thread inside the call).
        const double outside = std::max(0.0, d.cpu_s - std::min(st.next_par_wall, d.cpu_s));
        d.one_cpu_s = std::min(outside + st.next_par_body,
                               d.cpu_s + st.next_others + std::max(0.0, st.next_par_body - st.next_par_wall));
        d.one_cpu_s = std::max(d.one_cpu_s, outside);
      }
      in.fetches.push_back(d);
      f_ms.push_back(st.next_wall * 1e3);
      fcpu_ms.push_back(d.cpu_s * 1e3);
      one_ms.push_back(d.on_one_thread() * 1e3);
      any_regions = any_regions || d.one_cpu_s >= 0;
    }
    if (any_regions) in.fetch_one_cpu_ms = mean_of(one_ms);
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

}  // namespace whatif_detail
}  // namespace stallscope::analysis
