// Tuned DataLoader settings and the worker cap; see loader_tuning.h.
#include "analysis/loader_tuning.h"

#include <algorithm>

namespace stallscope::analysis {

int64_t worker_cap(int64_t cpus) { return std::max<int64_t>(1, cpus - 1); }

TunedLoader tuned_loader(const cpus::Budget& budget) {
  TunedLoader t;
  t.usable_cores = std::max(1, budget.usable);
  t.num_workers = worker_cap(t.usable_cores);
  t.basis = budget.describe() + " - 1 for the training process = " + std::to_string(t.num_workers) +
            (t.num_workers == 1 ? " worker" : " workers");
  return t;
}

Json to_json(const TunedLoader& t) {
  Json j = Json::object();
  j["num_workers"] = t.num_workers;
  j["prefetch_factor"] = t.prefetch_factor;
  j["persistent_workers"] = t.persistent_workers;
  j["usable_cores"] = t.usable_cores;
  j["basis"] = t.basis;
  return j;
}

}  // namespace stallscope::analysis
