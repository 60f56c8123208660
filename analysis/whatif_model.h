// The what-if model's parts, shared by its files and by nothing else: the inputs read from the
// recording (whatif_inputs.cc), the simulation (whatif_sim.cc), the candidate settings and the
// choice among them (whatif_candidate.cc). whatif.cc puts them together and writes the advice.
#pragma once

#include <cstdint>
#include <string>

#include "analysis/whatif.h"

namespace stallscope::analysis {

struct DataLoaderModel;
struct LoaderInfo;
struct LoaderStats;

namespace whatif_detail {

// Batches the training loader handed in the window's epochs.
inline double handed_batches(const WhatIfInputs& in) {
  double n = 0;
  for (int64_t b : in.batches_per_epoch) n += static_cast<double>(b);
  return n;
}

// [SECTION] inputs from the recording (whatif_inputs.cc)
struct Built {
  WhatIfInputs in;
  bool from_marks = true;  // CPU split from dl.cpu (else from /proc means)
  std::string why_not;
};

// The consumer's steps and the batches' fetches of loader `l`, as demands.
Built build_inputs(const Session& s, const DataLoaderModel& m, const Report& r, const LoaderStats& l,
                   const LoaderInfo& li);

// [SECTION] the simulation (whatif_sim.cc)
// The training loader's time in the window under `st`: per epoch, starting workers (when they
// start), the first batch, the other batches at the steady step time, and stopping workers.
struct Predicted {
  double train_s = 0, wait_s = 0, step_s = 0;
};
Predicted predict(const WhatIfInputs& in, const LoaderSetting& st, int64_t n_rec);

// [SECTION] the candidates (whatif_candidate.cc)
// Fills w's candidates and the choice among them, from w.inputs and w.recorded: the model's fit
// on the recorded setting (against `wall_s`, the report's training window), the DataLoader
// settings tried and the advised one (best, best_gain, min_gain, the gains of each argument
// alone), which are uncertain (best_beside_busy_workers), and torch on one intra-op thread
// (thread_candidates, threads_best and its basis).
void search_candidates(WhatIf* out, double wall_s);

}  // namespace whatif_detail
}  // namespace stallscope::analysis
