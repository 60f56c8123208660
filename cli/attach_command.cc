// `stallscope attach [OPTIONS] PID` and `stallscope attach --list`: records a Python training
// process that is already running (inject/attach.h).
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/metrics_options.h"
#include "cli/recording_options.h"
#include "cli/summary.h"
#include "inject/attach.h"
#include "storage/session_registry.h"
#include "storage/writer.h"

namespace stallscope::cli {
namespace {

struct AttachArgs {
  AttachOptions opt;
  std::vector<std::string> pids;  // more than one is a usage error, said in the command's words
  bool list = false;
  MetricsSettings metrics;
};

Body define(CLI::App& app) {
  auto a = std::make_shared<AttachArgs>();
  add_recording_options(
      app, {a->opt.output, a->opt.overwrite, a->opt.ring_events, a->opt.rings, a->opt.quiet, a->opt.keep_detail_ns});
  add_metrics_options(app, a->metrics);
  parse_with(app.add_option("-d,--duration")
                 ->type_name("SEC")
                 ->description("detach after SEC seconds (default: until the process exits or Ctrl-C)"),
             [a](const std::string& v) -> std::string {
               double s = 0;
               if (!parse_number(v, &s) || !(s > 0) || s > 1e7) return "needs a number of seconds above 0";
               a->opt.duration_s = s;
               return "";
             });
  app.add_flag("-l,--list", a->list, "list the Python processes with torch loaded (to find PID), and exit");
  app.add_option("PID", a->pids, "the process to record")->type_name("");
  return [&app, a] {
    if (a->list) {
      if (!a->pids.empty()) return usage_error(app, "--list takes no process id");
      return attach_list();
    }
    if (a->pids.empty()) {
      return usage_error(app,
                         "attach: no process id given; usage: stallscope attach [-o FILE] PID (find it with --list)");
    }
    if (a->pids.size() > 1) {
      return usage_error(app, "one process id only (got '" + a->pids[0] + "' and '" + a->pids[1] + "')");
    }
    const std::string& arg = a->pids[0];
    char* end = nullptr;
    const long pid = std::strtol(arg.c_str(), &end, 10);
    if (*end != '\0' || pid <= 0 || pid > (1l << 22)) return usage_error(app, "'" + arg + "' is not a process id");
    if (int rc = check_output(app, a->opt.output, a->opt.overwrite); rc != 0) return rc;
    a->opt.pid = static_cast<pid_t>(pid);
    std::unique_ptr<MetricsEndpoint> endpoint;  // serves until the attach ends
    if (a->metrics.port != 0 && a->opt.overwrite && !a->opt.output.empty()) (void)Writer::remove(a->opt.output);
    // Without -o the name comes from the target's command line: the session registry has it
    // once the recording starts.
    auto path = [output = a->opt.output]() -> std::string {
      if (!output.empty()) return output;
      for (const SessionEntry& e : list_live_sessions()) {
        if (e.launcher_pid == ::getpid()) return e.db_path;
      }
      return "";
    };
    if (int rc = start_metrics(app, a->metrics, path, process_environment(pid), &endpoint); rc != 0) return rc;
    a->opt.summary = print_summary;
    return attach_command(a->opt);
  };
}

}  // namespace

const Command kAttachCommand = {
    "attach",
    "record a Python training process that is already running (by pid)",
    "stallscope attach [OPTIONS] PID\n"
    "stallscope attach --list",
    "Records a Python training process that is already running, started without stallscope:\n"
    "loads the collector into it (ptrace), installs the DataLoader hooks, including on the\n"
    "iterators that run now (followed from their next batch), and records into a session\n"
    "database until the process exits, the duration is up, or Ctrl-C. Ctrl-C detaches: the\n"
    "process goes on, unrecorded. DataLoader worker processes that exist already are joined and\n"
    "instrumented too (their batches from the next one they fetch), as are the workers started\n"
    "after the attach; another Python child is only sampled (CPU, run queue, memory). An -o file\n"
    "that exists is refused (exit status 2) unless --force is given.\n"
    "\n"
    "Needs permission to trace PID: the same user (root with kernel.yama.ptrace_scope >= 1).\n"
    "x86-64 Linux; GPU capture (CUPTI, NVTX) needs `stallscope run`.",
    "Example:\n"
    "  stallscope attach -o late.db --duration 60 $(pgrep -f train.py)",
    define,
};

}  // namespace stallscope::cli
