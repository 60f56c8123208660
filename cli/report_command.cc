// `stallscope report`: analyses a recording (finished or still being written) and prints the
// report as text or, with --json, as a "stallscope.report/1" document (docs/report.md).
// Errors: a file that is not a readable recording gets one line on stderr and exit 1; usage
// errors one line and exit 2.
#include <cstdio>
#include <string>

#include "analysis/report.h"
#include "analysis/session.h"
#include "cli/commands.h"
#include "common/json.h"

namespace {

constexpr const char* kReportHelp =
    "Usage: stallscope report [--json] FILE.db\n"
    "\n"
    "Analyses a recording made by 'stallscope run' (finished, or still being written) and prints\n"
    "why the training loop waited for its input pipeline: the training window, steps, samples/s,\n"
    "the share of time stalled waiting for data, the DataLoader's settings and queue depth, each\n"
    "worker's CPU, run-queue delay, memory growth and fetch times, and recommendations with the\n"
    "evidence behind them. Every field and threshold is described in docs/report.md.\n"
    "\n"
    "Options:\n"
    "  --json       print a JSON document (schema \"stallscope.report/1\") instead of text\n"
    "  -h, --help   show this help\n"
    "\n"
    "Exit status: 0 on success, 1 when FILE.db cannot be read as a recording, 2 on usage errors.\n"
    "\n"
    "Example:\n"
    "  stallscope report run.db\n"
    "  stallscope report --json run.db | jq .recommendations\n";

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "stallscope: report: %s (see 'stallscope report --help')\n", msg.c_str());
  return 2;
}

// One line: what is wrong, and what to do about it.
int read_error(std::string msg) {
  for (char& c : msg) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  const bool has_hint = msg.find("pass ") != std::string::npos || msg.find("upgrade") != std::string::npos;
  if (!has_hint) {
    if (msg.find("damaged") != std::string::npos || msg.find("truncated") != std::string::npos ||
        msg.find("malformed") != std::string::npos) {
      msg += "; record the run again, or pass another .db file";
    } else {
      msg += "; pass a .db recording written by `stallscope run`";
    }
  }
  std::fprintf(stderr, "stallscope: %s\n", msg.c_str());
  return 1;
}

}  // namespace

int cmd_report(int argc, char** argv) {
  bool as_json = false;
  std::string path;
  bool only_files = false;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (!only_files && a == "--") {
      only_files = true;
      continue;
    }
    if (!only_files && (a == "-h" || a == "--help")) {
      std::printf("%s", kReportHelp);
      return 0;
    }
    if (!only_files && a == "--json") {
      as_json = true;
      continue;
    }
    if (!only_files && a.size() > 1 && a[0] == '-') return usage_error("unknown option '" + a + "'");
    if (!path.empty()) return usage_error("one recording at a time; got '" + path + "' and '" + a + "'");
    path = a;
  }
  if (path.empty()) return usage_error("no recording given; usage: stallscope report [--json] FILE.db");

  auto session = stallscope::analysis::load_session(path);
  if (!session.ok()) return read_error(session.status().message());
  const stallscope::analysis::Report report = stallscope::analysis::analyze(*session);
  const std::string out = as_json ? stallscope::json::write(stallscope::analysis::to_json(report))
                                  : stallscope::analysis::render_text(report);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
