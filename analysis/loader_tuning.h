// The settings `stallscope run --loader tuned` gives torch's DataLoader before anything is
// measured: one worker per usable core less the one the training process computes on. The advice
// of a report comes from the what-if model of what was recorded (whatif.h) and may differ: it
// knows the fetch and the step.
//
// The launcher computes them once, for the cores the program may use (common/cpus.h: affinity and
// cgroup quota), and passes them to the program's Python processes as JSON
// (STALLSCOPE_LOADER_TUNED); the DataLoader hooks apply them where that cannot change what the
// script computes (docs/report.md, "Loader swap").
#pragma once

#include <cstdint>
#include <string>

#include "common/cpus.h"
#include "common/json.h"

namespace stallscope::analysis {

// The most DataLoader workers worth running on `cpus` cores when fetching needs a CPU: one per
// core, less the one the training process computes on; at least 1.
int64_t worker_cap(int64_t cpus);

// prefetch_factor of a tuned loader: twice torch's default. Batches then wait in the queue for
// 4 x num_workers steps, so one slow fetch (the p99 of a bursty dataset) hides behind them; the
// increase_prefetch_factor rule doubles the factor for the same reason (docs/decisions.md).
inline constexpr int64_t kTunedPrefetchFactor = 4;

struct TunedLoader {
  int64_t num_workers = 1;
  int64_t prefetch_factor = kTunedPrefetchFactor;
  bool persistent_workers = true;
  int64_t usable_cores = 1;
  std::string basis;  // how num_workers was reached: "2 usable (affinity 2, cgroup quota none) - 1"
};

// The tuned settings for a process with this CPU budget.
TunedLoader tuned_loader(const cpus::Budget& budget);

// The document passed in STALLSCOPE_LOADER_TUNED and kept in the recording's meta
// (`loader_tuned`): {"num_workers", "prefetch_factor", "persistent_workers", "usable_cores",
// "basis"}. pin_memory is not in it: the hooks pin when the program uses CUDA, which only the
// program knows.
Json to_json(const TunedLoader& t);

}  // namespace stallscope::analysis
