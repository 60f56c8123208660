// `stallscope report [--json | --explain] FILE.db`: analyses a recording (finished or still being
// written) and prints the report as text (what was lost and what to do first; --explain adds each
// recommendation's evidence) or, with --json, as a "stallscope.report/1" document (docs/report.md).
// A folder, several recordings or --job: the job view instead (analysis/job.h; "stallscope.job/1").
// Errors: a file that is not a readable recording gets one line on stderr and exit 1; usage
// errors one line and exit 2.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/job.h"
#include "analysis/report.h"
#include "cli/command.h"
#include "cli/recording_input.h"
#include "cli/recording_options.h"
#include "common/json.h"

namespace stallscope::cli {
namespace {

struct ReportArgs {
  bool as_json = false;
  bool explain = false;
  bool job = false;
  int top = 10;
  analysis::DetailBudget budget;
  std::vector<std::string> files;  // more than one: a job's ranks (the job view); one twice is a usage error
};

int report(const std::string& path, bool as_json, bool explain, const analysis::DetailBudget& budget) {
  const std::optional<analysis::Report> report = analyze_recording(path, budget);
  if (!report) return 1;
  const std::string out =
      as_json ? json::write(analysis::to_json(*report)) : analysis::render_text(*report, {.explain = explain});
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

// The job view of a folder of rank recordings, of several recordings, or (--job) of one that holds
// several ranks.
int report_job(const std::vector<std::string>& paths, bool as_json, int top) {
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      auto in = analysis::job_folder(p);
      if (!in.ok()) {
        std::fprintf(stderr, "stallscope: %s\n", in.status().message().c_str());
        return 1;
      }
      files.insert(files.end(), in->begin(), in->end());
    } else {
      files.push_back(p);
    }
  }
  auto view = analysis::job_view(files);
  if (!view.ok()) {
    std::fprintf(stderr, "stallscope: %s\n", view.status().message().c_str());
    return 1;
  }
  const std::string out =
      as_json ? json::write(analysis::job_to_json(*view)) : analysis::render_job_text(*view, static_cast<size_t>(top));
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

Body define(CLI::App& app) {
  auto a = std::make_shared<ReportArgs>();
  app.add_flag("--json", a->as_json, "print a JSON document (schema \"stallscope.report/1\") instead of text");
  app.add_flag("--explain", a->explain,
               "give each recommendation's evidence in full: the measurements and the model's reasoning\n"
               "behind every action of \"What to do\"");
  parse_with(app.add_option("--detail",
                            "how much of a long recording's every-event detail to analyse: auto (default: its\n"
                            "latest 2 M events, a few hundred MB), all, its latest DURATION (30m, 6h), or the\n"
                            "window T0:T1 (seconds since the session start, as the dashboard's ruler shows them);\n"
                            "the \"Over time\" table always covers the whole run, from the summaries")
                 ->type_name("auto|all|DURATION|T0:T1"),
             [&b = a->budget](const std::string& v) -> std::string {
               b = analysis::DetailBudget{};
               if (v == "auto") return "";
               if (v == "all") {
                 b.all = true;
                 return "";
               }
               if (const size_t colon = v.find(':'); colon != std::string::npos) {
                 double t0 = 0, t1 = 0;
                 if (!parse_number(v.substr(0, colon), &t0) || !parse_number(v.substr(colon + 1), &t1) || !(t1 > t0) ||
                     t0 < -1e9 || t1 > 1e9) {
                   return "needs auto, all, a duration such as 30m or 6h, or a window T0:T1 in seconds, T0 < T1";
                 }
                 b.window = std::make_pair(static_cast<int64_t>(t0 * 1e9), static_cast<int64_t>(t1 * 1e9));
                 return "";
               }
               const std::optional<int64_t> ns = parse_duration_ns(v);
               if (!ns) return "needs auto, all, a duration such as 30m or 6h, or a window T0:T1 in seconds";
               b.last_ns = *ns;
               return "";
             });
  app.add_flag("--job", a->job,
               "the job view of one recording that holds several ranks (a merged one): its ranks slowest\n"
               "first, its nodes, when it slowed; given a folder or several recordings, it is the default");
  app.add_option("--top", a->top, "the job view's ranks to list in the text (default 10; --json lists all)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("FILE.db", a->files, "the recording; or a job's folder of rank recordings, or several of them")
      ->type_name("");
  return [&app, a] {
    if (a->files.empty())
      return usage_error(app, "report: no recording given; usage: stallscope report [--json | --explain] FILE.db");
    for (size_t i = 0; i < a->files.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (a->files[i] == a->files[j]) {
          return usage_error(app, "report: '" + a->files[i] + "' is given twice; give each rank's recording once");
        }
      }
    }
    std::error_code ec;
    const bool job = a->job || a->files.size() > 1 || std::filesystem::is_directory(a->files[0], ec);
    if (job) {
      if (a->explain) {
        return usage_error(app,
                           "report: --explain is for one rank's report; the job view names the rank to open "
                           "(stallscope report RANK.db --explain)");
      }
      return report_job(a->files, a->as_json, a->top);
    }
    if (a->as_json && a->explain) {
      return usage_error(
          app, "report: --json already holds every recommendation's evidence; give one of --json and --explain");
    }
    return report(a->files[0], a->as_json, a->explain, a->budget);
  };
}

}  // namespace

const Command kReportCommand = {
    "report",
    "summarise a recording: stalls, throughput, DataLoader workers, recommendations",
    "stallscope report [--json | --explain] [--detail auto|all|DURATION|T0:T1] FILE.db\n"
    "       stallscope report [--json] [--top N] JOB_DIR | RANK.db RANK.db ... | --job MERGED.db",
    "Analyses a recording made by 'stallscope run' (finished, or still being written). It opens with\n"
    "how much time was lost and to what, then \"What to do\": numbered actions, each a line to type\n"
    "with its predicted speed-up (a range where the model is unsure) and a short why. Below them:\n"
    "why the training loop waited for its input pipeline: the training window, steps, samples/s,\n"
    "the share of time stalled waiting for data, the DataLoader's settings and queue depth, each\n"
    "worker's CPU, run-queue delay, memory growth and fetch times, and recommendations with the\n"
    "evidence behind them. Every field and threshold is described in docs/report.md.\n"
    "\n"
    "A long recording is analysed from its latest part (--detail), so the report's memory and time\n"
    "stay bounded whatever the length of the run; the \"Over time\" table and its whole-run line\n"
    "cover all of it, from the summaries the recorder keeps.\n"
    "\n"
    "Given a job's folder of rank recordings (or several recordings, or --job and a merged one), it\n"
    "prints the job view instead, read from each rank's summaries where it lies: the ranks slowest\n"
    "first with their data stall and their wait for other ranks, the nodes whose every rank is slow,\n"
    "and when the job's samples/s fell and on which ranks first (docs/multi-rank.md).",
    "Exit status: 0 on success, 1 when FILE.db cannot be read as a recording, 2 on usage errors.\n"
    "\n"
    "Examples:\n"
    "  stallscope report run.db\n"
    "  stallscope report --explain run.db\n"
    "  stallscope report --json run.db | jq .recommendations\n"
    "  stallscope report --detail 1h day-long-run.db\n"
    "  stallscope report job/            # a folder of part-{rank}.db recordings",
    define,
};

}  // namespace stallscope::cli
