// The report's "What to do": the recommendations (Report::recommendations) as one plan of numbered
// actions, each a line the user types (`DataLoader(..., num_workers=0)`, `torch.set_num_threads(1)`,
// an LD_PRELOAD before `stallscope run`), its predicted speed-up with how sure the model is, and at
// most three lines of why. Recommendations that set the same knob, or that the model advises only
// together (a DataLoader setting and torch on one intra-op thread), become one action with the
// combined setting, as `stallscope tune` pastes it. docs/report.md ("What to do").
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace stallscope::analysis {

struct Report;

struct Action {
  std::string line;  // one line, as the user types it
  // What the figure is: "model" (the what-if model's prediction), "bound" (the most a removed share
  // of the window can give), "estimate" (the allocator's: the kernel's share given back, which a
  // preloaded allocator has beaten), "memory" (memory saved, not speed), "same" (as fast, fewer
  // processes).
  std::string basis;
  double speedup = 1;  // predicted (model) or the bound; 1 for memory and same
  // The model's prediction is marked uncertain (a rough fit, workers beside torch's intra-op
  // threads, a one-thread step that was not measured): the range it may lie in. Otherwise empty
  // and `speedup` stands alone with the model's confidence. speedup_high empty with a low end: the
  // figure is a floor ("at least").
  bool uncertain = false;
  std::optional<double> speedup_low, speedup_high;
  std::string confidence;               // the model's ("high", "medium", "low"); empty for bounds and memory
  std::string gain_text;                // "1.93x (confidence high)", "1.3x-2.1x (uncertain)", "up to 1.25x (a bound)"
  std::vector<std::string> why;         // at most kMaxWhyLines, each one line
  std::vector<std::string> ids;         // the recommendations it stands for (Recommendation::id)
  std::vector<size_t> recommendations;  // their indices in Report::recommendations
};

inline constexpr size_t kMaxWhyLines = 3;

// The actions of `r`, in the order of their first recommendation (most useful first).
std::vector<Action> plan_actions(const Report& r);

}  // namespace stallscope::analysis
