// The what-if model of the input pipeline: predicts samples/s and stall of the training loop for
// DataLoader settings other than the recorded ones (num_workers, prefetch_factor,
// persistent_workers, pin_memory), from the recording alone.
//
// The loader is modelled as the producer-consumer system it is and simulated event by event:
//  - the consumer (the training loop) takes batches in order; for each step it receives the batch
//    (CPU, one thread), then computes: a part on torch's intra-op threads (T threads that advance
//    together, as a parallel region waits for its slowest thread), a part on one thread, and a
//    part waiting (sleep, I/O, the GPU);
//  - each of N workers fetches the batches torch sends it round-robin, keeping at most
//    prefetch_factor x N batches sent but not yet handed: CPU (one thread) then waiting;
//  - with N = 0 the consumer fetches inside next();
//  - the usable cores P (affinity and cgroup quota) are shared among the runnable threads: each
//    gets min(1, P/R) of a core when R threads are runnable.
// Every duration comes from the recording: compute and fetch times per step and per batch, split
// into CPU and waiting by the process CPU times of `dl.cpu`, with the contention seen while
// recording taken out (run-queue delay); worker start-up and shutdown per epoch from the epochs'
// starts and ends. The model simulates the recorded setting as well: the gap between that and the
// measured steps is its fit error, which sets the confidence and the least gain worth advising.
// docs/report.md ("What-if model") has the details and the assumptions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stallscope::analysis {

struct Report;
struct Session;
struct DataLoaderModel;

struct LoaderSetting {
  int64_t num_workers = 0;
  int64_t prefetch_factor = 2;  // meaningful with num_workers > 0
  bool persistent_workers = false;
  bool pin_memory = false;
  // torch's intra-op threads in the training process (torch.set_num_threads): 0 leaves them as
  // recorded. Not a DataLoader argument: only the candidates of WhatIf::thread_candidates set it.
  int64_t torch_threads = 0;
  bool operator==(const LoaderSetting&) const = default;
  // The DataLoader arguments to paste: "num_workers=4, prefetch_factor=2, persistent_workers=True"
  // (prefetch_factor and persistent_workers only with workers).
  std::string arguments() const;
};

struct WhatIfCandidate {
  LoaderSetting setting;
  double samples_per_s = 0;   // predicted, over the training window
  double stall = 0;           // predicted share of the window waiting for input
  double steady_step_ms = 0;  // predicted step time once the pipeline runs
  bool recorded = false;      // the setting the recording ran with
  // Its workers, each counted by the fetch's CPU share, and torch's intra-op threads (more than
  // one) outnumber the cores: the figure rests on the model's assumption that the threads' parallel
  // regions gain nothing from them there, a wait that the scheduler decides and that was measured
  // from none to many times the region, so it may be off either way (docs/report.md). Never the
  // recorded setting.
  bool uncertain = false;
};

// One step or one batch as the model uses it: wall time split into work on the CPU and waiting.
struct Demand {
  double cpu_s = 0;   // CPU work (seconds of one core)
  double wait_s = 0;  // not on a CPU (sleep, I/O, GPU)
  // A worker's CPU after the fetch, handing the batch over (pickling it, sharing its tensors'
  // memory): paid by workers only, not by the training thread fetching for itself.
  double put_cpu_s = 0;
  // Of cpu_s, recorded in a worker: its collate into shared memory, a segment per tensor, beyond
  // what the same collate costs in the training process (estimated from the batch's layout, at
  // most the recorded collate): not paid by the training thread fetching for itself.
  double share_cpu_s = 0;
  // Recorded without workers, where torch's parallel regions ran inside the fetch (dl.parallel_next):
  // its CPU on one thread, as in a worker (which runs torch on one) or at torch.set_num_threads(1):
  // the training thread's CPU outside the regions plus the regions' bodies, every thread summed.
  // Negative: cpu_s (no regions ran, or they were not measured).
  double one_cpu_s = -1;
  double on_one_thread() const { return one_cpu_s >= 0 ? one_cpu_s : cpu_s; }
};
struct StepDemand {
  double recv_cpu_s = 0;    // receiving the batch in next() (workers only)
  double gang_s = 0;        // wall time on T threads together, uncontended
  double serial_cpu_s = 0;  // CPU on one thread
  double wait_s = 0;
  // CPU of the training process's other threads while the training thread is in the next() that
  // precedes the step: torch's intra-op threads spinning after the previous step (until the next
  // parallel region or their spin limit), a pin-memory thread. It takes cores from the workers.
  // Where the intra-op threads' spin is known (WhatIfInputs::spin_window_s), the simulation uses
  // that instead.
  double others_cpu_s = 0;
  // Of the step's serial CPU, the part spent waking torch's intra-op threads that had gone to
  // sleep during a long next(): the training thread spins at the first parallel region's barrier
  // until they run again (milliseconds on a virtual machine whose idle CPU the host took back).
  // The simulation takes it out and pays WhatIfInputs::wake_s instead where the threads' spin
  // (WhatIfInputs::spin_window_s) was spent before the step's parallel part.
  double wake_s = 0;
  // For fewer intra-op threads than recorded, where torch's parallel regions were measured in
  // the step (dl.parallel): the step's part outside them, and their bodies' time summed over the
  // threads, the work fewer threads share (both uncontended, as gang_s). Negative: not measured;
  // the step's CPU above its wall is then all taken as parallel work (gang_s).
  double fewer_serial_s = -1;
  double fewer_gang_work_s = -1;
};

// What the model was fed, in the units it uses; kept for the report's evidence.
struct WhatIfInputs {
  int64_t usable_cores = 1;
  int64_t torch_threads = 1;      // intra-op threads of the training process (T)
  std::vector<StepDemand> steps;  // per steady step, in time order
  // How long torch's intra-op threads spin in next() before they sleep (CPU per thread; 0: not
  // seen, never asleep). The simulation lets them spin that long from the end of each step's
  // parallel part, through the rest of the step and the next() after it, until the next step's
  // parallel part: beside workers that keep batches ready they never sleep. And what waking them
  // cost on average a step that followed a longer next() (the recorded wakes are rare and long:
  // paying each one's own after its own long next() would make the prediction hang on which steps
  // a simulated wait happens to fall before).
  double spin_window_s = 0;
  double wake_s = 0;
  std::vector<Demand> fetches;     // per batch, in time order
  double startup_s = 0;            // per epoch whose workers start, at the recorded num_workers (0: unknown)
  bool startup_estimated = false;  // recorded without workers: startup_s is the model's estimate
  std::string startup_method;      // then: the start method it assumes ("fork", "spawn", "forkserver")
  // Forked workers: __iter__ creates them one after another, so each more worker adds this much to
  // the start-up (measured between the recorded workers' births, else an estimate); at n workers
  // the start-up is startup_s + (n - startup_workers) x this. 0: spawned or forkserver workers,
  // whose start-up (importing torch afresh) runs side by side on the cores and is scaled by them.
  double startup_per_worker_s = 0;
  int64_t startup_workers = 0;  // the worker count startup_s is for
  double shutdown_s = 0;        // per epoch whose workers stop
  // Forked workers: what the first step of an epoch whose workers were forked took beyond a steady
  // step (copying on write the training process's pages it writes, shared with the new workers
  // since the fork), per such epoch; and at the loader's first epoch, whose fork comes before the
  // gradients and the optimizer's state exist. Each stands for the other where only one was seen.
  // 0: not seen (spawned or forkserver workers, none recorded).
  double fork_step_s = 0, fork_first_step_s = 0;
  int64_t epochs = 0;  // epochs of the training loader inside the window
  std::vector<int64_t> batches_per_epoch;
  double samples_per_step = 1;
  double other_s = 0;  // window time outside the training loader's epochs (evaluation, set-up)
  double train_s = 0;  // window time inside them (measured)
  // Recorded without workers: the batch's layout (dl.batch; -1 when not recorded), which the
  // receive and put estimates follow.
  int64_t batch_tensors = -1, batch_bytes = -1;
  bool handoff_estimated = false;  // recv_cpu_ms and put_cpu_ms are the model's estimates
  double share_cpu_ms = 0;         // mean Demand::share_cpu_s of the fetches (recorded with workers)
  // Means, for the report (recorded with workers, fetch_cpu_ms holds the put).
  double compute_ms = 0, compute_cpu_ms = 0, fetch_ms = 0, fetch_cpu_ms = 0, recv_cpu_ms = 0, put_cpu_ms = 0,
         others_cpu_ms = 0;
  // Recorded without workers, where torch's parallel regions ran inside the fetch: the mean of
  // Demand::one_cpu_s, the fetch's CPU on one thread (-1: none ran or not measured).
  double fetch_one_cpu_ms = -1;
  // torch's parallel regions in the step (dl.parallel; means per step, -1 when not measured): how
  // long they lasted, and how long their bodies ran, the threads summed.
  double parallel_ms = -1, parallel_body_ms = -1;
};

struct WhatIf {
  bool available = false;
  std::string why_not;  // when not available
  LoaderSetting recorded;
  WhatIfInputs inputs;
  double measured_samples_per_s = 0;  // the report's figure for the training loader's window
  double predicted_recorded_samples_per_s = 0;
  double fit_error = 0;                     // predicted / measured - 1, for the recorded setting's steady steps
  std::vector<WhatIfCandidate> candidates;  // the recorded setting first
  std::optional<size_t> best;               // index into candidates: the advised setting
  double best_gain = 1;                     // best / recorded predicted samples/s
  // The gain of changing one argument alone to its advised value (1 when it is not changed):
  // what each recommendation is worth by itself.
  double gain_num_workers = 1, gain_prefetch_factor = 1, gain_persistent_workers = 1;
  double min_gain = 1;  // the gain below which no setting is advised
  // The best DataLoader setting is advised (alone, on the recorded threads): it is not the recorded
  // one and its gain reaches min_gain; where its figure is uncertain (beside busy workers), at the
  // low end of that figure's range too (kBesideBusyLow in whatif_candidate.cc).
  bool loader_advised = false;
  std::string bound;       // what bounds the loop at the best setting: "cpu", "compute", "fetch", "start-up"
  std::string bound_text;  // one sentence
  std::string confidence;  // "high", "medium", "low"
  // torch's intra-op threads cut to one (torch.set_num_threads(1)) in the training process, for
  // a recording whose step ran on more: the same worker counts, each at the best prefetch and
  // persistence found above, predicted with the step's work all on one thread and no intra-op
  // threads spinning in next(). The step's work on one thread: its part outside torch's parallel
  // regions and their bodies' time, where they were measured (inputs.parallel_ms); else the
  // recorded step's CPU on every thread (an upper bound, as the threads' spinning is in it).
  // Empty when the step ran on one thread.
  std::vector<WhatIfCandidate> thread_candidates;
  std::optional<size_t> threads_best;  // index into thread_candidates, when advised (whatif_candidate.cc)
  double threads_gain = 1;             // threads_best's prediction / best's
  // The same setting's prediction with the step's whole recorded CPU on one thread (the floor),
  // over best's; threads_gain itself where the regions were not measured.
  double threads_floor_gain = 1;
  // Why threads_best is advised: "gain" (threads_gain reaches min_gain); beside busy workers
  // (best_beside_busy_workers), "floor" (threads_floor_gain reaches 1) or "tie" (threads_gain within
  // kTie of 1). Empty when it is not.
  std::string threads_basis;
  // The best DataLoader setting puts workers that keep more threads runnable than there are cores
  // beside a step on more than one intra-op thread: its figure rests on the scheduler (see
  // WhatIfCandidate::uncertain). Where threads_best is advised too, the DataLoader advice is
  // threads_best's setting, together with one thread (recommend.cc, docs/report.md).
  bool best_beside_busy_workers = false;
  // What the report's speed advice leads to: the one-thread candidate where torch on one thread is
  // advised (threads_best), else the best DataLoader setting where it is advised (loader_advised),
  // else the recorded setting (kept). And the settings tried that the model cannot tell from it: those
  // predicted within about_the_same_within (min_gain - 1: 5 % of noise plus the model's fit
  // error) of its figure, on either side, the fastest first. Two recordings of one loop may advise
  // different settings from this set; the bench counts such advice as stable (docs/report.md).
  WhatIfCandidate advised;
  std::vector<WhatIfCandidate> about_the_same;
  double about_the_same_within = 0;
  // The same loop if fetching a batch took half the time (CPU and waiting), at the advised
  // setting: what "make __getitem__ cheaper" is worth.
  double cheaper_fetch_samples_per_s = 0;
  std::vector<std::string> assumptions;
};

// The model of the report's training loader (r.loader()); not available without one, without
// steps, for the reference loader, or without dl.cpu events (recordings made before them).
WhatIf what_if(const Session& s, const DataLoaderModel& m, const Report& r);

// Whether the DataLoader setting is advised together with torch on one intra-op thread: the
// one-thread candidate is advised (threads_best) beside workers that keep more threads runnable
// than there are cores (best_beside_busy_workers). recommend.cc and the text report both ask.
bool loader_with_one_thread(const WhatIf& w);

// The model's prediction for one setting, as what_if() makes its candidates; zeros when `w` is not
// available.
WhatIfCandidate what_if_candidate(const WhatIf& w, const LoaderSetting& setting);

// The simulation alone, for tests: the steady step time (seconds) and the consumer's waiting share
// of it for one setting, over `steps` steps of the inputs (cycled).
struct SimResult {
  double step_s = 0;     // steady-state seconds per step
  double wait_frac = 0;  // share of steady time the consumer waits for a batch
  double fill_s = 0;     // time from the start to the first batch handed
  double total_s = 0;    // time from the start to the end of the last step
  double waited_s = 0;   // the consumer's time in next() over all steps
};
SimResult simulate(const WhatIfInputs& in, const LoaderSetting& setting, int64_t steps);

}  // namespace stallscope::analysis
