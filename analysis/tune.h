// `stallscope tune`'s analysis: which DataLoader settings to measure (from the what-if model of the
// script's own run), how a short run of one setting is measured (steady samples/s after a warm-up),
// and the `--loader-args` text that applies a setting to a run without editing the script.
// Pure functions; cli/tune_command.cc runs the candidates.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/whatif.h"
#include "common/json.h"

namespace stallscope::analysis {

struct Report;
struct DataLoaderModel;

// The arguments of `stallscope run --loader-args`: the DataLoader arguments that report and tune
// print ("num_workers=4, prefetch_factor=4, persistent_workers=True"). num_workers is required; an
// argument not given stays as the script has it.
struct LoaderArgs {
  int64_t num_workers = 0;
  std::optional<int64_t> prefetch_factor;
  std::optional<bool> persistent_workers;
  // Not a DataLoader argument: torch's intra-op threads in the training process
  // (torch.set_num_threads), set once, at the program's first DataLoader.
  std::optional<int64_t> torch_threads;
};
// Parses `text`; on failure returns nullopt and sets `*error` to what is wrong, in words that follow
// the option's name ("needs num_workers=N").
std::optional<LoaderArgs> parse_loader_args(const std::string& text, std::string* error);
// The document passed to the hooks in STALLSCOPE_LOADER_TUNED for these arguments: tuned's keys
// plus "exact": true (the hooks then lower a setting as readily as they raise it).
Json loader_args_json(const LoaderArgs& a, int64_t usable_cores);
// The arguments that apply `s` exactly.
LoaderArgs loader_args_of(const LoaderSetting& s);
// The `--loader-args` text of `s`: its DataLoader arguments, then ", torch_threads=N" when it
// sets torch's intra-op threads.
std::string loader_args_text(const LoaderSetting& s);

// The settings worth measuring, best predicted first, at most `max` of them, none equal to the
// recorded one (the baseline measures it): the advised setting, its neighbours in num_workers
// (same prefetch and persistence), the advised count with the other persistence and a deeper
// prefetch, then the highest predicted of the rest.
std::vector<WhatIfCandidate> tune_candidates(const WhatIf& w, size_t max);

// The predicted figures of `s` (samples/s, stall), from the model's candidates when it is one of
// them, else simulated; nullopt without a model.
std::optional<WhatIfCandidate> predicted(const WhatIf& w, const LoaderSetting& s);

// A one-thread trial, which tune measures last for the fastest setting measured and for the
// fastest with workers: `best` with torch's intra-op threads at 1, when the baseline's training
// process ran them on more than one of the usable cores. The model cannot tell one thread's step
// time from a recording with several (their waiting for each other is recorded as CPU), so this is
// measured rather than predicted. nullopt without a model, when the recording ran one thread, or
// when `best` sets threads already.
std::optional<LoaderSetting> one_thread_trial(const WhatIf& w, const LoaderSetting& best);

// The neighbours of `s` in num_workers that a hill-climb on measurements may try next: n-1 and
// n+1, with n+1 at most `max_workers`.
std::vector<LoaderSetting> worker_neighbours(const LoaderSetting& s, int64_t max_workers);

// The settings an exhaustive sweep runs (`tune --sweep`): num_workers 0 .. max_workers, and with
// workers prefetch_factor 2 and 4, persistent or not.
std::vector<LoaderSetting> sweep_settings(int64_t max_workers);

// A short run of one setting, measured on the training loader after the warm-up: from the end of
// the warm-up's last next() to the end of the next() that handed the `max_steps`-th batch after it
// (or the last one, in a shorter run), so that every setting is measured over the same steps.
struct SteadyFigures {
  int64_t steps = 0;         // batches handed after the warm-up
  int64_t warmup = 0;        // warm-up batches skipped (fewer when the run had fewer)
  double window_s = 0;       // the measured window
  double samples_per_s = 0;  // 0 when nothing was measured
  double stall = 0;          // share of the window inside the training loader's next()
  double samples_per_step = 0;
  bool measured() const { return steps > 0 && window_s > 0; }
};
SteadyFigures steady_figures(const DataLoaderModel& m, const Report& r, int64_t warmup, int64_t max_steps);

// The live rate of a run still going, from the end times of the batches its training loader
// handed (sorted, ns): steps/s after `warmup` steps, and how sure that is. The measured steps are
// cut into up to 8 blocks of equal count; `rel_se` is the standard error of the blocks' mean
// rate over that mean (prefetching hands batches in bursts, so single steps would overstate it).
struct LiveRate {
  int64_t steps = 0;       // measured steps after the warm-up
  double steps_per_s = 0;  // over all of them; 0 until two are measured
  double rel_se = 1;       // relative standard error; 1 (no confidence) with fewer than 3 blocks
};
LiveRate live_rate(const std::vector<int64_t>& sorted_ends, int64_t warmup);

// Whether a run measured at `r` can no longer come within `margin` (0.05: 5 %) of `best`
// (steps/s): even two standard errors above its rate it stays below best x (1 - margin).
bool cannot_win(const LiveRate& r, double best_steps_per_s, double margin);

// Samples/s of `steps` steps over `window_s`, and the inverse, for progress lines.
inline double rate(double samples, double window_s) { return window_s > 0 ? samples / window_s : 0; }

}  // namespace stallscope::analysis
