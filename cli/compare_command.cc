// `stallscope compare [--json] A.db B.db`: two recordings of the same training script side by side
// (say `stallscope run --loader torch` and `--loader reference`, or before and after following a
// recommendation), with the B/A throughput ratio, its interval from the runs' own noise, and a
// verdict (docs/report.md, "compare"). Errors: a file that is not a readable recording gets the
// report command's one line on stderr and exit 1; usage errors one line and exit 2.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/compare.h"
#include "cli/command.h"
#include "cli/recording_input.h"
#include "common/json.h"

namespace stallscope::cli {
namespace {

struct CompareArgs {
  bool as_json = false;
  std::vector<std::string> files;  // two; another count is a usage error, said in the command's words
};

int compare(const std::string& a_path, const std::string& b_path, bool as_json) {
  const std::optional<analysis::Report> a = analyze_recording(a_path);
  if (!a) return 1;
  const std::optional<analysis::Report> b = analyze_recording(b_path);
  if (!b) return 1;
  const analysis::Comparison c = analysis::compare(*a, *b);
  const std::string out = as_json ? json::write(analysis::to_json(c)) : analysis::render_text(c);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

Body define(CLI::App& app) {
  auto a = std::make_shared<CompareArgs>();
  app.add_flag("--json", a->as_json, "print a JSON document (schema \"stallscope.compare/1\") instead of text");
  app.add_option("A.db B.db", a->files, "the two recordings: A the baseline, B the run compared with it")
      ->type_name("");
  return [&app, a] {
    if (a->files.size() < 2) {
      return usage_error(app, std::string("compare: ") +
                                  (a->files.empty() ? "no recordings given" : "one recording given") +
                                  "; usage: stallscope compare [--json] A.db B.db");
    }
    if (a->files.size() > 2) {
      return usage_error(app, "compare: two recordings at a time; got " + std::to_string(a->files.size()));
    }
    return compare(a->files[0], a->files[1], a->as_json);
  };
}

}  // namespace

const Command kCompareCommand = {
    "compare",
    "put two recordings side by side: throughput ratio with its noise, stalls, loaders, verdict",
    "stallscope compare [--json] A.db B.db",
    "Compares two recordings of the same training script, A (the baseline) and B: samples/s, stall,\n"
    "step time, compute per step, queue depth, workers, each run's loader settings and\n"
    "recommendations, side by side. The verdict gives B/A samples/s with a 95% interval estimated\n"
    "from each run's step-to-step noise: 'B is faster by 1.63x (±0.02)', 'B is slower ...', or 'no\n"
    "measurable difference' when the interval includes 1. It says when the runs cannot be compared\n"
    "(no training loop, too few steps, too short, lengths too far apart) and what to be careful about\n"
    "(batch sizes, commands or datasets that differ, an unfinished recording). Rules and thresholds\n"
    "are in docs/report.md, \"compare\".",
    "Exit status: 0 on a comparison (whatever its verdict), 1 when a file cannot be read as a\n"
    "recording, 2 on usage errors.\n"
    "\n"
    "Examples:\n"
    "  stallscope compare before.db after.db\n"
    "  stallscope compare --json torch.db reference.db | jq .verdict",
    define,
};

}  // namespace stallscope::cli
